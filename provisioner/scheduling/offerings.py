"""Instance types and offerings as one pool sees them: which types a set of requirements allows, the
cheapest available offering of a type, the options of a new node (cheapest first, cached per solve), and
Karpenter's `minValues` (how many distinct values of a key a claim's options must span).

What a type offers after the pool's daemonsets is computed in `pools`; which pods fit is `fit`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.resources import Vec

TYPE_KEYS = frozenset(
    {
        wk.INSTANCE_TYPE,
        wk.INSTANCE_FAMILY,
        wk.INSTANCE_CPU,
        wk.INSTANCE_MEMORY,
        wk.GPU_NAME,
        wk.GPU_COUNT,
        wk.GPU_MEMORY,
        wk.GPU_MANUFACTURER,
        wk.ARCH,
        wk.OS,
        wk.REGION,
    }
)
"""Keys a new node gets from its instance type (the rest come from the pool or not at all)."""
OFFERING_KEYS = frozenset({wk.ZONE, wk.CAPACITY_TYPE})
"""Keys a new node gets from the offering it launches on."""


@dataclass(slots=True, eq=False)
class PoolType:
    """An instance type as one pool sees it: allocatable after the pool's daemonsets, as a vector."""

    it: InstanceType
    alloc: Vec
    capacity: Vec
    ds_overhead: Vec


Option = tuple[float, PoolType, Offering]
"""A type a new node may become, with its cheapest allowed offering and that offering's price."""


def _allowed_values(req: rq.KeyReq) -> frozenset[str] | None:
    if not req.present_ok:
        return frozenset()
    return req.allowed


def cheapest_offering(
    it: InstanceType, reqs: rq.Reqs, exhausted: frozenset[str] | set[str] = frozenset()
) -> Offering | None:
    """The cheapest available offering of the type that the zone and capacity-type requirements allow
    (ties by zone, then capacity type), or None. Reserved offerings of the `exhausted` reservations
    (taken by this solve's earlier nodes) are passed over."""
    zreq, creq = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    zones, cts = _allowed_values(zreq), _allowed_values(creq)
    best: Offering | None = None
    for o in it.offerings:
        if not o.available:
            continue
        if zones is not None and o.zone not in zones:
            continue
        if cts is not None and o.capacity_type not in cts:
            continue
        if not (zreq.matches(o.zone) and creq.matches(o.capacity_type)):
            continue
        if o.reservation is not None and o.reservation.id in exhausted:
            continue
        if best is None or (o.price, o.zone, o.capacity_type) < (best.price, best.zone, best.capacity_type):
            best = o
    return best


def any_offering(it: InstanceType, reqs: rq.Reqs) -> bool:
    """Whether some offering (available or not) is allowed by the requirements."""
    zreq, creq = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return any(zreq.matches(o.zone) and creq.matches(o.capacity_type) for o in it.offerings)


def labels_ok(it: InstanceType, reqs: rq.Reqs) -> bool:
    """Whether the type's labels meet the requirements (keys a type sets must match even when absent)."""
    labels = it.labels
    for key, req in reqs.items:
        if (key in TYPE_KEYS or key in labels) and not req.matches(labels.get(key)):
            return False
    return True


def value_of(t: PoolType, offering: Offering, key: str) -> str | None:
    """The value of `key` on a node of this type launched on this offering."""
    if key == wk.ZONE:
        return offering.zone
    if key == wk.CAPACITY_TYPE:
        return offering.capacity_type
    return t.it.labels.get(key)


def short_of_min_values(min_values: Sequence[tuple[str, int]], options: Sequence[Option]) -> str | None:
    """Which `minValues` the options cannot meet, in plain words, or None."""
    for key, wanted in min_values:
        values = {value_of(t, o, key) for _, t, o in options} - {None}
        if len(values) < wanted:
            shown = ", ".join(sorted(v for v in values if v is not None)) or "none"
            return f"minValues {wanted} for {key}: only {len(values)} values fit ({shown})"
    return None


