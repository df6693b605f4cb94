"""The GCP plug-in: what the core learns of Compute Engine (see provisioner.cloudprovider.plugin).
Loading it imports the GCPNodeClass model only; google-cloud-compute is imported when the provider is
built."""

from __future__ import annotations

import os

from providers.gcp.model import GCPNodeClass
from provisioner.api.plugins import AGE, CatalogFile, Kind, PrinterColumn
from provisioner.cloudprovider import catalog
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
    from providers.gcp.provider import GCPProvider

    project, region = options.get("gcp_project"), options.get("gcp_region")
    if not project or not region:
        raise OptionError("--gcp-project, --gcp-region: both required with --cloud gcp")
    return GCPProvider(
        project=project, region=region, cluster_name=wiring.cluster_name, endpoint=options.get("gcp_endpoint")
    )


def _read_types(query: CatalogQuery) -> list[InstanceType]:
    from providers.gcp.provider import ENDPOINT_ENV, GCPProvider

    project = query.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise OptionError("required with --cloud gcp (or set GOOGLE_CLOUD_PROJECT)", flag="--project")
    provider = GCPProvider(
        project=project,
        region=query.region,
        cluster_name="catalog",
        endpoint=query.endpoint or os.environ.get(ENDPOINT_ENV),
    )
    return provider.region_instance_types()


PLUGIN = ProviderPlugin(
    name="gcp",
    build=_build,
    billing_names={"gce": "Google Cloud", "gcp": "Google Cloud"},
    nodeclasses=(
        Kind(
            model=GCPNodeClass,
            kind="GCPNodeClass",
            plural="gcpnodeclasses",
            short_names=("gcpnc", "gcpnodeclass"),
            columns=(PrinterColumn("Project", ".spec.project"), AGE),
        ),
    ),
    catalogs={"gcp": CatalogFile(package="providers.gcp", file="catalog.yaml", kinds=("GCPNodeClass",))},
    options=(
        Option("--gcp-project", env="GOOGLE_CLOUD_PROJECT"),
        Option("--gcp-region", env="PROVISIONER_GCP_REGION"),
        Option("--gcp-endpoint", env="PROVISIONER_GCP_ENDPOINT"),
    ),
    read_types=_read_types,
    default_region=lambda: catalog.default_region("gcp"),
    catalog_defaults={
        "--region": "us-central1",
        "--project": "GOOGLE_CLOUD_PROJECT",
        "--endpoint": "PROVISIONER_GCP_ENDPOINT",
    },
    chart=ChartPieces(
        values={"project": "", "region": "", "serviceAccount": "", "endpoint": ""},
        flags={"--gcp-project": "project", "--gcp-region": "region", "--gcp-endpoint": "endpoint"},
        examples={
            "project": "my-project",
            "region": "us-central1",
            "serviceAccount": "provisioner@my-project.iam.gserviceaccount.com",
            "endpoint": "http://127.0.0.1:8080",
        },
        required={"project": "", "region": ""},
        patterns={"serviceAccount": "^([^@]+@[^@]+\\.iam\\.gserviceaccount\\.com)?$"},
        annotations={"iam.gke.io/gcp-service-account": "serviceAccount"},
    ),
)
