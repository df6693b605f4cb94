"""The fake provider's side of the contract harness: nothing to start, the cloud is in memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from providers.aws.model import AWSNodeClass
from providers.fake import FakeProvider
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import TransientError, catalog
from testkit.builders import aws_node_class


def fake_node_class(name: str = "default", **spec: object) -> AWSNodeClass:
    """Any NodeClass will do for the fake; an AWSNodeClass because the fake serves the AWS catalog.
    `spec` sets fields of its spec (e.g. `placement`)."""
    node_class = aws_node_class(name)
    if not spec:
        return node_class
    merged = {**node_class.spec.to_dict(), **spec}
    return node_class.model_copy(update={"spec": type(node_class.spec).model_validate(merged)})


@dataclass
class FakeHarness:
    provider: FakeProvider
    node_class: NodeClass = field(default_factory=fake_node_class)
    placement_node_class: NodeClass = field(
        default_factory=lambda: fake_node_class(placement={"groupPerGang": True})
    )
    name: str = "fake"
    zones: list[str] = field(default_factory=lambda: catalog.zones("aws", "us-east-1"))
    small_types: list[str] = field(default_factory=lambda: ["m5.large", "m5.xlarge"])
    gpu8_h100_type: str = "p5.48xlarge"

    def stockout(self, *, instance_type: str, zone: str, capacity_type: str) -> None:
        self.provider.mark_unavailable(instance_type=instance_type, zone=zone, capacity_type=capacity_type)

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        self.provider.set_capacity(
            instance_type=instance_type, zone=zone, capacity_type=capacity_type, count=count
        )

    def break_atomicity(self) -> None:
        pass  # the fake launches a group under one lock: it cannot end partial

    def throttle(self, *, times: int = 1) -> None:
        self.provider.fail_next_create(TransientError("RequestLimitExceeded (fake)"), times=times)

    def launches(self) -> int:
        return self.provider.launched_total


def make_harness() -> Iterator[FakeHarness]:
    yield FakeHarness(provider=FakeProvider(catalog="aws", region="us-east-1", cluster_name="contract"))
