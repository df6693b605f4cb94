"""The CloudProvider protocol, instance types and offerings, the errors, and (in wrappers) retries,
metrics and the unavailable-offerings cache. Providers import only this and `provisioner.api`."""

from provisioner.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacity,
    NodeClassNotReady,
    NotFound,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.protocol import CloudProvider, GangPlacement, Instance, InterruptionEvent
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, Reservation, instance_labels

__all__ = [
    "GPU",
    "CloudProvider",
    "CloudProviderError",
    "CreateError",
    "GangPlacement",
    "Instance",
    "InstanceType",
    "InsufficientCapacity",
    "InterruptionEvent",
    "NodeClassNotReady",
    "NotFound",
    "Offering",
    "OfferingKey",
    "Reservation",
    "TransientError",
    "instance_labels",
]
