"""Compiling pods into shapes: pods with equal constraints and requests share one `Shape`, and each
shape reads its constraints one or more ways (`variant.Variant`s): preferences (preferred node affinity, then
preferred pod affinity and ScheduleAnyway spreads) as requirements first, relaxed one step at a time.
A variant knows the pools it may use in the order they are tried (`pool_order`: the pod's list, a
default list, or every pool by weight), its request vector, and the topology groups it is constrained
by, counted in and blocked by. A pod its default list can never serve gets a refused shape.

Per-pool verdicts and domain universes are cached on the variant by `fit` and `topology`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.api import labels as wk
from provisioner.scheduling import pool_order
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.pools import Pool
from provisioner.scheduling.resources import Dims
from provisioner.scheduling.results import PoolReason
from provisioner.scheduling.topology import Topology
from provisioner.scheduling.variant import Group, Spread, Variant
from provisioner.state.objects import (
    PREFER_NO_SCHEDULE,
    LabelSelector,
    Pod,
    TopologySpread,
)

ShapeKey = tuple[Any, ...]


@dataclass(slots=True, eq=False)
class Shape:
    labels: Mapping[str, str]
    namespace: str
    variants: list[Variant]
    refused: list[PoolReason] | None = None
    """Set when the pod's default pool list can never serve it: its reasons, and no pool is tried."""


def selected_keys(pods: Iterable[Pod]) -> frozenset[str]:
    """The pod label keys that some selector of these pods reads (their spread, affinity and
    anti-affinity terms): the only labels a placement depends on. Pods of a solve that differ in other
    labels (a random `my-label`, a pod-template hash) share one shape and its cached verdicts."""
    keys: set[str] = set()
    seen: set[int] = set()
    for pod in pods:
        for terms in (
            pod.topology_spread,
            pod.affinity_required,
            pod.affinity_preferred,
            pod.anti_affinity_required,
            pod.anti_affinity_preferred,
        ):
            if not terms or id(terms) in seen:
                continue
            seen.add(id(terms))  # pods parsed from one template often share these tuples
            for term in terms:
                sel = term.label_selector
                if sel is not None:
                    keys.update(k for k, _ in sel.match_labels)
                    keys.update(e.key for e in sel.match_expressions)
                if isinstance(term, TopologySpread):
                    keys.update(term.match_label_keys)
    return frozenset(keys)


