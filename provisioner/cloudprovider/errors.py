"""The errors every provider raises. Providers translate SDK errors into these at the edge
(`raise InsufficientCapacity(...) from err`); controllers branch only on these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OfferingKey:
    """Which offering ran out: instance type, zone, capacity type, and for a reserved offering the
    reservation (a full reservation says nothing of another reservation of the same type and zone)."""

    instance_type: str
    zone: str
    capacity_type: str
    reservation_id: str = ""

    def __str__(self) -> str:
        base = f"{self.instance_type}/{self.zone}/{self.capacity_type}"
        return f"{base}/{self.reservation_id}" if self.reservation_id else base


@dataclass(frozen=True, slots=True)
class PartialLaunch:
    """Instances a group launch started in one offering and terminated because the offering could not
    take the whole group: billed from launch to termination, for the ledger to count."""

    offering: OfferingKey
    provider_ids: tuple[str, ...]
    price: float
    """$/h of each."""


class CloudProviderError(Exception):
    """Base of the provider errors."""


class InsufficientCapacity(CloudProviderError):
    """No capacity for these offerings now. `kind` says which (stockout, quota) so caches can keep each
    for its own TTL."""

    def __init__(
        self,
        offerings: list[OfferingKey],
        message: str = "",
        *,
        kind: str = "capacity",
        partial: tuple[PartialLaunch, ...] = (),
    ) -> None:
        self.offerings = list(offerings)
        self.kind = kind
        self.partial = partial
        """Group launches that ended partial on the way and were terminated (see PartialLaunch)."""
        names = ", ".join(str(o) for o in self.offerings) or "no offering"
        super().__init__(message or f"insufficient {kind} for {names}")


class NotFound(CloudProviderError):
    """The instance does not exist (any more)."""


class NodeClassNotReady(CloudProviderError):
    """The NodeClass's selectors (subnets, images, ...) did not resolve; nothing can launch with it."""


class TransientError(CloudProviderError):
    """Throttling, 5xx, timeouts: the only error retried."""


class CreateError(CloudProviderError):
    """The launch failed for a reason retrying will not fix (bad AMI, permissions...)."""
