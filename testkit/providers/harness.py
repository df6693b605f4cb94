"""The seam between the provider contract suite and each provider's test stand-in.

Each provider's test module (`harness_fake.py`, `harness_aws.py`, `harness_gcp.py`) offers a generator
function `make_harness()` that starts its stand-in (moto behind a fault-and-price layer, the Compute REST
stand-in, or nothing for the fake), yields a `Harness`, and tears everything down after. The contract suite
(`test_contract.py`) runs the same tests over each.
"""

from __future__ import annotations

from typing import Protocol

from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import CloudProvider


class Harness(Protocol):
    name: str
    """`fake`, `aws` or `gcp`."""
    provider: CloudProvider
    """The provider under test, unwrapped (no retry wrapper: tests add it where they need it)."""
    node_class: NodeClass
    """A NodeClass that resolves against the stand-in."""
    zones: list[str]
    """The zones the node class can launch in, sorted."""
    placement_node_class: NodeClass
    """`node_class` asking for a placement group (policy) made per gang."""
    small_types: list[str]
    """At least two cheap CPU instance types that every zone offers, cheapest first."""
    gpu8_h100_type: str
    """The 8 x H100 type (`p5.48xlarge`, `a3-highgpu-8g`)."""

    def stockout(self, *, instance_type: str, zone: str, capacity_type: str) -> None:
        """From now on, launching this offering fails with the cloud's capacity error."""
        ...

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        """From now on, the offering can launch at most `count` more instances."""
        ...

    def break_atomicity(self) -> None:
        """From now on, the cloud's all-or-nothing launch may end partial (launches what fits), as a
        cloud without the atomic call would: the provider must clean up."""
        ...

    def throttle(self, *, times: int = 1) -> None:
        """The next `times` launch API calls answer with the cloud's throttling error (then succeed)."""
        ...

    def launches(self) -> int:
        """How many instances the stand-in has launched in all (counted there, not by the provider)."""
        ...
