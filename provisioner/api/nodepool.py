"""The NodePool: a class of capacity (`provisioner.sh/v1`, field-compatible with `karpenter.sh/v1`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from croniter import croniter
from pydantic import AfterValidator, Field, field_validator, model_validator

from provisioner.api import durations, labels, quantities
from provisioner.api.common import (
    Condition,
    Duration,
    FieldError,
    FiniteDuration,
    Labels,
    Model,
    Named,
    NodeClassReference,
    ObjectMeta,
    Requirement,
    Taint,
    cel_rules,
    raise_all,
    requirement_conflicts,
)


class ConsolidationPolicy(StrEnum):
    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


class DisruptionReason(StrEnum):
    EMPTY = "Empty"
    UNDERUTILIZED = "Underutilized"
    DRIFTED = "Drifted"
    EXPIRED = "Expired"
    RETURN_TO_PREFERRED = "ReturnToPreferred"


_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")


def _check_budget_nodes(value: str) -> str:
    if not _BUDGET_NODES.match(value):
        raise ValueError(
            f"{value!r} is not a node count or percent: give a whole number (`5`) or a percent 0-100 (`10%`)"
        )
    return value


def _check_cron(value: str) -> str:
    if not croniter.is_valid(value):
        raise ValueError(
            f"{value!r} is not a cron schedule: five fields (minute hour day-of-month month day-of-week) "
            "or a macro such as @daily"
        )
    return value


class Budget(Model):
    """How many nodes of the pool may be disrupted at once, optionally only in a cron window."""

    model_config = cel_rules(
        ("has(self.schedule) == has(self.duration)", "schedule and duration must be given together")
    )

    nodes: Annotated[str, AfterValidator(_check_budget_nodes)] = "10%"
    """A count (`5`) or a percent of the pool's nodes (`10%`, 0-100). Default `10%`; `0` blocks disruption."""
    schedule: Annotated[str, AfterValidator(_check_cron)] | None = None
    """Cron schedule (UTC) at which the budget becomes active; needs `duration`. Default: always active."""
    duration: FiniteDuration | None = None
    """How long the budget stays active after each `schedule` tick (e.g. `8h`); needs `schedule`."""
    reasons: list[DisruptionReason] | None = None
    """The disruption reasons the budget applies to (Empty, Underutilized, Drifted, Expired,
    ReturnToPreferred). Default: all."""

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            missing = "duration" if self.duration is None else "schedule"
            raise FieldError("schedule and duration must be given together", path=(missing,))
        return self

    def max_nodes(self, total: int) -> int:
        """The budget as a node count for a pool of `total` nodes (percent rounds up, as Karpenter)."""
        if self.nodes.endswith("%"):
            percent = int(self.nodes[:-1])
            return -(-total * percent // 100)
        return int(self.nodes)


class Disruption(Model):
    """When and how the pool's nodes may be removed or replaced."""

    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    """`WhenEmpty` (remove only nodes with no workload pods) or `WhenEmptyOrUnderutilized` (also move pods
    to fewer or cheaper nodes). Default `WhenEmptyOrUnderutilized`."""
    consolidate_after: Duration = "0s"
    """How long a node must be empty or under-used before it is a candidate; `Never` turns consolidation
    off. Default `0s`."""
    budgets: list[Budget] = Field(default_factory=lambda: [Budget()], max_length=50)
    """Disruption budgets; the most restrictive active one wins. Default one budget of `10%`."""
    min_savings_per_pod_hour: Annotated[
        str, AfterValidator(_check_dollars), Field(json_schema_extra={"pattern": r"^[0-9]+(\.[0-9]+)?$"})
    ] = "0"
    """Least saving in $/h per evicted pod that justifies consolidating (so cents never cause churn).
    Default `0`. Our extension; Karpenter has none."""


def _check_dollars(value: str) -> str:
    if not re.match(r"^[0-9]+(\.[0-9]+)?$", value):
        raise ValueError(f"{value!r} is not an amount of dollars per hour such as 0.05")
    return value


def check_resource_amounts(value: dict[str, str | int]) -> dict[str, str | int]:
    """Every amount a Kubernetes quantity >= 0 (pool limits, team and department quotas); every problem
    reported at once."""
    errors: list[FieldError] = []
    for name, amount in value.items():
        try:
            parsed = quantities.parse_quantity(amount)
        except quantities.QuantityError as err:
            errors.append(FieldError(str(err), path=(name,)))
            continue
        if parsed < 0:
            errors.append(FieldError(f"{amount!r} is negative; amounts must be >= 0", path=(name,)))
    raise_all(errors)
    return value


class NodeClaimTemplateMetadata(Model):
    """Labels and annotations every node of the pool gets."""

    labels: Labels = Field(default_factory=dict)
    """Labels put on each node (and usable by pods' node selectors). Keys under `provisioner.sh/nodepool`
    and `kubernetes.io/hostname` are reserved."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations put on each node."""

    @field_validator("labels")
    @classmethod
    def _no_restricted(cls, value: dict[str, str]) -> dict[str, str]:
        raise_all(
            [
                FieldError(f"label {key} is set by the provisioner and may not be set here", path=(key,))
                for key in value
                if key in labels.RESTRICTED_LABELS
            ]
        )
        return value


class NodeClaimTemplateSpec(Model):
    """What each node of the pool must be."""

    node_class_ref: NodeClassReference
    """The NodeClass that launches the nodes (`kind: AWSNodeClass` or `GCPNodeClass`)."""
    requirements: list[Requirement] = Field(default_factory=list, max_length=100)
    """Constraints on node labels (instance type, zone, capacity type, GPU name/count/memory, arch...).
    Default none: any type the NodeClass offers."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints on every node; pods must tolerate them. Default none."""
    startup_taints: list[Taint] = Field(default_factory=list)
    """Taints present at start-up and removed by another controller (e.g. a GPU driver installer). Pods
    need not tolerate them. Default none."""
    expire_after: Duration = "720h"
    """Age after which a node is replaced; `Never` to keep nodes forever. Default `720h`."""
    termination_grace_period: FiniteDuration | None = None
    """Longest a drain may take before pods are deleted anyway (do-not-disrupt and PDBs included).
    Default: wait forever."""

    @field_validator("requirements")
    @classmethod
    def _consistent(cls, value: list[Requirement]) -> list[Requirement]:
        # Point at the last requirement on the contradictory key: the one that made the set empty.
        last_index: dict[str, int] = {req.key: i for i, req in enumerate(value)}
        errors: list[FieldError] = []
        for key, index in last_index.items():
            problems = requirement_conflicts([req for req in value if req.key == key])
            if problems:
                errors.append(FieldError("contradictory requirements: " + "; ".join(problems), path=(index,)))
        raise_all(errors)
        return value


class NodeClaimTemplate(Model):
    """The template every NodeClaim of the pool is made from."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    """Labels and annotations for the nodes."""
    spec: NodeClaimTemplateSpec
    """Requirements, taints and the NodeClass."""


class NodePoolSpec(Model):
    """A class of capacity."""

    template: NodeClaimTemplate
    """What the pool's nodes look like."""
    disruption: Disruption = Field(default_factory=Disruption)
    """Consolidation policy and budgets."""
    limits: Annotated[dict[str, str | int], AfterValidator(check_resource_amounts)] = Field(
        default_factory=dict
    )
    """Caps on the total capacity of the pool's nodes, any resource (`cpu`, `memory`, `nvidia.com/gpu`,
    `nodes`). Default none."""
    weight: int | None = Field(default=None, ge=1, le=100)
    """Priority among pools, 1-100, higher tried first. Default none (tried after weighted pools)."""

    def limits_base_units(self) -> quantities.ResourceList:
        return quantities.parse_resource_list(self.limits)


class NodePoolStatus(Model):
    """What the controller last observed about the pool."""

    resources: dict[str, str] = Field(default_factory=dict)
    """Capacity of the pool's nodes per resource, plus `nodes` (the count)."""
    conditions: list[Condition] = Field(default_factory=list)
    """Ready, NodeClassReady, LimitsReached."""


class NodePool(Named, Model):
    """A NodePool (`provisioner.sh/v1`): a class of capacity. Requirements on node labels, taints, limits, a
    weight among pools, a disruption policy and the NodeClass that launches its nodes. Field-compatible with
    Karpenter's `karpenter.sh/v1` NodePool."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["NodePool"] = "NodePool"
    metadata: ObjectMeta
    spec: NodePoolSpec
    status: NodePoolStatus | None = None

    @property
    def weight(self) -> int:
        return self.spec.weight or 0

    @property
    def min_savings_per_pod_hour(self) -> Decimal:
        return Decimal(self.spec.disruption.min_savings_per_pod_hour)

    def expire_after(self) -> timedelta | None:
        return durations.parse_duration(self.spec.template.spec.expire_after)


def live(pools: Iterable[NodePool]) -> list[NodePool]:
    """The pools new capacity may come from: those not being deleted (no `deletionTimestamp`), in the
    order given. The one owner of that filter: provisioning, ProvisioningRequests, the disruption
    planner's replacements and the quota book all take their pools through it."""
    return [p for p in pools if p.metadata.deletion_timestamp is None]
