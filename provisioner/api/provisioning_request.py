"""The ProvisioningRequest (`autoscaling.x-k8s.io/v1`), as Cluster Autoscaler defines it and Kueue's
ProvisioningRequest admission check writes it: capacity for a set of pods (PodTemplates times counts),
checked or launched all at once, with the outcome in standard conditions a Kueue user reads.

Models and names only, with the CRD our chart ships for clusters without Cluster Autoscaler's. What the
provisioner does with a request is `provisioner.controllers.provisioning_requests`'.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from provisioner.api.common import Condition, Model, Named, ObjectMeta

GROUP: Final = "autoscaling.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

CHECK_CAPACITY: Final = "check-capacity.autoscaling.x-k8s.io"
"""Class: say whether the cluster's capacity can hold the pods now; launch nothing."""
BEST_EFFORT_ATOMIC_SCALE_UP: Final = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
"""Class: launch the nodes for all of the pods at once, or none."""
CLASSES: Final = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC_SCALE_UP)

# Condition types, with Cluster Autoscaler's meanings.
ACCEPTED: Final = "Accepted"
"""The request was accepted: the autoscaler will try to provision (or check) its capacity."""
PROVISIONED: Final = "Provisioned"
"""True: the capacity for all of its pods exists (booked for them for `BOOKING_TIME`)."""
FAILED: Final = "Failed"
"""True: the capacity cannot be obtained (bad request, or `ValidUntilSeconds` passed); terminal."""
CAPACITY_REVOKED: Final = "CapacityRevoked"
"""True: capacity that was Provisioned is gone (a node interrupted or removed) before its pods ran."""
BOOKING_EXPIRED: Final = "BookingExpired"
"""True: the request was Provisioned, and its booking ran out before its pods took the capacity."""

CONSUME_ANNOTATIONS: Final = (
    "autoscaling.x-k8s.io/consume-provisioning-request",
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request",
)
"""Pod annotations naming the request (same namespace) whose capacity the pod runs on: the current key
and the one Kueue wrote before it (both are read)."""

QUOTA_ANNOTATION: Final = "provisioner.sh/quota"
"""On a request of a team's namespace, when replicas share the pools (`provisioner run --shards`): the
word of the replica holding quota admission on its pods, `QUOTA_ADMITTED` when they fit their team's
quota as one gang, else why not. The replica that provisions the request reads it, and decides no quota
itself."""

QUOTA_ADMITTED: Final = "Admitted"

VALID_UNTIL_SECONDS: Final = "ValidUntilSeconds"
"""Parameter of the atomic class: how long (seconds since creation) to keep trying before Failed."""


class Reference(Model):
    """An object in the request's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """`metadata.name` of the PodTemplate."""


class PodSet(Model):
    """One group of identical pods: a PodTemplate and how many pods of it."""

    pod_template_ref: Reference
    """The PodTemplate (same namespace) the pods are made of: requests, node selector, tolerations."""
    count: int = Field(ge=1)
    """How many pods of the template."""


class ProvisioningRequestSpec(Model):
    """What capacity is asked for, and how."""

    pod_sets: list[PodSet] = Field(min_length=1, max_length=32)
    """The groups of pods to provision for (1 to 32)."""
    provisioning_class_name: str = Field(min_length=1, max_length=253)
    """`check-capacity.autoscaling.x-k8s.io` (check only) or `best-effort-atomic-scale-up.autoscaling.x-k8s.io`
    (launch all or nothing); another class is left to the autoscaler that owns it."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """Class parameters, e.g. `ValidUntilSeconds` for the atomic class. Default none."""


class ProvisioningRequestStatus(Model):
    """What the autoscaler found, as conditions."""

    conditions: list[Condition] = Field(default_factory=list)
    """`Accepted`, `Provisioned`, `Failed`, `CapacityRevoked`, `BookingExpired`."""
    provisioning_class_details: dict[str, str] = Field(default_factory=dict)
    """Class-specific details for people and tools (e.g. the zone the capacity is in)."""


class ProvisioningRequest(Named, Model):
    """Capacity asked for a set of pods at once (Cluster Autoscaler's ProvisioningRequest)."""

    api_version: Literal["autoscaling.x-k8s.io/v1"] = Field("autoscaling.x-k8s.io/v1", alias="apiVersion")
    kind: Literal["ProvisioningRequest"] = "ProvisioningRequest"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ProvisioningRequestSpec
    """The pods and the class; immutable once created."""
    status: ProvisioningRequestStatus = Field(default_factory=ProvisioningRequestStatus)
    """Written by the autoscaler."""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def total(self) -> int:
        """How many pods it asks capacity for."""
        return sum(ps.count for ps in self.spec.pod_sets)