def diverse(options: list[Option], min_values: Sequence[tuple[str, int]], limit: int) -> list[Option]:
    """At most `limit` options, cheapest first, that still span `minValues` distinct values per key: the
    cheapest option of each value is taken first, until each key has enough, then the rest by price."""
    chosen: dict[str, Option] = {}
    for key, wanted in min_values:
        have = {value_of(o[1], o[2], key) for o in chosen.values()}
        for opt in options:
            if len(have) >= wanted:
                break
            value = value_of(opt[1], opt[2], key)
            if value is not None and value not in have:
                have.add(value)
                chosen.setdefault(opt[1].it.name, opt)
    for opt in options:
        if len(chosen) >= limit:
            break
        chosen.setdefault(opt[1].it.name, opt)
    return sorted(chosen.values(), key=lambda x: (x[0], x[1].it.name))[:limit]


def _maxvec(options: Sequence[Option], dims: int) -> Vec:
    out = [0] * dims
    for _, t, _ in options:
        for i, a in enumerate(t.alloc):
            if a > out[i]:
                out[i] = a
    return tuple(out)


@dataclass(slots=True, eq=False)
class SharedOptions:
    """What solves over the same compiled pools (`pools.CompiledPools`) share: the option lists, each
    with its largest allocatable, and why no option of a pool holds a request."""

    lists: dict[tuple[int, rq.Reqs], tuple[list[Option], Vec]] = field(default_factory=dict)
    reasons: dict[tuple[int, rq.Reqs, Vec], str] = field(default_factory=dict)
    """(pool index, the pod's requirements alternative, its requests) -> why no type holds it."""


class OptionCache:
    """A pool's options under some requirements, per solve: nodes and pods with equal requirements
    share one list (its identity is what the solver compares to see whether a node's options changed),
    and the largest allocatable of each list, to reject a node without scanning its options."""

    __slots__ = ("_dims", "_lists", "_maxvecs", "_shared", "exhausted")

    def __init__(self, dims: int, *, shared: SharedOptions | None = None) -> None:
        self._dims = dims
        self._lists: dict[tuple[int, rq.Reqs], list[Option]] = {}
        self._maxvecs: dict[int, Vec] = {}
        self._shared = shared
        """Lists earlier solves made over the same compiled pools (`pools.CompiledPools`), taken and added
        to while this solve has used up no reservation (the lists are never changed once made)."""
        self.exhausted: set[str] = set()
        """Reservations this solve has used up: their offerings are no option any more."""

    def exhaust(self, reservation_id: str) -> None:
        """The reservation is full for the rest of the solve: lists made from now on leave it out (lists
        already handed out keep it; the solver checks before it moves a node onto it)."""
        self.exhausted.add(reservation_id)
        self._lists.clear()

    def options(self, pool_index: int, types: Sequence[PoolType], reqs: rq.Reqs) -> list[Option]:
        """The types meeting `reqs` with an available offering they allow, cheapest first."""
        key = (pool_index, reqs)
        cached = self._lists.get(key)
        if cached is not None:
            return cached
        shared = None if self.exhausted else self._shared
        if shared is not None and key in shared.lists:
            cached, maxvec = shared.lists[key]
            self._lists[key] = cached
            self._maxvecs[id(cached)] = maxvec
            return cached
        out: list[Option] = []
        for t in types:
            if not labels_ok(t.it, reqs):
                continue
            o = cheapest_offering(t.it, reqs, self.exhausted)
            if o is not None:
                out.append((o.price, t, o))
        out.sort(key=lambda x: (x[0], x[1].it.name))
        self._lists[key] = out
        maxvec = self._maxvecs[id(out)] = _maxvec(out, self._dims)
        if shared is not None:
            shared.lists[key] = (out, maxvec)
        return out

    def reason(self, key: tuple[int, rq.Reqs, Vec], make: Callable[[], str]) -> str:
        """Why no option of pool `key[0]` holds requests `key[2]` under alternative `key[1]`: `make()`,
        once across the solves sharing options (it depends on the pool's types, not on availability)."""
        if self._shared is None:
            return make()
        found = self._shared.reasons.get(key)
        if found is None:
            found = self._shared.reasons[key] = make()
        return found

    def maxvec(self, options: list[Option]) -> Vec:
        """The largest allocatable per dimension over a list this cache returned (kept alive by it)."""
        return self._maxvecs[id(options)]
