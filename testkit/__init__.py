"""The test kit: the stand-ins and builders that tests/ and bench/ both run the product against (the strict
kmock API server, the controllers' world and kubelets, moto behind the fault-and-price proxy, the Compute
REST stand-in, the provider contract harnesses, the object builders). Not shipped with the package."""
