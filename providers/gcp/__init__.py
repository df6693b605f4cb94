"""The Google Compute Engine provider: machine and accelerator types, launches with zone and spot
fallback, preemption events; google-cloud-compute behind the CloudProvider protocol."""

from providers.gcp.provider import ENDPOINT_ENV, GCPProvider

__all__ = ["ENDPOINT_ENV", "GCPProvider"]
