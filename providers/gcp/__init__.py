"""The Google Compute Engine provider: machine and accelerator types, launches with zone and spot
fallback, preemption events; google-cloud-compute behind the CloudProvider protocol. Registered as the
`gcp` plug-in (providers.gcp.plugin).

Importing the package loads no SDK: the registry imports the plug-in module, and the provider's names
below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.gcp.provider import ENDPOINT_ENV, GCPProvider

__all__ = ["ENDPOINT_ENV", "GCPProvider"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from providers.gcp import provider

        return getattr(provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
