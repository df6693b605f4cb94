"""Tests of the GCP provider against the Compute stand-in (testkit/providers/gcp)."""
