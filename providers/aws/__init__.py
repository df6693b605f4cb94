"""The AWS provider: EC2 through boto3 behind the CloudProvider protocol (see providers.aws.provider)."""

from providers.aws.provider import AWSProvider, parse_provider_id, provider_id_of

__all__ = ["AWSProvider", "parse_provider_id", "provider_id_of"]
