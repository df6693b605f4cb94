"""Gangs in a solve: pods that run together or not at all, placed whole in one zone or not at all.

A gang is a Kueue plain pod group (pods labelled `kueue.x-k8s.io/pod-group-name`, the group's size in
the annotation `kueue.x-k8s.io/pod-group-total-count`), or the pods a ProvisioningRequest describes (its
PodTemplates times their counts, labelled the same way by `provisioner.state.provisioning_requests`). This
module owns what the solver does with one; the solver itself knows nothing of gangs (its hook is the
one call in `solver.solve`).

How, over the plain solve (`inner`):
1. A gang whose pods do not all exist yet (members here and already running < total) is `Waiting`:
   nothing is launched for it, as Kueue admits a pod group only once all of it is created.
2. The others are solved with everyone else. A gang is placed when every member found room (existing
   nodes, claims in flight, new nodes), all of them in one zone, and its new nodes share one offering
   with room for all of them (`CloudProvider.create_group` launches one type in one zone on one capacity
   type, or nothing). A gang with members already running stays in their zone.
3. A gang not placed is pinned to a zone (where most of it fit first, then by name) and solved again;
   when no zone takes it whole, its pods leave the solve: no node for any member, and every member is
   unschedulable with the reason of the closest attempt (which pool, how many members fit, what is
   missing). The others are solved once more without it, so they do not pack onto nodes it would have
   opened.

Pure: a snapshot, the solve function and `capacity` (instances an offering has left, when known: a
scenario's `spec.capacity`) in, Results out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.scheduling.results import GangOutcome, NewClaim, PoolReason, Results, Unschedulable
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import Pod

PLACED = "Placed"
WAITING = "Waiting"
UNSCHEDULABLE = "Unschedulable"


def membership(pod: Pod) -> tuple[str, int] | None:
    """The pod's gang (`namespace/group`) and the group's size (0 when the annotation is missing or not a
    positive integer: the members present are the whole group), or None for a pod of no gang."""
    group = pod.labels.get(wk.KUEUE_POD_GROUP_NAME) if pod.labels else None
    if not group:
        return None
    text = pod.annotations.get(wk.KUEUE_POD_GROUP_TOTAL_COUNT, "") if pod.annotations else ""
    try:
        total = int(str(text).strip())
    except ValueError:
        total = 0
    return f"{pod.namespace}/{group}", max(total, 0)


def has_gangs(pods: Sequence[Pod]) -> bool:
    return any(p.labels and wk.KUEUE_POD_GROUP_NAME in p.labels for p in pods)


@dataclass(slots=True)
class _Gang:
    name: str
    total: int
    members: list[Pod] = field(default_factory=list)
    running_zones: Counter[str] = field(default_factory=Counter)
    running: int = 0

    @property
    def fixed_zone(self) -> str | None:
        """The zone of the members already running: the rest of the gang joins them there."""
        return self.running_zones.most_common(1)[0][0] if self.running_zones else None


@dataclass(slots=True)
class _Attempt:
    """One gang's result in one solve."""

    ok: bool
    zone: str | None
    fitting: int
    nodepool: str | None = None
    reasons: list[PoolReason] = field(default_factory=list)
    zones: Counter[str] = field(default_factory=Counter)
    """Where its members landed (placed ones whose zone is known)."""
    existing: Counter[str] = field(default_factory=Counter)
    """Where its members found room on existing nodes and claims in flight (room already paid for)."""
    offering: tuple[InstanceType, Offering] | None = None
    claims: list[NewClaim] = field(default_factory=list)
    avoided: float = 0.0
    """Not ok: $/h of the new nodes a one-at-a-time launch would have started for the members that fit."""


InnerSolve = Callable[[Sequence[Pod]], Results]


