"""What a solve's pod shapes are made of, below the modules that use them: a `Variant` (one reading of a
pod's constraints, with the verdicts `fit` and `topology` cache on it), its per-pool `PoolFit`, and the
topology `Group`s and `Spread`s it is counted in and constrained by. `shapes` builds variants, `fit`
judges them against pools, `topology` against domains; none of them needs the others' types from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.scheduling import requirements as rq
from provisioner.scheduling.offerings import Option
from provisioner.scheduling.pools import Pool
from provisioner.scheduling.resources import Vec
from provisioner.state.objects import HostPort, LabelSelector, Pod, Toleration

GroupKey = tuple[str, LabelSelector | None, frozenset[str] | None]


@dataclass(slots=True, eq=False)
class Group:
    """Pods matching a selector in some namespaces, counted per domain of one topology key."""

    key: str
    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    jumps: dict[int, dict[int, int]] = field(default_factory=dict)
    """For hostname groups, per threshold n: the solver's jumps over opened nodes holding n or more
    counted pods (blocked for good: counts only grow)."""

    def matches(self, pod: Pod) -> bool:
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)

    def add(self, domain: str) -> None:
        self.counts[domain] = self.counts.get(domain, 0) + 1
        self.total += 1


@dataclass(slots=True, eq=False)
class Spread:
    group: Group
    max_skew: int
    hard: bool
    min_domains: int = 0
    """`minDomains` (0: none): with fewer eligible domains, the global minimum counts as 0."""
    affinity_ignore: bool = False
    """`nodeAffinityPolicy: Ignore`: nodes the pod's node affinity excludes still count as domains."""
    taints_honor: bool = False
    """`nodeTaintsPolicy: Honor`: nodes whose taints the pod does not tolerate do not count."""


@dataclass(slots=True, eq=False)
class PoolFit:
    """A variant against a pool, before any node exists: narrowed requirements and the types that fit
    the pod alone (cheapest first, only available ones)."""

    reqs: rq.Reqs
    options: list[Option]
    standalone: float
    """The price of the cheapest node that holds the pod alone."""


@dataclass(slots=True, eq=False)
class Variant:
    """One way of reading a pod's constraints (preferences as requirements, or relaxed)."""

    id: int
    alts: tuple[rq.Reqs, ...]
    tolerations: tuple[Toleration, ...]
    req: Vec
    pools: tuple[Pool, ...]
    missing_pools: tuple[str, ...]
    pool_names: frozenset[str] | None
    order: tuple[str, ...]
    """Pool names in the order tried (the annotation's, unknown names included)."""
    spreads: list[Spread]
    affinity: list[tuple[Group, bool]]
    anti: list[Group]
    blocked_by: list[Group] = field(default_factory=list)
    member_of: list[Group] = field(default_factory=list)
    owner_of: list[Group] = field(default_factory=list)
    monotone: bool = True
    """Once a node refuses this variant it refuses it for the rest of the solve (no spread over a key
    other than hostname, no required affinity), so scans may resume where the last one stopped."""
    hint_existing: dict[str | None, int] = field(default_factory=dict)
    """Per pool scanned (None: every pool), the first existing node that may still take this variant."""
    hint_new: dict[str | None, int] = field(default_factory=dict)
    """The same for the nodes this solve opened (cost-aware scans only)."""
    alone: float | None = None
    """What a node of its own costs in the first pool of its order that fits it (the solver's cache)."""
    pool_fit: dict[int, PoolFit | str] = field(default_factory=dict)
    universe: dict[tuple[str, bool, bool], frozenset[str]] = field(default_factory=dict)
    """Per (key, nodeAffinityPolicy Ignore, nodeTaintsPolicy Honor): a spread's eligible domains."""
    required_alts: tuple[rq.Reqs, ...] = ()
    """The pod's required node affinity alone (preferences do not narrow a spread's domains)."""
    host_blockers: list[tuple[Group, int]] = field(default_factory=list)
    """Hostname groups that block a node once it holds `n` counted pods (anti-affinity: 1)."""
    has_topology: bool = False
    pins: tuple[str, ...] = ()
    """Keys other than hostname on which pending pods have a required affinity to this pod: its node
    is pinned to one domain of each, so they can follow it there in the same solve."""
    host_ports: tuple[HostPort, ...] = ()
    """Ports the pod binds on its node: no other pod on the node may hold one of them."""
    avoid_soft_taints: bool = False
    """PreferNoSchedule taints the pod does not tolerate count as NoSchedule (Karpenter relaxes this
    last: such pools and nodes are used only when nothing else fits)."""
