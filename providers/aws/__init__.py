"""The AWS provider: EC2 through boto3 behind the CloudProvider protocol (see providers.aws.provider),
registered as the `aws` plug-in (providers.aws.plugin).

Importing the package loads no SDK: the registry imports the plug-in module, and the provider's names
below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.aws.provider import AWSProvider, parse_provider_id, provider_id_of

__all__ = ["AWSProvider", "parse_provider_id", "provider_id_of"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from providers.aws import provider

        return getattr(provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