def solve(
    pods: Sequence[Pod],
    snapshot: Snapshot,
    *,
    inner: InnerSolve,
    zones: Sequence[str],
    capacity: Mapping[OfferingKey, int] | None = None,
) -> Results:
    """Solve `pods` with `inner` (the plain solve), every gang among them placed whole in one zone or not
    at all. `zones`: the zones a gang may be pinned to, in the order to try them after those where it
    fit best. `capacity`: instances left per offering, where known (a gang's group launch needs room
    for all of its new nodes in one offering)."""
    gangs = _gangs(pods, snapshot)
    waiting = {g.name for g in gangs.values() if g.total and len(g.members) + g.running < g.total}
    pins: dict[str, str | None] = {name: g.fixed_zone for name, g in gangs.items()}
    tried: dict[str, set[str]] = {name: set() for name in gangs}
    dropped: dict[str, _Attempt] = {}
    best: dict[str, _Attempt] = {}
    zones = sorted(set(zones))

    def run() -> tuple[Results, dict[str, _Attempt]]:
        out = {name for name in gangs if name in waiting or name in dropped}
        batch = [_pinned(p, pins, out) for p in pods]
        results = _restore(inner([p for p in batch if p is not None]), pods)
        # Gangs in name order take what an offering has left, so two cannot count on the same room.
        left = dict(capacity) if capacity is not None else None
        checked = {}
        for name, g in gangs.items():
            if name not in out:
                checked[name] = a = _check(g, results, snapshot, pins[name], left)
                if a.ok and a.offering is not None and left is not None:
                    key = a.offering[1].offering_key(a.offering[0].name)
                    if key in left:
                        left[key] -= len(a.claims)
        return results, checked

    results, attempts = run()
    for _ in range(len(zones) + 2):
        changed = False
        for name, attempt in attempts.items():
            g = gangs[name]
            pin = pins[name]
            if attempt.ok and (pin is not None or attempt.zone is None):
                continue  # placed (on nodes of no known zone, or pinned already)
            if attempt.ok:
                pins[name] = attempt.zone  # placed: solve again pinned, so its claims name the zone
                changed = True
                continue
            if best.get(name) is None or attempt.fitting > best[name].fitting:
                best[name] = attempt
            if pin is not None:
                tried[name].add(pin)
            candidates = [] if g.fixed_zone else _next_zones(attempt, zones, tried[name])
            if candidates:
                pins[name] = candidates[0]
            else:
                dropped[name] = best[name]
            changed = True
        if not changed:
            break
        results, attempts = run()
    failing = [name for name, a in attempts.items() if not a.ok]
    if failing:
        # The loop ran out of zones to try while gangs still moved each other about: leave out the ones
        # that do not fit in this last solve, so what is launched is whole.
        for name in failing:
            dropped[name] = best.get(name) or attempts[name]
        results, attempts = run()
    return _report(results, gangs, waiting, dropped, attempts)


def _gangs(pods: Sequence[Pod], snapshot: Snapshot) -> dict[str, _Gang]:
    gangs: dict[str, _Gang] = {}
    for pod in pods:
        m = membership(pod)
        if m is not None:
            g = gangs.setdefault(m[0], _Gang(m[0], m[1]))
            g.total = max(g.total, m[1])
            g.members.append(pod)
    if not gangs:
        return gangs
    solving = {p.key for p in pods}
    for node in snapshot.nodes:
        if node.deleting:
            continue
        for pod in node.pods:
            m = membership(pod)
            if m is None or m[0] not in gangs or pod.key in solving or pod.is_terminal:
                continue
            g = gangs[m[0]]
            g.running += 1
            zone = node.labels.get(wk.ZONE)
            if zone:
                g.running_zones[zone] += 1
    for g in gangs.values():
        if not g.total:
            g.total = len(g.members) + g.running
    return dict(sorted(gangs.items()))


def _pinned(pod: Pod, pins: Mapping[str, str | None], out: set[str]) -> Pod | None:
    """The pod as this solve takes it: left out (its gang waits or was given up), pinned to its gang's
    zone, or as it is."""
    m = membership(pod)
    if m is None:
        return pod
    if m[0] in out:
        return None
    zone = pins.get(m[0])
    if zone is None or pod.node_selector.get(wk.ZONE) == zone:
        return pod
    return dataclasses.replace(pod, node_selector={**pod.node_selector, wk.ZONE: zone})


