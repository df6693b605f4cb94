"""The values the ledger stores and the reports read: one action per node removed or replaced, one
blocker per node kept per evaluation, one usage sample per node per interval.

Pure: built from the planner's records, the replacements really launched and snapshots; `now` comes in.
The ledger maps them to tables; the reports take them as plain values, so reports are testable without a
database.

Reservations are sampled too (`ReservationRow`): a reservation is paid for every hour it exists, used or
not, so its idle part is money the node rows (whose reserved nodes cost $0/h more) cannot show.

An action's row is made here, and its money by `provisioner.finops.money`'s one rule:
- its `savings_per_hour` is `money.claimed_saving` of the node removed against its share of the
  replacements *really launched* (their prices from the claims' status, not the plan's); expiration,
  drift and a Capacity Block ending claim none (`change_per_hour` shows what they moved);
- pods nothing recreates (no controller owner: bare pods) are evicted for good, so their share of the
  node's $/h is `evicted_per_hour` ("workload evicted"), never a saving.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from provisioner.api import accelerators, quantities
from provisioner.api import labels as wk
from provisioner.disruption.preferred import allows
from provisioner.finops import money
from provisioner.state.cluster import team_of

if TYPE_CHECKING:
    from provisioner.api import NodePool
    from provisioner.cloudprovider.types import InstanceType, Reservation
    from provisioner.disruption.model import Command, Plan
    from provisioner.state.cluster import Snapshot, StateNode
    from provisioner.state.objects import Pod

HOURS_PER_MONTH = 730
"""The FinOps month (8,760 h / 12), for estimated monthly savings."""


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One node removed or replaced."""

    time: datetime
    command_id: str
    action: str
    """`delete` or `replace`."""
    nodepool: str
    teams: tuple[str, ...]
    node: str
    instance_type: str
    capacity_type: str
    zone: str
    reason: str
    method: str
    price_per_hour: float
    replacement_type: str | None
    replacement_capacity_type: str | None
    replacement_price_per_hour: float
    savings_per_hour: float
    pods_moved: int
    pods: tuple[str, ...] = ()
    detail: str = ""
    replacement_nodes: tuple[str, ...] = ()
    """Names of the replacement nodes once launched (the controller fills them; churn reads them)."""
    evicted_pods: tuple[str, ...] = ()
    """Pods nothing recreates (bare pods), evicted for good: workload evicted, not a saving."""
    evicted_per_hour: float = 0.0
    """The evicted bare pods' share of the node's $/h (left out of `savings_per_hour`)."""
    workloads: tuple[str, ...] = ()
    """`Kind/namespace/name` of the owners of the pods moved: capacity launched for them soon after is
    churn, charged back against this action."""

    @property
    def estimated_monthly_savings(self) -> float:
        return self.savings_per_hour * HOURS_PER_MONTH

    @property
    def is_saving(self) -> bool:
        """Whether the action was made to save money (`money.is_saving`)."""
        return money.is_saving(self.reason, self.method)

    @property
    def claimed_per_hour(self) -> float:
        """The saving the money rule allows this row, whatever program wrote `savings_per_hour`."""
        return money.claimed_saving(
            reason=self.reason,
            method=self.method,
            removed=self.price_per_hour,
            launched=self.replacement_price_per_hour,
            evicted=self.evicted_per_hour,
        )

    @property
    def change_per_hour(self) -> float:
        """How much the fleet's $/h fell through this row (negative: it rose), saving or not."""
        return money.change_per_hour(self.price_per_hour, self.replacement_price_per_hour)


def actions_to_json(rows: Sequence[ActionRow]) -> str:
    """Action rows as compact JSON, for the NodeClaim annotation that carries them until they are stored
    (see provisioner.controllers.termination)."""
    docs = [{**dataclasses.asdict(r), "time": r.time.isoformat()} for r in rows]
    return json.dumps(docs, separators=(",", ":"))


def actions_from_json(text: str) -> list[ActionRow]:
    """The rows `actions_to_json` wrote; ValueError when the text is not that (a hand-edited annotation)."""
    try:
        docs = json.loads(text)
        return [
            ActionRow(
                **{
                    **doc,
                    "time": datetime.fromisoformat(doc["time"]),
                    **{k: tuple(doc[k]) for k in _TUPLE_FIELDS if k in doc},
                }
            )
            for doc in docs
        ]
    except (TypeError, KeyError, AttributeError, json.JSONDecodeError) as err:
        raise ValueError(f"not a list of ledger action rows: {err}") from None


_TUPLE_FIELDS = tuple(f.name for f in dataclasses.fields(ActionRow) if str(f.type).startswith("tuple"))


@dataclass(frozen=True, slots=True)
class BlockerRow:
    """One node kept in one evaluation, and why."""

    time: datetime
    evaluation_id: str
    node: str
    nodepool: str
    kind: str
    method: str
    detail: str


