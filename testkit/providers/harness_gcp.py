"""The GCP side of the provider contract suite: the real google-cloud-compute client, over HTTP, against
the local Compute Engine stand-in (testkit/providers/gcp/standin.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.gcp import GCPProvider
from providers.gcp.model import GCPNodeClass, GCPNodeClassSpec
from provisioner.api import labels as wk
from provisioner.api.common import ObjectMeta
from testkit.providers.gcp import fixtures
from testkit.providers.gcp.standin import ComputeStandIn

IMAGE = "projects/debian-cloud/global/images/family/debian-12"
CLUSTER = "test-cluster"


def gcp_node_class(name: str = "default", **spec: object) -> GCPNodeClass:
    """A GCPNodeClass that resolves against the stand-in; `spec` overrides fields (snake_case)."""
    fields: dict[str, object] = {"project": fixtures.PROJECT, "region": fixtures.REGION, "image": IMAGE}
    fields.update(spec)
    return GCPNodeClass(metadata=ObjectMeta(name=name), spec=GCPNodeClassSpec(**fields))


def make_provider(standin: ComputeStandIn, **overrides: Any) -> GCPProvider:
    kwargs: dict[str, Any] = {
        "project": standin.project,
        "region": fixtures.REGION,
        "cluster_name": CLUSTER,
        "endpoint": standin.url,
        "operation_timeout": 10.0,
    }
    kwargs.update(overrides)
    return GCPProvider(**kwargs)


_CAPACITY_MODEL = {wk.CAPACITY_TYPE_SPOT: "SPOT", wk.CAPACITY_TYPE_ON_DEMAND: "STANDARD"}


@dataclass
class GCPHarness:
    standin: ComputeStandIn
    provider: GCPProvider
    node_class: GCPNodeClass
    placement_node_class: GCPNodeClass = field(
        default_factory=lambda: gcp_node_class(placement={"compactPerGang": True})
    )
    name: str = "gcp"
    gpu8_h100_type: str = "a3-highgpu-8g"

    @property
    def zones(self) -> list[str]:
        return sorted(fixtures.ZONES)

    @property
    def small_types(self) -> list[str]:
        return ["e2-standard-2", "e2-standard-4"]

    def stockout(self, *, instance_type: str, zone: str, capacity_type: str) -> None:
        self.standin.stockout(
            machine_type=instance_type, zone=zone, provisioning_model=_CAPACITY_MODEL[capacity_type]
        )

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        self.standin.set_capacity(
            machine_type=instance_type,
            zone=zone,
            provisioning_model=_CAPACITY_MODEL[capacity_type],
            count=count,
        )

    def break_atomicity(self) -> None:
        self.standin.ignore_min_count()

    def throttle(self, *, times: int = 1) -> None:
        self.standin.throttle(times=times, methods={"instances.insert"})

    def launches(self) -> int:
        return self.standin.launches()


def make_harness() -> Iterator[GCPHarness]:
    standin = ComputeStandIn().start()
    try:
        yield GCPHarness(standin=standin, provider=make_provider(standin), node_class=gcp_node_class())
    finally:
        standin.stop()