def _restore(results: Results, pods: Sequence[Pod]) -> Results:
    """The caller's pods in place of the pinned copies."""
    by_key = {p.key: p for p in pods}
    for placement in results.placements:
        placement.pod = by_key.get(placement.pod.key, placement.pod)
    for claim in results.new_claims:
        claim.pods = [by_key.get(p.key, p) for p in claim.pods]
    for u in results.unschedulable:
        u.pod = by_key.get(u.pod.key, u.pod)
    return results


def _check(
    g: _Gang,
    results: Results,
    snapshot: Snapshot,
    pin: str | None,
    capacity: Mapping[OfferingKey, int] | None,
) -> _Attempt:
    keys = {p.key for p in g.members}
    zones: Counter[str] = Counter()
    existing: Counter[str] = Counter()
    placed = 0
    for placement in results.placements:
        if placement.pod.key in keys:
            placed += 1
            node = snapshot.node(placement.node)
            zone = node.labels.get(wk.ZONE) if node is not None else None
            if zone:
                zones[zone] += 1
                existing[zone] += 1
    claims = [c for c in results.new_claims if any(p.key in keys for p in c.pods)]
    for claim in claims:
        n = sum(p.key in keys for p in claim.pods)
        placed += n
        zones[claim.offering.zone] += n
    pool = claims[0].nodepool.name if claims else None
    unplaced = [u for u in results.unschedulable if u.pod.key in keys]
    zone = pin or (zones.most_common(1)[0][0] if zones else None)
    avoided = sum(c.price for c in claims)
    if unplaced:
        first = unplaced[0]
        pool = pool or next((r.nodepool for r in first.reasons if r.nodepool), None)
        return _Attempt(False, zone, placed, pool, list(first.reasons), zones, existing, avoided=avoided)
    if g.running_zones:
        zones.update(g.running_zones)
    if len(zones) > 1:
        spread = ", ".join(f"{z} ({n})" for z, n in sorted(zones.items()))
        why = f"its members landed in more than one zone: {spread}"
        return _Attempt(
            False, zone, placed, pool, [PoolReason(pool or "", why)], zones, existing, avoided=avoided
        )
    if claims:
        found = _group_offering(claims, zone, capacity)
        if isinstance(found, tuple) and isinstance(found[0], str):
            # The members would fit but no offering has room for all the new nodes: as many fit as the
            # roomiest offering has instances left (plus the members placed on existing capacity).
            why, left = found
            fitting = placed - sum(sum(p.key in keys for p in c.pods) for c in claims[left:])
            avoided = sum(c.price for c in claims[:left])
            return _Attempt(
                False, zone, fitting, pool, [PoolReason(pool or "", why)], zones, existing, avoided=avoided
            )
        assert not isinstance(found[0], str)
        return _Attempt(True, zone, placed, pool, [], zones, existing, found, claims)
    return _Attempt(True, zone, placed, pool, [], zones, existing)


def _group_offering(
    claims: Sequence[NewClaim], zone: str | None, capacity: Mapping[OfferingKey, int] | None
) -> tuple[InstanceType, Offering] | tuple[str, int]:
    """The offering all of a gang's new claims can launch as one group (one type, one zone, one capacity
    type, room for all of them), cheapest first; else why none, and how many of the new nodes the
    roomiest offering could take."""
    common = [t for t in claims[0].instance_types if all(_offers(c, t.name) for c in claims[1:])]
    if not common:
        return "its new nodes share no instance type, and a group launches one type", 0
    short: list[str] = []
    most = 0
    choices: list[tuple[float, str, InstanceType, Offering]] = []
    for t in common:
        for o in t.offerings:
            if not o.available or (zone is not None and o.zone != zone):
                continue
            if not all(_allowed(c, wk.CAPACITY_TYPE, o.capacity_type) for c in claims):
                continue
            left = capacity.get(o.offering_key(t.name)) if capacity else None
            if left is not None and left < len(claims):
                most = max(most, left)
                short.append(f"{t.name} {o.capacity_type} in {o.zone} has {left} left, {len(claims)} needed")
                continue
            choices.append((o.price, t.name, t, o))
    if choices:
        _, _, t, o = min(choices, key=lambda c: (c[0], c[1]))
        return t, o
    if short:
        return "no offering has room for all of its new nodes: " + "; ".join(short[:3]), most
    return f"no available offering of its types in {zone}", 0