class TeamAllocation(NamedTuple):
    """What one team's pods requested on a node (team "" = pods of no team)."""

    team: str
    cpu: int
    """Millicores."""
    memory: int
    """Bytes."""
    gpu: int


@dataclass(frozen=True, slots=True)
class UsageRow:
    """A node's capacity and allocation over `hours` starting at `time` (GPUs apart from CPU/memory)."""

    time: datetime
    hours: float
    node: str
    nodepool: str
    instance_type: str
    capacity_type: str
    price_per_hour: float
    cpu_capacity: int
    """Millicores."""
    cpu_allocated: int
    memory_capacity: int
    """Bytes."""
    memory_allocated: int
    gpu_capacity: int = 0
    gpu_allocated: int = 0
    teams: tuple[str, ...] = field(default_factory=tuple)
    provider_id: str = ""
    zone: str = ""
    region: str = ""
    pool_owner: str = ""
    """The pool's owner team (its `provisioner.sh/team` label), who pays for its idle capacity."""
    workloads: tuple[str, ...] = ()
    """`Kind/namespace/name` of the owners of the pods on the node."""
    allocations: tuple[TeamAllocation, ...] = ()
    """Requests per team (DaemonSet pods are the node's overhead and belong to no team)."""
    reservation_id: str = ""
    """The reservation the node runs in (its `capacity-reservation-id` label): its $/h is 0 here, and the
    showback charges it at the reservation's $/h instead."""

    @property
    def cost(self) -> float:
        return self.price_per_hour * self.hours

    @property
    def used_fraction(self) -> float:
        """GPU nodes are paid for their GPUs; other nodes for the busier of CPU and memory."""
        return _fraction(self, self.cpu_allocated, self.memory_allocated, self.gpu_allocated)

    def team_fraction(self, alloc: TeamAllocation) -> float:
        """One team's share of the node, measured as `used_fraction` measures the whole."""
        return _fraction(self, alloc.cpu, alloc.memory, alloc.gpu)

    @property
    def idle_cost(self) -> float:
        return self.cost * (1.0 - self.used_fraction)

    @property
    def gpu_idle_hours(self) -> float:
        return max(0, self.gpu_capacity - self.gpu_allocated) * self.hours


@dataclass(frozen=True, slots=True)
class ReservationRow:
    """A reservation over `hours` starting at `time`: the instances it holds (paid whether used or not),
    those running in it, and how much of them pods use. One sample: the counts are those at its end."""

    time: datetime
    hours: float
    reservation_id: str
    kind: str
    """`default` or `capacity-block`."""
    instance_type: str
    zone: str
    price_per_hour: float
    """$/h per instance, paid whether used or not."""
    instances: int
    running: int
    """Instances running in it: our nodes, or more when the cloud says others hold slots too."""
    used: float
    """Instances' worth in use by pods: each of our nodes by `UsageRow.used_fraction` (GPUs on a GPU
    type), an instance another cluster or account runs there as wholly used (we cannot see inside)."""
    gpus_per_instance: int = 0
    gpu_allocated: int = 0
    """GPUs pods request on the running instances (others' instances counted whole)."""
    nodepools: tuple[str, ...] = ()
    """The pools that may launch into it."""
    ends_at: datetime | None = None
    owner: str = ""
    """Who pays for its idle part: the team its NodeClass names (label `provisioner.sh/team`), else the
    owner team of its first pool; "" when neither names one (the showback then charges its pool)."""

    @property
    def cost(self) -> float:
        return self.instances * self.price_per_hour * self.hours

    @property
    def idle_cost(self) -> float:
        return max(0.0, self.instances - self.used) * self.price_per_hour * self.hours

    @property
    def used_instance_hours(self) -> float:
        return min(float(self.instances), self.used) * self.hours

    @property
    def gpu_hours(self) -> float:
        return self.instances * self.gpus_per_instance * self.hours

    @property
    def gpu_idle_hours(self) -> float:
        """Reserved GPUs no pod requests: empty slots and idle GPUs on running nodes alike."""
        return max(0, self.instances * self.gpus_per_instance - self.gpu_allocated) * self.hours


@dataclass(frozen=True, slots=True)
class BestRow:
    """The best possible cost over `hours` from `time` of a simulated run: an exact optimum packing of the
    pods wanting capacity then (`provisioner.scheduling.optimum`)."""

    time: datetime
    hours: float
    cost_per_hour: float | None
    """None where HiGHS proved no optimum in its time limit (`status` says why)."""
    status: str
    pods: int

    @property
    def cost(self) -> float:
        return (self.cost_per_hour or 0.0) * self.hours


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


