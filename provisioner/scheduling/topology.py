"""Topology for one solve: groups of pods counted per domain of a key (for spreads, pod affinity and
anti-affinity), seeded from the pods already running, and the domain checks: whether a node's domain
keeps every spread within its skew and every (anti-)affinity satisfied, which domain a new node is pinned
to, and why none works.

Groups are shared by every shape whose constraints name the same key, selector and namespaces."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from provisioner.api import labels as wk
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.existing import Existing, anti_affine_pods
from provisioner.scheduling.fit import labels_missing
from provisioner.scheduling.offerings import Option, OptionCache
from provisioner.scheduling.pools import Pool
from provisioner.scheduling.resources import Dims, Vec, le
from provisioner.scheduling.variant import Group, GroupKey, Spread, Variant
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import LabelSelector, Pod, PodAffinityTerm, tolerates_all

INF = float("inf")


class Topology:
    """The groups of one solve: `groups` count the pods a constraint selects, `owners` count the pods
    holding a required anti-affinity (which blocks the pods it selects)."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        existing: Sequence[Existing],
        pools: Sequence[Pool],
        cache: OptionCache,
        dims: Dims,
    ) -> None:
        self.namespace_labels = snapshot.namespaces
        self.existing = existing
        self.cache = cache
        self.dims = dims
        self.groups: dict[GroupKey, Group] = {}
        self.owners: dict[GroupKey, Group] = {}
        self.followed: set[int] = set()
        """Ids of the groups some pod has a required affinity to."""
        self.pools = tuple(pools)
        self._universe: dict[tuple[object, ...], frozenset[str]] = {}

    def namespaces(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str] | None:
        """The namespaces a term selects pods in (None: all)."""
        if term.namespace_selector is not None:
            sel = term.namespace_selector
            if not sel.match_labels and not sel.match_expressions:
                return None
            chosen = {ns for ns, labels in self.namespace_labels.items() if sel.matches(labels)}
            return frozenset(chosen | set(term.namespaces))
        return frozenset(term.namespaces or (pod.namespace,))

    def group(self, key: str, selector: LabelSelector | None, namespaces: frozenset[str] | None) -> Group:
        return _get(self.groups, (key, selector, namespaces))

    def owner(self, pod: Pod, term: PodAffinityTerm) -> Group:
        return _get(self.owners, (term.topology_key, term.label_selector, self.namespaces(pod, term)))

    def add_running_owners(self) -> None:
        """Running pods with required anti-affinity block the pods they select: make their groups (before
        shapes are linked to groups)."""
        for p in anti_affine_pods(self.existing):
            for t in p.anti_affinity_required:
                self.owner(p, t)

    def count_running(self) -> None:
        """Count the running pods of the existing nodes in every group (once every group exists)."""
        if not self.groups and not self.owners:
            return
        # Running pods repeat a few label sets: match each set against the groups once.
        matched: dict[tuple[str, frozenset[tuple[str, str]]], list[Group]] = {}
        all_groups = list(self.groups.values())
        for n in self.existing:
            for p in n.state.pods:
                if p.is_terminal:
                    continue
                key = (p.namespace, frozenset(p.labels.items()))
                hits = matched.get(key)
                if hits is None:
                    hits = matched[key] = [g for g in all_groups if g.matches(p)]
                for g in hits:
                    d = n.domain(g.key)
                    if d is not None:
                        g.add(d)
                for t in p.anti_affinity_required:
                    g = self.owner(p, t)
                    d = n.domain(g.key)
                    if d is not None:
                        g.add(d)

    # ---- domains

    def universe(self, v: Variant, s: Spread) -> frozenset[str]:
        """The eligible domains of a spread's key, as kube-scheduler counts them: those of the nodes the
        pod's required node affinity selects (all with `nodeAffinityPolicy: Ignore`), tainted ones
        included unless `nodeTaintsPolicy: Honor` (then only those it tolerates). A preferred node
        affinity never narrows them. Nodes are the existing ones and what each pool could launch."""
        key = s.group.key
        ck = (key, s.affinity_ignore, s.taints_honor)
        cached = v.universe.get(ck)
        if cached is not None:
            return cached
        alts = (rq.Reqs(()),) if s.affinity_ignore else v.required_alts
        pools = self.pools if s.affinity_ignore else v.pools
        if s.taints_honor:
            pools = tuple(p for p in pools if tolerates_all(v.tolerations, p.taints) is None)
        shared_key = (ck, alts, tuple(p.index for p in pools), v.tolerations if s.taints_honor else ())
        shared = self._universe.get(shared_key)
        if shared is not None:
            v.universe[ck] = shared
            return shared
        out: set[str] = set()
        for pool in pools:
            for alt in alts:
                reqs = pool.reqs.intersect(alt)
                if reqs.conflict() is not None or labels_missing(alt, pool) is not None:
                    continue
                kreq = reqs.get(key)
                for _, t, _ in self.cache.options(pool.index, pool.types, reqs):
                    if key == wk.ZONE:
                        vals = {o.zone for o in t.it.offerings if o.available}
                    elif key == wk.CAPACITY_TYPE:
                        vals = {o.capacity_type for o in t.it.offerings if o.available}
                    elif key in t.it.labels:
                        vals = {t.it.labels[key]}
                    else:
                        # A key the pool defines (template label or `In` requirement): its values.
                        vals = set(kreq.allowed) if kreq.allowed is not None else set()
                    out.update(x for x in vals if kreq.matches(x))
        for n in self.existing:
            value = n.domain(key)
            if value is None:
                continue
            if not s.affinity_ignore and not any(alt.matches(n.labels) for alt in alts):
                continue
            if s.taints_honor and tolerates_all(v.tolerations, n.taints) is not None:
                continue
            out.add(value)
        result = frozenset(out)
        v.universe[ck] = result
        self._universe[shared_key] = result
        return result

    def domain_ok(self, v: Variant, key: str, domain: str) -> bool:
        """Whether one more pod of the variant in `domain` of `key` keeps its constraints."""
        for s in v.spreads:
            g = s.group
            if g.key != key:
                continue
            if key == wk.HOSTNAME:
                # A new node can always be opened: the emptiest hostname holds none.
                if g.counts.get(domain, 0) + 1 > s.max_skew:
                    return False
                continue
            universe = self.universe(v, s)
            if domain not in universe:
                return False
            counts = g.counts
            # Fewer eligible domains than minDomains: the global minimum counts as 0.
            low = 0 if len(universe) < s.min_domains else min((counts.get(d, 0) for d in universe), default=0)
            if counts.get(domain, 0) + 1 - low > s.max_skew:
                return False
        for g, self_match in v.affinity:
            if g.key == key and not (g.counts.get(domain, 0) > 0 or (g.total == 0 and self_match)):
                return False
        for g in v.anti:
            if g.key == key and g.counts.get(domain, 0) > 0:
                return False
        return all(not (g.key == key and g.counts.get(domain, 0) > 0) for g in v.blocked_by)

    def existing_ok(self, v: Variant, n: Existing) -> bool:
        """Whether the existing node's domains keep the variant's constraints."""
        for key in topology_keys(v):
            domain = n.domain(key)
            if domain is None:
                # A node without the key is outside every domain: spreads and affinity cannot use it.
                if any(s.group.key == key for s in v.spreads) or any(g.key == key for g, _ in v.affinity):
                    return False
                continue
            if not self.domain_ok(v, key, domain):
                return False
        return True

    def pin(
        self,
        v: Variant,
        pool: Pool,
        *,
        reqs: rq.Reqs,
        options: list[Option],
        hostname: str,
        total: Vec,
    ) -> tuple[rq.Reqs, list[Option]] | None:
        """Choose a domain for every topology key of the variant on a new node; narrow its requirements
        and options accordingly. None when no domain works."""
        for key in topology_keys(v):
            if key == wk.HOSTNAME:
                if not self.domain_ok(v, key, hostname):
                    return None
                continue
            single = reqs.get(key).single
            cands = [single] if single is not None else _candidates(reqs, options, key)
            ok = [d for d in cands if self.domain_ok(v, key, d)]
            if not ok:
                return None
            if single is not None:
                continue
            spread = next((s for s in v.spreads if s.group.key == key), None)
            ranked = []
            for d in ok:
                narrowed = reqs.intersect(rq.Reqs(((key, rq.KeyReq(frozenset({d}), absent_ok=False)),)))
                opts = self.cache.options(pool.index, pool.types, narrowed)
                if opts:
                    # Emptiest domain first (the spread wants it), then the cheapest that holds the
                    # node's pods, then by name.
                    count = spread.group.counts.get(d, 0) if spread is not None else 0
                    price = next((o[0] for o in opts if all(map(le, total, o[1].alloc))), INF)
                    ranked.append((count, price, d, narrowed, opts))
            if not ranked:
                return None
            _, _, _, reqs, options = min(ranked, key=lambda r: r[:3])
        return reqs, options


