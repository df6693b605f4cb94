"""The values the ledger stores and the reports read: one action per node removed or replaced, one
blocker per node kept per evaluation, one usage sample per node per interval, one sample per reservation
per interval, and a simulated run's best possible cost. Pure.

The ledger maps them to tables; the reports take them as plain values, so reports are testable without a
database. What each row says of money (paid, idle, claimed, a reservation's idle part) is worked out
here, from the row alone. Rows are built elsewhere: actions and blockers from the planner's commands by
`provisioner.finops.action_rows`, usage and reservation samples from snapshots by
`provisioner.finops.samples`.

Reservations are sampled too (`ReservationRow`): a reservation is paid for every hour it exists, used or
not, so its idle part is money the node rows (whose reserved nodes cost $0/h more) cannot show.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from provisioner.finops import money

if TYPE_CHECKING:
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

    def spanning(self, time: datetime, hours: float) -> UsageRow:
        """This row over another span: `dataclasses.replace(row, time=..., hours=...)`, by copying the
        slots (the meter makes one per node every interval, and a frozen dataclass's `__init__` costs
        more than the copy)."""
        copy = object.__new__(UsageRow)
        put = object.__setattr__
        for name in _USAGE_FIELDS:
            put(copy, name, getattr(self, name))
        put(copy, "time", time)
        put(copy, "hours", hours)
        return copy


_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(UsageRow))


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