def _offers(claim: NewClaim, name: str) -> bool:
    return any(t.name == name for t in claim.instance_types)


def _allowed(claim: NewClaim, key: str, value: str) -> bool:
    for r in claim.requirements:
        if r.key != key:
            continue
        op = r.operator.value
        if op == "In" and value not in r.values:
            return False
        if op == "NotIn" and value in r.values:
            return False
    return True


def _next_zones(attempt: _Attempt, zones: Sequence[str], tried: set[str]) -> list[str]:
    """Zones left to pin the gang to: where most of it found room already there, then where most of it
    fit, then by name."""
    order = sorted(zones, key=lambda z: (-attempt.existing.get(z, 0), -attempt.zones.get(z, 0), z))
    return [z for z in order if z not in tried]


def _report(
    results: Results,
    gangs: Mapping[str, _Gang],
    waiting: set[str],
    dropped: Mapping[str, _Attempt],
    attempts: Mapping[str, _Attempt],
) -> Results:
    outcomes: list[GangOutcome] = []
    for name, g in gangs.items():
        members = tuple(p.key for p in g.members)
        if name in waiting:
            have = len(g.members) + g.running
            why = (
                f"gang {name}: {have} of its {g.total} pods exist; nothing is launched until all of them "
                f"do ({wk.KUEUE_POD_GROUP_TOTAL_COUNT})"
            )
            _refuse(results, g, [PoolReason("", why)])
            outcomes.append(GangOutcome(name, g.total, members, g.running, WAITING, reason=why))
            continue
        if name in dropped:
            a = dropped[name]
            where = f" in {a.zone}" if a.zone else ""
            head = f"gang {name} needs all {g.total} pods placed together; {a.fitting} of {len(g.members)} fit{where}"
            reasons = [PoolReason(r.nodepool, f"{head}; {r.reason}") for r in a.reasons] or [
                PoolReason(a.nodepool or "", head)
            ]
            _refuse(results, g, reasons)
            outcomes.append(
                GangOutcome(
                    name,
                    g.total,
                    members,
                    g.running,
                    UNSCHEDULABLE,
                    zone=a.zone,
                    nodepool=a.nodepool,
                    fitting=a.fitting,
                    avoided_per_hour=a.avoided,
                    reason="; ".join(
                        f"{r.nodepool}: {r.reason}" if r.nodepool else r.reason for r in reasons
                    ),
                )
            )
            continue
        a = attempts[name]
        if a.offering is not None:
            _mark_group(a.claims, name, a.offering)
        outcomes.append(
            GangOutcome(
                name,
                g.total,
                members,
                g.running,
                PLACED,
                zone=a.zone,
                nodepool=a.nodepool,
                new_nodes=len(a.claims),
                fitting=a.fitting,
            )
        )
    results.gangs = outcomes
    return results


def _refuse(results: Results, g: _Gang, reasons: list[PoolReason]) -> None:
    keys = {p.key for p in g.members}
    results.unschedulable = [u for u in results.unschedulable if u.pod.key not in keys]
    results.unschedulable.extend(Unschedulable(pod=p, reasons=list(reasons)) for p in g.members)


def _mark_group(claims: Sequence[NewClaim], name: str, offering: tuple[InstanceType, Offering]) -> None:
    """Tag the gang's claims as one group, each planned on the group's offering (its type first)."""
    t, o = offering
    for claim in claims:
        claim.gang = name
        claim.gang_size = len(claims)
        if claim.instance_types[0].name != t.name:
            claim.instance_types = [t, *(x for x in claim.instance_types if x.name != t.name)]
        claim.offering = o
