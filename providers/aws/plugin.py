"""The AWS plug-in: what the core learns of EC2 (see provisioner.cloudprovider.plugin). Loading it imports
the AWSNodeClass model only; boto3 is imported when the provider is built."""

from __future__ import annotations

import os

from providers.aws.karpenter import KARPENTER
from providers.aws.model import AWSNodeClass
from provisioner.api.plugins import AGE, CatalogFile, Kind, PrinterColumn
from provisioner.cloudprovider.plugin import (
    CatalogQuery,
    ChartPieces,
    Option,
    OptionError,
    OptionValues,
    ProviderPlugin,
    Wiring,
)
from provisioner.cloudprovider.protocol import CloudProvider
from provisioner.cloudprovider.types import InstanceType


def _build(options: OptionValues, wiring: Wiring) -> CloudProvider:
    from providers.aws.provider import AWSProvider

    if not options.get("aws_region"):
        raise OptionError("--aws-region: required with --cloud aws (or set AWS_REGION)")
    return AWSProvider(
        region=str(options["aws_region"]),
        cluster_name=wiring.cluster_name,
        endpoint_url=options.get("aws_endpoint"),
        interruption_queue_url=options.get("aws_interruption_queue"),
    )


def _read_types(query: CatalogQuery) -> list[InstanceType]:
    from providers.aws.provider import AWSProvider

    provider = AWSProvider(region=query.region, cluster_name="catalog", endpoint_url=query.endpoint)
    return provider.region_instance_types()


def _default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


PLUGIN = ProviderPlugin(
    name="aws",
    build=_build,
    billing_names={"aws": "AWS"},
    nodeclasses=(
        Kind(
            model=AWSNodeClass,
            kind="AWSNodeClass",
            plural="awsnodeclasses",
            short_names=("awsnc", "awsnodeclass"),
            columns=(AGE, PrinterColumn("Role", ".spec.role", priority=1)),
        ),
    ),
    catalogs={"aws": CatalogFile(package="providers.aws", file="catalog.yaml", kinds=("AWSNodeClass",))},
    options=(
        Option("--aws-region", env="AWS_REGION"),
        Option("--aws-endpoint", env="AWS_ENDPOINT_URL"),
        Option("--aws-interruption-queue", env="PROVISIONER_INTERRUPTION_QUEUE", help="SQS queue URL."),
    ),
    read_types=_read_types,
    default_region=_default_region,
    catalog_defaults={"--region": "AWS_REGION, us-east-1", "--endpoint": "AWS_ENDPOINT_URL"},
    karpenter=KARPENTER,
    chart=ChartPieces(
        values={"region": "", "roleArn": "", "interruptionQueue": "", "endpoint": ""},
        flags={
            "--aws-region": "region",
            "--aws-interruption-queue": "interruptionQueue",
            "--aws-endpoint": "endpoint",
        },
        examples={
            "region": "us-east-1",
            "roleArn": "arn:aws:iam::123456789012:role/provisioner",
            "interruptionQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/provisioner",
            "endpoint": "http://127.0.0.1:5000",
        },
        required={"region": "the region the controller launches in"},
        patterns={"roleArn": "^(arn:aws[a-z-]*:iam::[0-9]{12}:role/.+)?$"},
        annotations={"eks.amazonaws.com/role-arn": "roleArn"},
    ),
)
