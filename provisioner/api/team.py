"""Teams and Departments (`provisioner.sh/v1`): who owns workloads, and what each is promised per NodePool.

Run:ai's project is our Team. A Department holds a quota per pool per resource; each of its Teams holds
its own quota per pool, may borrow idle capacity beyond it (`overQuota`) and shares what is borrowed by
`overQuotaWeight`. Validation here is local to one object; the checks across objects (over-subscription,
a namespace claimed twice, references) are `provisioner.api.team_checks`; the arithmetic of use and the
admission decision are `provisioner.quota`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.api.common import FieldError, Model, Named, ObjectMeta, check_name
from provisioner.api.nodepool import check_resource_amounts

Name = Annotated[str, AfterValidator(check_name)]
ResourceAmounts = Annotated[dict[str, str | int], AfterValidator(check_resource_amounts)]


class DepartmentQuota(Model):
    """What a department is promised on one NodePool."""

    node_pool: Name
    """The NodePool's name."""
    resources: ResourceAmounts = Field(default_factory=dict)
    """Guaranteed amount per resource (`nvidia.com/gpu: "32"`, `cpu: "512"`, `memory: 2Ti`, any extended
    resource). A resource not named here is not limited by this entry. Default none."""
    over_quota: bool = True
    """Whether pods may run beyond the quota on this pool, borrowing what others leave idle (only pods
    labelled `provisioner.sh/preemptible: "true"`; they are reclaimed when the owner needs it back).
    Default `true`."""
    borrowing_limit: ResourceAmounts | None = None
    """With `overQuota: true`: per resource, how much it may use on this pool beyond its quota at most
    (Kueue's `borrowingLimit`; `overQuota: false` is a limit of 0 on everything). A resource not named
    here may be borrowed without bound. Default none."""
    lending_limit: ResourceAmounts | None = None
    """Per resource, how much of its unused quota others may borrow at most (Kueue's `lendingLimit`): the
    rest of its quota stays free for its own pods even while idle. A resource not named here is lent in
    full. At most the quota. Default none."""

    def amounts(self) -> quantities.ResourceList:
        return quantities.parse_resource_list(self.resources)

    def borrowing(self) -> quantities.ResourceList:
        return quantities.parse_resource_list(self.borrowing_limit or {})

    def lending(self) -> quantities.ResourceList:
        return quantities.parse_resource_list(self.lending_limit or {})

    @model_validator(mode="after")
    def _limits_fit(self) -> Self:
        if self.borrowing_limit is not None and not self.over_quota:
            raise FieldError(
                "borrowingLimit needs overQuota: true (overQuota: false already means no borrowing)",
                path=("borrowingLimit",),
            )
        if self.lending_limit is not None:
            amounts = self.amounts()
            for name, amount in self.lending().items():
                if name not in amounts:
                    raise FieldError(
                        f"{name} has no quota in resources, so there is nothing of it to lend",
                        path=("lendingLimit", name),
                    )
                if amount > amounts[name]:
                    raise FieldError(
                        f"{self.lending_limit[name]} is more than the quota {self.resources[name]}; "
                        "a lending limit is at most the quota",
                        path=("lendingLimit", name),
                    )
        return self


class TeamQuota(DepartmentQuota):
    """What a team is promised on one NodePool."""

    over_quota_weight: int = Field(1, ge=1, le=1000)
    """The team's share of borrowed (idle) capacity among the teams borrowing on this pool: a team of
    weight 2 gets twice what a team of weight 1 gets. 1-1000, default 1."""


# The API server refuses the repeats the validators below refuse: a list of quotas keyed by pool, lists
# of names that are sets.
_ONE_PER_POOL: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["nodePool"]}
_SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}


def _one_entry_per_pool(value: list[DepartmentQuota]) -> None:
    seen: dict[str, int] = {}
    for i, entry in enumerate(value):
        if entry.node_pool in seen:
            raise FieldError(
                f"NodePool {entry.node_pool!r} has a quota entry already (quotas[{seen[entry.node_pool]}]); "
                "give one entry per pool",
                path=(i, "nodePool"),
            )
        seen[entry.node_pool] = i


class PoolUse(Model):
    """Quota and use on one pool, as the controller last counted them (quantities as strings)."""

    node_pool: str
    """The NodePool's name."""
    quota: dict[str, str] = Field(default_factory=dict)
    """The quota on this pool, per resource."""
    allocated: dict[str, str] = Field(default_factory=dict)
    """What admitted pods request on this pool, per resource."""
    allocated_non_preemptible: dict[str, str] = Field(default_factory=dict)
    """The part of `allocated` held by pods that are not preemptible (never reclaimed)."""
    over_quota: dict[str, str] = Field(default_factory=dict)
    """The part of `allocated` beyond the quota (borrowed; may be reclaimed)."""
    pending: dict[str, str] = Field(default_factory=dict)
    """What pods waiting for admission on this pool (their first pool) request."""