def record(v: Variant, domain_of: Callable[[str], str | None]) -> None:
    """A pod of the variant landed on a node: count it in its groups."""
    for g in v.member_of:
        d = domain_of(g.key)
        if d is not None:
            g.add(d)
    for g in v.owner_of:
        d = domain_of(g.key)
        if d is not None:
            g.add(d)


def topology_keys(v: Variant) -> list[str]:
    keys = [s.group.key for s in v.spreads]
    keys += [g.key for g, _ in v.affinity]
    keys += [g.key for g in v.anti]
    keys += [g.key for g in v.blocked_by]
    keys += v.pins
    return sorted(set(keys))


def topology_reason(v: Variant) -> str:
    """Why no domain the pool offers keeps the variant's constraints, in plain words."""
    parts = []
    for s in v.spreads:
        g = s.group
        counts = ", ".join(f"{d}={c}" for d, c in sorted(g.counts.items())) or "none yet"
        parts.append(f"topology spread on {g.key} (maxSkew {s.max_skew}) cannot be kept (counts: {counts})")
    for g, _ in v.affinity:
        parts.append(f"pod affinity on {g.key}: no matching pod in a domain this pool offers")
    for g in v.anti:
        parts.append(f"pod anti-affinity on {g.key}: every domain this pool offers holds a matching pod")
    for g in v.blocked_by:
        parts.append(f"another pod's anti-affinity on {g.key} excludes this pod from the domains left")
    return "; ".join(parts) or "topology constraints cannot be met"


def _candidates(reqs: rq.Reqs, options: Sequence[Option], key: str) -> list[str]:
    kreq = reqs.get(key)
    vals: set[str]
    if key == wk.ZONE or key == wk.CAPACITY_TYPE:
        vals = {o.zone if key == wk.ZONE else o.capacity_type for _, t, _ in options for o in t.it.offerings}
    else:
        vals = {t.it.labels[key] for _, t, _ in options if key in t.it.labels}
        if kreq.allowed is not None:
            vals |= kreq.allowed
    return sorted(x for x in vals if kreq.matches(x))


def _get(table: dict[GroupKey, Group], key: GroupKey) -> Group:
    g = table.get(key)
    if g is None:
        g = table[key] = Group(key=key[0], selector=key[1], namespaces=key[2])
    return g
