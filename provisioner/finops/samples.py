"""The samples the usage meter takes each interval: one `UsageRow` per node we own (what it costs and who
uses it, by team and workload) and one `ReservationRow` per reservation the pools' offerings carry (its
instances, those running and used). Pure: built from a snapshot and the instance types as the cloud
answers; the time comes in. When to sample and how samples join into intervals is
`provisioner.finops.meter`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from provisioner.api import accelerators, quantities
from provisioner.api import labels as wk
from provisioner.disruption.preferred import allows
from provisioner.finops.rows import ReservationRow, TeamAllocation, UsageRow, workload_of
from provisioner.state.cluster import team_of

if TYPE_CHECKING:
    from provisioner.api import NodePool
    from provisioner.cloudprovider.types import InstanceType, Reservation
    from provisioner.state.cluster import Snapshot, StateNode


@dataclass(frozen=True, slots=True)
class OfferedReservation:
    """A reservation as the cloud last answered, for sampling between answers."""

    instance_type: str
    zone: str
    reservation: Reservation
    gpus_per_instance: int
    nodepools: tuple[str, ...]
    """The pools that may launch into it (their capacity-type requirement allows reserved)."""
    others: int
    """Instances running in it that are not ours (another cluster or account), as of that answer."""
    owner: str = ""
    """Who pays for its idle part (`ReservationRow.owner`)."""


def _inside(snapshot: Snapshot) -> dict[str, list[StateNode]]:
    """Reservation id -> our launched nodes in it (their `capacity-reservation-id` label)."""
    inside: dict[str, list[StateNode]] = {}
    for node in snapshot.nodes:
        rid = node.labels.get(wk.CAPACITY_RESERVATION_ID)
        if rid and node.claim is not None and node.claim.status.provider_id:
            inside.setdefault(rid, []).append(node)
    return inside


def offered_reservations(
    snapshot: Snapshot, instance_types: Mapping[str, Sequence[InstanceType]]
) -> list[OfferedReservation]:
    """Every reservation the pools' offerings carry (pool -> its instance types, as the cloud answers
    now), sorted by id. The slots taken beyond our nodes in it are counted now, while the cloud's free
    count and our nodes agree."""
    pools: dict[str, NodePool] = {p.metadata.name: p for p in snapshot.nodepools if p.metadata.name}
    found: dict[str, tuple[InstanceType, str, Reservation]] = {}
    users: dict[str, set[str]] = {}
    for pool, types in instance_types.items():
        for it in types:
            for o in it.offerings:
                if o.reservation is None:
                    continue
                found.setdefault(o.reservation.id, (it, o.zone, o.reservation))
                spec = pools.get(pool)
                if spec is not None and allows(spec, wk.CAPACITY_TYPE_RESERVED):
                    users.setdefault(o.reservation.id, set()).add(pool)
    inside = _inside(snapshot)
    return [
        OfferedReservation(
            instance_type=it.name,
            zone=zone,
            reservation=reservation,
            gpus_per_instance=it.gpu.count if it.gpu is not None else 0,
            nodepools=tuple(sorted(users.get(rid, ()))),
            others=max(0, reservation.total - reservation.free - len(inside.get(rid, ()))),
            owner=_reservation_owner(snapshot, [pools[p] for p in sorted(users.get(rid, ())) if p in pools]),
        )
        for rid, (it, zone, reservation) in sorted(found.items())
    ]


def _reservation_owner(snapshot: Snapshot, users: Sequence[NodePool]) -> str:
    """The team a user pool's NodeClass names (label `provisioner.sh/team`), else a user pool's owner."""
    for pool in users:
        ref = pool.spec.template.spec.node_class_ref
        nodeclass = snapshot.nodeclasses.get((ref.kind, ref.name))
        team = (getattr(getattr(nodeclass, "metadata", None), "labels", None) or {}).get(wk.TEAM)
        if team:
            return str(team)
    for pool in users:
        if team := (pool.metadata.labels or {}).get(wk.TEAM):
            return str(team)
    return ""


def reservation_rows(
    snapshot: Snapshot,
    offered: Sequence[OfferedReservation],
    *,
    time: datetime,
    hours: float = 0.0,
) -> list[ReservationRow]:
    """One sample of each offered reservation with our nodes in it as the snapshot has them now."""
    if not offered:
        return []  # the common case, every pass: no walk over the nodes
    inside = _inside(snapshot)
    teams = snapshot.team_names()
    rows = []
    for o in offered:
        r = o.reservation
        ours = [usage_row(n, time=time, hours=hours, teams=teams) for n in inside.get(r.id, [])]
        gpus = o.gpus_per_instance
        rows.append(
            ReservationRow(
                time=time,
                hours=hours,
                reservation_id=r.id,
                kind=r.kind,
                instance_type=o.instance_type,
                zone=o.zone,
                price_per_hour=r.hourly_price,
                instances=r.total,
                running=len(ours) + o.others,
                used=sum(s.used_fraction for s in ours) + o.others,
                gpus_per_instance=gpus,
                gpu_allocated=sum(min(s.gpu_allocated, gpus) for s in ours) + o.others * gpus,
                nodepools=o.nodepools,
                ends_at=r.ends_at,
                owner=o.owner,
            )
        )
    return rows


def usage_row(
    node: StateNode,
    *,
    time: datetime,
    hours: float,
    teams: Mapping[str, str],
    pool_owner: str = "",
) -> UsageRow:
    """One usage sample of a node we own over the `hours` that start at `time`."""
    assert node.claim is not None
    alloc = node.allocatable
    used = node.requested
    per_team: dict[str, dict[str, int]] = {}
    for pod in node.pods:
        if pod.is_terminal or pod.is_daemonset_pod:
            continue
        team = team_of(pod, teams) or ""
        per_team[team] = quantities.add(per_team.get(team, {}), pod.requests)
    labels = node.labels
    status = node.claim.status
    return UsageRow(
        time=time,
        hours=hours,
        node=node.name,
        nodepool=node.nodepool or "",
        instance_type=status.instance_type or labels.get(wk.INSTANCE_TYPE, ""),
        capacity_type=status.capacity_type or labels.get(wk.CAPACITY_TYPE, ""),
        price_per_hour=node.price,
        cpu_capacity=alloc.get(quantities.CPU, 0),
        cpu_allocated=used.get(quantities.CPU, 0),
        memory_capacity=alloc.get(quantities.MEMORY, 0),
        memory_allocated=used.get(quantities.MEMORY, 0),
        gpu_capacity=accelerators.units(alloc),
        gpu_allocated=accelerators.units(used),
        teams=tuple(sorted(t for t in per_team if t)),
        provider_id=status.provider_id or "",
        zone=status.zone or labels.get(wk.ZONE, ""),
        region=labels.get(wk.REGION, ""),
        pool_owner=pool_owner,
        workloads=tuple(sorted({w for p in node.pods if not p.is_daemonset_pod and (w := workload_of(p))})),
        allocations=tuple(
            TeamAllocation(team, r.get(quantities.CPU, 0), r.get(quantities.MEMORY, 0), accelerators.units(r))
            for team, r in sorted(per_team.items())
        ),
        reservation_id=labels.get(wk.CAPACITY_RESERVATION_ID, ""),
    )


def pool_owners(snapshot: Snapshot) -> dict[str, str]:
    """Pool -> its owner team (the NodePool's `provisioner.sh/team` label), for pools that name one."""
    return {
        p.metadata.name: team
        for p in snapshot.nodepools
        if p.metadata.name and (team := (p.metadata.labels or {}).get(wk.TEAM))
    }