def shape_key(pod: Pod, selected: frozenset[str]) -> ShapeKey:
    """What a pod's placement depends on besides its name: pods with equal keys share a shape. Of its
    labels only the `selected` keys count (`selected_keys` of every pod the solve's groups come from)."""
    return (
        pod.namespace,
        tuple(sorted((k, v) for k, v in pod.labels.items() if k in selected)),
        tuple(sorted(pod.requests.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_terms,
        pod.preferred_node_terms,
        pod.tolerations,
        pod.topology_spread,
        pod.affinity_required,
        pod.affinity_preferred,
        pod.anti_affinity_required,
        pod.anti_affinity_preferred,
        pod.annotations.get(wk.NODEPOOLS, ""),
        pod.host_ports,
    )


def shape_parts(pod: Pod) -> tuple[object, ...]:
    """The identities of what `shape_key` reads of a pod: pods of one template share their parsed parts
    (`Pod.from_dict`), so pods with equal parts have equal keys and the key is worked out once per set of
    parts. Only while the pods are held (an id is unique among live objects), as within one solve."""
    return (
        pod.namespace,
        id(pod.labels),
        id(pod.requests),
        id(pod.node_selector),
        id(pod.required_node_terms),
        id(pod.preferred_node_terms),
        id(pod.tolerations),
        id(pod.topology_spread),
        id(pod.affinity_required),
        id(pod.affinity_preferred),
        id(pod.anti_affinity_required),
        id(pod.anti_affinity_preferred),
        id(pod.annotations),
        id(pod.host_ports),
    )


class Compiler:
    """Compiles the pods of one solve into shapes, numbering variants (their ids key per-node caches)."""

    def __init__(
        self,
        *,
        pools: Sequence[Pool],
        dims: Dims,
        topology: Topology,
        defaults: pool_order.ClusterDefaults = pool_order.NO_DEFAULTS,
        team_lists: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.pools = list(pools)
        self.team_lists = team_lists or {}
        """Namespace -> its team's defaultNodePools (`pool_order.team_lists`)."""
        self.pool_by_name = {p.name: p for p in pools}
        self.dims = dims
        self.topology = topology
        self.defaults = defaults
        self.default_pool_names = pool_order.default_pool_names(p.pool for p in pools)
        self.gpu_pools = frozenset(
            p.name for p in pools if any(t.it.gpu is not None and t.it.gpu.count for t in p.types)
        )
        """Pools with a GPU type: a GPU pod whose default list names none of them is refused."""
        self.variant_count = 0
        self.soft_taints = {
            t
            for t in [
                *(t for p in pools for t in p.taints),
                *(t for n in topology.existing for t in n.taints),
            ]
            if t.effect == PREFER_NO_SCHEDULE
        }
        """The PreferNoSchedule taints of this solve's pools and nodes."""

    def compile(self, pod: Pod) -> Shape:
        alts = rq.pod_alternatives(pod.node_selector, pod.required_node_terms)
        chosen = pool_order.resolve(
            pod, team_default=self.team_lists, defaults=self.defaults, pool_names=self.default_pool_names
        )
        requested = chosen.pools or ()
        names: frozenset[str] | None
        if requested:
            pools = tuple(self.pool_by_name[n] for n in requested if n in self.pool_by_name)
            missing = tuple(n for n in requested if n not in self.pool_by_name)
            names = frozenset(requested)
        else:
            pools, missing, names = tuple(self.pools), (), None
        req = self.dims.vec(pod.requests)
        prefs = [
            rq.from_selector(t.requirements)
            for t in sorted(pod.preferred_node_terms, key=lambda t: -t.weight)
            if t.requirements
        ]
        soft = bool(
            pod.affinity_preferred
            or pod.anti_affinity_preferred
            or any(c.when_unsatisfiable != "DoNotSchedule" for c in pod.topology_spread)
        )
        avoid = any(not any(tol.tolerates(t) for tol in pod.tolerations) for t in self.soft_taints)
        plans: list[tuple[rq.Reqs | None, bool, bool]] = [(p, soft, avoid) for p in prefs]
        plans.append((None, soft, avoid))
        if soft:
            plans.append((None, False, avoid))
        if avoid:
            plans.append((None, False, False))
        topo = self.topology
        variants: list[Variant] = []
        for pref, with_soft, avoid_soft in plans:
            spreads = [
                Spread(
                    group=topo.group(c.topology_key, _spread_selector(pod, c), frozenset((pod.namespace,))),
                    max_skew=max(1, c.max_skew),
                    hard=c.when_unsatisfiable == "DoNotSchedule",
                    min_domains=c.min_domains or 0,
                    affinity_ignore=c.node_affinity_policy == "Ignore",
                    taints_honor=c.node_taints_policy == "Honor",
                )
                for c in pod.topology_spread
                if c.when_unsatisfiable == "DoNotSchedule" or with_soft
            ]
            aff_terms = list(pod.affinity_required) + (list(pod.affinity_preferred) if with_soft else [])
            affinity = []
            for t in aff_terms:
                g = topo.group(t.topology_key, t.label_selector, topo.namespaces(pod, t))
                affinity.append((g, g.matches(pod)))
                if t.weight == 0:
                    topo.followed.add(id(g))
            anti_terms = list(pod.anti_affinity_required) + (
                list(pod.anti_affinity_preferred) if with_soft else []
            )
            anti = [topo.group(t.topology_key, t.label_selector, topo.namespaces(pod, t)) for t in anti_terms]
            owner_of = [topo.owner(pod, t) for t in pod.anti_affinity_required]
            v = Variant(
                id=self.variant_count,
                alts=alts if pref is None else tuple(a.intersect(pref) for a in alts),
                tolerations=pod.tolerations,
                req=req,
                pools=pools,
                missing_pools=missing,
                pool_names=names,
                order=tuple(dict.fromkeys(requested)) if requested else tuple(p.name for p in pools),
                spreads=spreads,
                affinity=affinity,
                anti=anti,
                owner_of=owner_of,
                avoid_soft_taints=avoid_soft,
                host_ports=pod.host_ports,
                required_alts=alts,
            )
            self.variant_count += 1
            v.monotone = not affinity and all(s.group.key == wk.HOSTNAME for s in spreads)
            variants.append(v)
        refused = pool_order.refusal(pod, chosen, gpu_pools=self.gpu_pools)
        return Shape(
            labels=pod.labels,
            namespace=pod.namespace,
            variants=variants,
            refused=None if refused is None else [PoolReason(name, refused) for name in requested],
        )

    def link(self, shape: Shape, pod: Pod) -> None:
        """After every group exists: which groups count this shape, which anti-affinity owners block it."""
        member_of = [g for g in self.topology.groups.values() if g.matches(pod)]
        blocked_by = [g for g in self.topology.owners.values() if g.matches(pod)]
        pins = tuple(
            sorted({g.key for g in member_of if id(g) in self.topology.followed and g.key != wk.HOSTNAME})
        )
        for v in shape.variants:
            v.member_of = member_of
            v.blocked_by = blocked_by
            v.pins = pins
            v.has_topology = bool(v.spreads or v.affinity or v.anti or blocked_by or pins)
            blockers: list[tuple[Group, int]] = [(g, 1) for g in v.anti if g.key == wk.HOSTNAME]
            blockers += [(g, 1) for g in blocked_by if g.key == wk.HOSTNAME]
            blockers += [(s.group, s.max_skew) for s in v.spreads if s.group.key == wk.HOSTNAME]
            v.host_blockers = blockers


def _spread_selector(pod: Pod, c: TopologySpread) -> LabelSelector | None:
    sel = c.label_selector
    if c.match_label_keys and sel is not None:
        extra = tuple((k, pod.labels[k]) for k in c.match_label_keys if k in pod.labels)
        sel = LabelSelector(tuple(sorted(set(sel.match_labels) | set(extra))), sel.match_expressions)
    return sel