def _fraction(row: UsageRow, cpu: int, memory: int, gpu: int) -> float:
    # Written out (no list, no generator): the reports ask this of every usage row several times.
    if row.gpu_capacity > 0:
        return min(1.0, gpu / row.gpu_capacity)
    if row.cpu_capacity > 0:
        busiest = cpu / row.cpu_capacity
        if row.memory_capacity > 0:
            busiest = max(busiest, memory / row.memory_capacity)
    elif row.memory_capacity > 0:
        busiest = memory / row.memory_capacity
    else:
        busiest = 0.0
    return min(1.0, busiest)


def workload_of(pod: Pod) -> str | None:
    """`Kind/namespace/name` of what recreates the pod, or None for a bare pod (nothing recreates it)."""
    if pod.owner_kind is None or pod.owner_name is None:
        return None
    return f"{pod.owner_kind}/{pod.namespace}/{pod.owner_name}"


def _paid_share(node: StateNode, pods: Sequence[Pod]) -> float:
    """The pods' share of what the node is paid for, measured as `UsageRow.used_fraction` measures it."""
    alloc = node.allocatable
    total: dict[str, int] = {}
    for pod in pods:
        total = quantities.add(total, pod.requests)
    gpus = accelerators.units(alloc)
    if gpus > 0:
        return min(1.0, accelerators.units(total) / gpus)
    fractions = [total.get(k, 0) / alloc[k] for k in (quantities.CPU, quantities.MEMORY) if alloc.get(k, 0)]
    return min(1.0, max(fractions, default=0.0))


@dataclass(frozen=True, slots=True)
class Launched:
    """A replacement as the cloud really launched it."""

    node: str
    instance_type: str
    capacity_type: str
    price_per_hour: float


def action_rows(
    command: Command,
    *,
    time: datetime,
    command_id: str,
    launched: Sequence[Launched] | None = None,
) -> list[ActionRow]:
    """Ledger rows of one command, one per node it removes.

    `launched` are its replacements as really launched; None means "as planned" (a plan not carried out).
    The replacements' $/h is shared among the removed nodes in proportion to their prices (evenly when they
    cost nothing: reserved nodes), so a command's rows add up to its whole change in $/h; a reserved node
    moved onto on-demand capacity (a Capacity Block ending) saves a negative amount.
    """
    by_name = {n.name: n for n in command.nodes}
    removed = sum(r.price_per_hour for r in command.records)
    if launched is not None:
        after = sum(x.price_per_hour for x in launched)
        launched_type = ",".join(sorted({x.instance_type for x in launched})) or None
        launched_capacity = ",".join(sorted({x.capacity_type for x in launched})) or None
    out = []
    for r in command.records:
        node = by_name.get(r.node)
        workload = [p for p in node.pods if not p.is_daemonset_pod and not p.is_terminal] if node else []
        bare = {p.key: p for p in workload if workload_of(p) is None}
        evicted = r.price_per_hour * _paid_share(node, list(bare.values())) if node and bare else 0.0
        if launched is None:
            replacement = r.replacement_price_per_hour
            rtype, rcapacity = r.replacement_type, r.replacement_capacity_type
        else:
            share = r.price_per_hour / removed if removed > 0 else 1 / len(command.records)
            replacement = after * share
            rtype, rcapacity = launched_type, launched_capacity
        moved = tuple(m.pod for m in r.pods if m.pod not in bare)
        out.append(
            ActionRow(
                time=time,
                command_id=command_id,
                action="replace" if rtype else "delete",
                nodepool=r.nodepool,
                teams=tuple(r.teams),
                node=r.node,
                instance_type=r.instance_type,
                capacity_type=r.capacity_type,
                zone=r.zone,
                reason=str(r.reason.value),
                method=command.method,
                price_per_hour=r.price_per_hour,
                replacement_type=rtype,
                replacement_capacity_type=rcapacity,
                replacement_price_per_hour=replacement,
                savings_per_hour=money.claimed_saving(
                    reason=str(r.reason.value),
                    method=command.method,
                    removed=r.price_per_hour,
                    launched=replacement,
                    evicted=evicted,
                ),
                pods_moved=len(moved),
                pods=moved,
                detail=r.detail,
                replacement_nodes=tuple(x.node for x in launched or ()),
                evicted_pods=tuple(sorted(bare)),
                evicted_per_hour=evicted,
                workloads=tuple(sorted({w for p in workload if (w := workload_of(p))})),
            )
        )
    return out


def blocker_rows(plan: Plan, *, evaluation_id: str) -> list[BlockerRow]:
    """Every blocker of a planner `Plan` (time = the plan's `now`)."""
    return [
        BlockerRow(
            time=plan.now,
            evaluation_id=evaluation_id,
            node=b.node,
            nodepool=b.nodepool,
            kind=str(b.kind.value),
            method=b.method,
            detail=b.detail,
        )
        for b in plan.blockers
    ]


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
