"""Which pools a pod may use, in which order: the pod's own list, else its team's, else the cluster's
default CPU or GPU pools, else the pool named `default`, else every pool by weight (`by_weight`). Pure;
the solver and the quota book both resolve a pod's order here, with its team's list (`team_lists`).

Owns the resolution and the refusal of a pod its default list can never serve (GPUs asked of pools that
launch no GPU node). Trying the pools in that order, and the reasons per pool, stay with the solver;
where the defaults are set (`provisioner run --default-cpu-pools`, the chart's `defaultNodePools`, a
scenario's `spec.defaultNodePools`) is the callers' business.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from provisioner.api import accelerators
from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.state.objects import Pod
from provisioner.state.snapshot import Snapshot

DEFAULT_POOL = "default"
"""With no list set anywhere, a pool of this name takes every pod (Run:ai's Default pool), unless it is
annotated `provisioner.sh/default-pool: "false"` (a pool imported from Karpenter, where names mean
nothing and pools are tried by weight)."""


def default_pool_names(nodepools: Iterable[NodePool]) -> frozenset[str]:
    """The names `resolve` may treat as the default pool: `default`, unless the pool opts out."""
    return frozenset(
        p.name
        for p in nodepools
        if p.name == DEFAULT_POOL and p.metadata.annotations.get(wk.DEFAULT_POOL, "").lower() != "false"
    )


@dataclass(frozen=True, slots=True)
class ClusterDefaults:
    """The cluster's default pool lists, set once for the cluster (Determined's default CPU and GPU
    pools). Empty: not set, so the next rule applies."""

    cpu: tuple[str, ...] = ()
    """Pools, in order, for a pod that asks for no GPU and names no list."""
    gpu: tuple[str, ...] = ()
    """Pools, in order, for a pod that asks for GPUs (`nvidia.com/gpu` or `amd.com/gpu`) and names none."""

    @classmethod
    def of(cls, *, cpu: Sequence[str] = (), gpu: Sequence[str] = ()) -> ClusterDefaults:
        """From lists or comma-separated text (`"cpu-default-aws, cpu-default-gcp"`), blanks dropped."""
        return cls(cpu=_names(cpu), gpu=_names(gpu))


NO_DEFAULTS = ClusterDefaults()
"""No cluster default lists set."""


@dataclass(frozen=True, slots=True)
class PoolOrder:
    """A pod's pools in the order tried, and where that order comes from (for the reasons)."""

    pools: tuple[str, ...] | None
    """Pool names in order (unknown names included: they get a reason); None: every pool by weight."""
    origin: str
    """`annotation`, `team`, `cluster-cpu`, `cluster-gpu`, `default-pool` or `weight`."""

    @property
    def described(self) -> str:
        """Where the list comes from, in words a tenant can act on."""
        return _ORIGINS[self.origin]


_ORIGINS = {
    "annotation": f"its {wk.NODEPOOLS} annotation",
    "team": "its team's defaultNodePools",
    "cluster-cpu": "the cluster's default CPU pools",
    "cluster-gpu": "the cluster's default GPU pools",
    "default-pool": f"the pool named {DEFAULT_POOL!r}",
    "weight": "every pool by weight",
}


class _Weighted(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> int: ...


W = TypeVar("W", bound=_Weighted)


def by_weight(pools: Iterable[W]) -> list[W]:
    """Pools in the order tried when a pod's order is "every pool": weight descending, then name. The one
    owner of that order (the solver's compiled pools and the quota book's cluster order both use it)."""
    return sorted(pools, key=lambda p: (-p.weight, p.name))


def team_lists(snapshot: Snapshot) -> dict[str, tuple[str, ...]]:
    """Namespace -> its team's `defaultNodePools` (namespaces whose team sets one), by the one rule for a
    pod's team (`Snapshot.team_names`): what `resolve` takes as `team_default` for a pod there."""
    lists = {t.name: tuple(t.spec.default_node_pools) for t in snapshot.teams if t.spec.default_node_pools}
    return {ns: lists[team] for ns, team in snapshot.team_names().items() if team in lists}


def asks_for_gpus(pod: Pod) -> int:
    """How many GPUs (of any maker) the pod requests."""
    return accelerators.gpus(pod.requests)


def resolve(
    pod: Pod,
    *,
    team_default: Sequence[str] | Mapping[str, Sequence[str]] = (),
    defaults: ClusterDefaults,
    pool_names: Collection[str],
) -> PoolOrder:
    """The pod's pool order, first rule that applies: its `provisioner.sh/nodepools` annotation; its
    team's default list; the cluster's default GPU pools (a pod asking for GPUs) or CPU pools (any
    other); the pool named `default` when `pool_names` (see `default_pool_names`) holds it; else every
    pool by weight (None). `team_default`: the team's list, or every namespace's (`team_lists`)."""
    if pod.nodepools:
        return PoolOrder(pod.nodepools, "annotation")
    if isinstance(team_default, Mapping):
        team_default = team_default.get(pod.namespace, ())
    team = _names(team_default)
    if team:
        return PoolOrder(team, "team")
    if asks_for_gpus(pod):
        if defaults.gpu:
            return PoolOrder(defaults.gpu, "cluster-gpu")
    elif defaults.cpu:
        return PoolOrder(defaults.cpu, "cluster-cpu")
    if DEFAULT_POOL in pool_names:
        return PoolOrder((DEFAULT_POOL,), "default-pool")
    return PoolOrder(None, "weight")


def refusal(pod: Pod, order: PoolOrder, *, gpu_pools: Collection[str]) -> str | None:
    """Why the pod can never run on the pools a default gave it, or None. A pod asking for GPUs whose
    default list holds no pool that launches GPU nodes (`gpu_pools`) is refused at once, instead of
    waiting for capacity that will never come. A pod's own annotation is left to the per-pool reasons."""
    if order.pools is None or order.origin == "annotation":
        return None
    gpus = asks_for_gpus(pod)
    if not gpus or any(name in gpu_pools for name in order.pools):
        return None
    fix = _FIXES.get(order.origin, "fix that list")
    return (
        f"asks for {gpus} GPU{'s' if gpus != 1 else ''}, but its pools come from {order.described} "
        f"({', '.join(order.pools)}) and none of them launches GPU nodes; name GPU pools in the pod's "
        f"{wk.NODEPOOLS} annotation, or {fix}"
    )


_FIXES = {
    "team": "in its team's defaultNodePools",
    "cluster-gpu": "fix the cluster's default GPU pools (--default-gpu-pools, the chart's defaultNodePools.gpu)",
    "default-pool": "set the cluster's default GPU pools (--default-gpu-pools, the chart's defaultNodePools.gpu)",
}


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else [n for part in value for n in part.split(",")]
    return tuple(dict.fromkeys(n.strip() for n in items if n.strip()))