class QuotaStatus(Model):
    """Use per pool, plus totals over pools for `kubectl get` columns."""

    pools: list[PoolUse] = Field(default_factory=list)
    """Quota and use per NodePool."""
    total: PoolUse | None = None
    """Sums over every pool (`nodePool` is `*`)."""
    waiting: int = 0
    """Pods waiting for admission."""


class DepartmentSpec(Model):
    """A department's quotas."""

    quotas: list[DepartmentQuota] = Field(default_factory=list, json_schema_extra=_ONE_PER_POOL)
    """One entry per NodePool. A pool with no entry counts as quota 0 with over-quota allowed."""

    @field_validator("quotas")
    @classmethod
    def _unique(cls, value: list[DepartmentQuota]) -> list[DepartmentQuota]:
        _one_entry_per_pool(value)
        return value


class TeamPreemption(Model):
    """How a team's waiting pods may take its own quota back from its running pods (Kueue's
    ClusterQueue `preemption.withinClusterQueue`)."""

    within_team: Literal["LowerPriority", "LowerOrNewerEqualPriority", "Never"] = "LowerPriority"
    """`LowerPriority`: a pod that does not fit its team's quota counts the team's own pods of lower
    priority on that pool as giving way (at equal priority, preemptible pods give way to one that is not;
    a pod that is not preemptible never gives way to one that is). Of those, it evicts what is in the
    way, lowest priority first: pods that are not preemptible beyond the quota, and preemptible ones as
    far as the pool (or the team's ceiling, or its department) lacks room; the others stay on as what the
    team borrows. `LowerOrNewerEqualPriority`: besides, pods of equal priority created after it give way
    (Kueue's option of that name). `Never`: it waits. Default `LowerPriority`."""


class TeamSpec(Model):
    """A team: its department, its namespaces, its pools and its quotas."""

    department: Name | None = None
    """The Department the team belongs to; its quota bounds the sum of its teams'. Default none."""
    namespaces: list[Name] = Field(default_factory=list, json_schema_extra=_SET)
    """Namespaces whose pods are the team's. A namespace labelled `provisioner.sh/team: NAME` is the
    team's too. Default none."""
    default_node_pools: list[Name] = Field(default_factory=list, json_schema_extra=_SET)
    """Ordered pool list for the team's pods that name none (`provisioner.sh/nodepools`). Default none
    (the cluster's order)."""
    quotas: list[TeamQuota] = Field(default_factory=list, json_schema_extra=_ONE_PER_POOL)
    """One entry per NodePool. A pool with no entry counts as quota 0 with over-quota allowed."""
    preemption: TeamPreemption = Field(default_factory=TeamPreemption)
    """Priority preemption among the team's own pods. Default: lower priority pods give way."""

    @field_validator("quotas")
    @classmethod
    def _unique(cls, value: list[TeamQuota]) -> list[TeamQuota]:
        _one_entry_per_pool(value)  # type: ignore[arg-type]
        return value

    @field_validator("namespaces", "default_node_pools")
    @classmethod
    def _no_repeats(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            if name in value[:i]:
                raise FieldError(f"{name!r} is listed twice", path=(i,))
        return value


class Department(Named, Model):
    """A Department (`provisioner.sh/v1`): a group of Teams with a quota per NodePool per resource."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["Department"] = "Department"
    metadata: ObjectMeta
    spec: DepartmentSpec = Field(default_factory=DepartmentSpec)
    status: QuotaStatus | None = None

    def quota_for(self, pool: str) -> DepartmentQuota | None:
        return next((q for q in self.spec.quotas if q.node_pool == pool), None)


class Team(Named, Model):
    """A Team (`provisioner.sh/v1`, Run:ai's project): owns the pods of its namespaces, with a quota per
    NodePool, over-quota borrowing and a default pool list."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["Team"] = "Team"
    metadata: ObjectMeta
    spec: TeamSpec = Field(default_factory=TeamSpec)
    status: QuotaStatus | None = None

    def quota_for(self, pool: str) -> TeamQuota | None:
        return next((q for q in self.spec.quotas if q.node_pool == pool), None)


def namespace_teams(teams: Iterable[Team], labels: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The one rule for whose a namespace's pods are, used by quota, the ledger and disruption records
    alike: the Team whose `spec.namespaces` lists it (the first by name, when two do), else the team its
    `provisioner.sh/team` label names (a label may name a team with no Team object: its cost is still
    booked to it; no quota applies). Namespace -> team name."""
    out = {ns: found for ns, ns_labels in labels.items() if (found := ns_labels.get(wk.TEAM))}
    for team in sorted(teams, key=lambda t: t.name, reverse=True):
        for ns in team.spec.namespaces:
            out[ns] = team.name
    return out
