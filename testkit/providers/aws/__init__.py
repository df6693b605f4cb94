"""Test stand-ins for AWS: moto's server behind the fault-and-price proxy, and the account the tests use."""
