"""The AWS side of the contract harness: boto3 over real HTTP to moto's server behind the
fault-and-price proxy (testkit/providers/aws/faults.py), which injects stockouts and throttling and
serves prices."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.aws import AWSProvider
from provisioner.api.nodeclass import NodeClass
from testkit.providers.aws import world
from testkit.providers.aws.faults import FaultProxy
from testkit.providers.aws.stack import REGION, Stack, shared_stack


@dataclass
class AWSHarness:
    provider: AWSProvider
    node_class: NodeClass
    zones: list[str]
    proxy: FaultProxy
    world: world.World
    placement_node_class: NodeClass = field(
        default_factory=lambda: world.node_class(placement={"groupPerGang": True})
    )
    name: str = "aws"
    small_types: list[str] = field(default_factory=lambda: ["m5.large", "m5.xlarge"])
    gpu8_h100_type: str = "p5.48xlarge"

    def stockout(self, *, instance_type: str, zone: str, capacity_type: str) -> None:
        self.proxy.stockout(instance_type=instance_type, zone=zone, capacity_type=capacity_type)

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        self.proxy.set_capacity(
            instance_type=instance_type, zone=zone, capacity_type=capacity_type, count=count
        )

    def break_atomicity(self) -> None:
        self.proxy.partial_fleets = True

    def throttle(self, *, times: int = 1) -> None:
        self.proxy.throttle(times=times)

    def launches(self) -> int:
        return self.proxy.launched


def make_provider(stack: Stack, **overrides: Any) -> AWSProvider:
    """The provider under test: one attempt per call (retrying is the wrapper's job, and a test that
    injects one throttle expects one call), the stack's test credentials, the proxy as endpoint."""
    args: dict[str, Any] = {
        "region": REGION,
        "cluster_name": "contract",
        "endpoint_url": stack.url,
        "session": stack.session(),
        "max_attempts": 1,
    }
    args.update(overrides)
    return AWSProvider(**args)


def make_harness() -> Iterator[AWSHarness]:
    stack = shared_stack()
    stack.reset()
    account = world.build(stack)
    yield AWSHarness(
        provider=make_provider(stack),
        node_class=account.node_class,
        zones=account.zones,
        proxy=stack.proxy,
        world=account,
    )
