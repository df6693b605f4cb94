"""The scale-down report: what disruption removed and really saved, what the fleet cost, what idle
capacity still costs, the churn it caused, and what kept nodes alive.

The money rules (each has a test in tests/finops/test_money.py):
- *Claimed* $/h of an action is `provisioner.finops.money`'s one rule applied to its row: the node's
  $/h minus its share of the replacements really launched, less the bare pods' share, for moves made to
  save money; expiration, drift and a Capacity Block ending claim nothing, and what they changed the
  fleet's $/h by is its own column ("Not a saving"), never added to the savings.
- Pods nothing recreates are *workload evicted*, with their share of the node's $/h, never a saving.
- *Churn*: a node launched within `CHURN_WINDOW` after an action, for pods of the workloads that action
  moved (and not a replacement of any action: that is the launching action's own doing), is charged
  back, node by node: its cost (from the usage samples, up to
  `now`) comes off that action's realized savings, split evenly when it follows several actions.
- *Realized* savings of an action are its claimed $/h over the hours from the action (or the window's
  start) to `now`, minus its churn charge; they may be negative. The *run-rate* is the window's claimed
  $/h times 730 h, an estimate of a month ahead. The two are shown side by side and never added.
- *Paid* is what the fleet cost: the usage samples' hours times their $/h (`provisioner.finops.meter`
  bills each node from launch to deletion). `simulate` prints this same figure for its run.
- Reserved capacity is paid whether used or not: a reserved node's row costs $0/h more, so moving a node
  from on-demand into a reservation with room saves the whole on-demand price. What the reservations
  themselves cost, and their idle part, come from their own samples (`reservations`), beside Paid and
  never added to it.

This module builds the report (`build`, `ScaleDownReport`); its formats (table, CSV, JSON, the HTML page)
are `scale_down_formats`', so every format carries the same figures; reservation utilization is
`reservations`'.

An action naming several teams splits its money evenly among them; what teams paid is divided as
`costs` divides it (requests, and idle to the pool's owner or "unallocated"), so team totals add up to the
total and agree with `provisioner report costs`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from provisioner.finops import window
from provisioner.finops.reports import best as best_possible
from provisioner.finops.reports import churn as churn_
from provisioner.finops.reports import costs
from provisioner.finops.reports import reservations as reserved
from provisioner.finops.rows import HOURS_PER_MONTH, ActionRow, BestRow, BlockerRow, ReservationRow, UsageRow

NO_TEAM = costs.NO_TEAM
CHURN_WINDOW = churn_.CHURN_WINDOW
churn_charges = churn_.charges


@dataclass(slots=True)
class Totals:
    """Sums for one group (the whole window, a pool, a team or a reason)."""

    name: str
    nodes_removed: int = 0
    nodes_replaced: int = 0
    pods_moved: float = 0
    pods_evicted: float = 0
    """Bare pods evicted for good (workload evicted)."""
    evicted_per_hour: float = 0.0
    savings_per_hour: float = 0.0
    forced_change_per_hour: float = 0.0
    """What moves made for another reason than saving (expiration, drift, a Capacity Block ending...)
    changed the fleet's $/h by (positive: it fell); shown beside the savings, never counted in them."""
    churn_cost: float = 0.0
    realized_savings: float = 0.0
    run_rate_monthly: float = 0.0
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_idle_hours: float = 0.0

    def add_action(self, row: ActionRow, *, realized: float, churn: float, share: float = 1.0) -> None:
        if share == 1.0:
            if row.action == "replace":
                self.nodes_replaced += 1
            else:
                self.nodes_removed += 1
        self.pods_moved += row.pods_moved * share
        self.pods_evicted += len(row.evicted_pods) * share
        self.evicted_per_hour += row.evicted_per_hour * share
        claimed = row.claimed_per_hour
        self.savings_per_hour += claimed * share
        if not row.is_saving:
            self.forced_change_per_hour += row.change_per_hour * share
        self.churn_cost += churn * share
        self.realized_savings += realized * share
        self.run_rate_monthly += claimed * HOURS_PER_MONTH * share

    def add_usage(self, money: UsageMoney) -> None:
        self.cost += money.cost
        self.idle_cost += money.idle_cost
        self.gpu_idle_hours += money.gpu_idle_hours


class UsageMoney(NamedTuple):
    """What one usage row adds to a group: worked out once per row, whichever groups it counts in."""

    cost: float
    idle_cost: float
    gpu_idle_hours: float

    @classmethod
    def of(cls, row: UsageRow) -> UsageMoney:
        return cls(row.cost, row.idle_cost, row.gpu_idle_hours)


@dataclass(slots=True)
class BlockerCount:
    kind: str
    detail: str
    nodepool: str
    evaluations: int
    nodes: int


@dataclass(slots=True)
class Churn:
    pods_moved: int = 0
    pods_evicted: int = 0
    nodes_replaced: int = 0
    nodes_removed: int = 0
    nodes_launched_again: int = 0
    """Nodes launched within the churn window for pods an action had just moved (charged back)."""
    cost: float = 0.0
    """What those nodes cost, up to `now`."""
    replacements_disrupted_within_hour: int = 0
    """Replacement nodes that were themselves disrupted less than an hour after they were launched."""

    def cells(self) -> list[float | int]:
        """The churn table's one row, in the order both the text and the HTML report head it."""
        return [
            self.pods_moved,
            self.pods_evicted,
            self.nodes_removed,
            self.nodes_replaced,
            self.nodes_launched_again,
            round(self.cost, 2),
            self.replacements_disrupted_within_hour,
        ]


@dataclass(frozen=True, slots=True)
class ActionView:
    """An action row with the money the report works out for it."""

    row: ActionRow
    realized: float
    churn: float


@dataclass(slots=True)
class ScaleDownReport:
    since: datetime
    now: datetime
    pool: str | None
    total: Totals
    pools: list[Totals] = field(default_factory=list)
    teams: list[Totals] = field(default_factory=list)
    reasons: list[Totals] = field(default_factory=list)
    churn: Churn = field(default_factory=Churn)
    blockers: list[BlockerCount] = field(default_factory=list)
    cost_per_hour: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    """Pool -> ($ paid in each clock hour, from the usage rows), every hour of the window, zeros included."""
    actions: list[ActionView] = field(default_factory=list)
    reservations: reserved.ReservationReport | None = None
    """Reservation utilization over the window; None when the ledger has no reservation samples."""
    best: best_possible.Comparison | None = None
    """Paid beside the best possible (a simulated run's `--best-possible`); None without its rows."""
    best_per_hour: list[tuple[datetime, float]] = field(default_factory=list)
    """The best possible $ in each clock hour, for the chart beside what was paid."""

    @property
    def run_rate_per_hour(self) -> float:
        return self.total.savings_per_hour


def build(
    actions: Sequence[ActionRow],
    blockers: Sequence[BlockerRow],
    usage: Sequence[UsageRow],
    *,
    since: datetime,
    now: datetime,
    pool: str | None = None,
    top_blockers: int = 10,
    reservations: Sequence[ReservationRow] = (),
    best: Sequence[BestRow] = (),
    totals_only: bool = False,
) -> ScaleDownReport:
    """The report over [since, now) for one pool or all. Rows outside the window or pool are ignored.
    `totals_only`: only `total`, `churn`, `reservations` and `best` (what `simulate`'s JSON reads); the
    breakdowns by pool, team and reason, the hourly cost and the blocker counts are left empty."""
    utilization = reserved.build(reservations, since=since, now=now, pool=pool)

    def keep(row: ActionRow | BlockerRow | UsageRow) -> bool:
        return since <= row.time < now and (pool is None or row.nodepool == pool)

    actions = [a for a in actions if keep(a)]
    blockers = [] if totals_only else [b for b in blockers if keep(b)]
    usage = [u for u in window.clip(usage, since=since, now=now) if keep(u)]
    charges, relaunched = churn_charges(actions, usage, now=now)
    views = [
        ActionView(
            row=a,
            realized=a.claimed_per_hour * max(0.0, (now - max(a.time, since)).total_seconds() / 3600) - c,
            churn=c,
        )
        for a, c in zip(actions, charges, strict=True)
    ]
    total = Totals("total")
    by_pool: dict[str, Totals] = {}
    by_team: dict[str, Totals] = {}
    by_reason: dict[str, Totals] = {}
    for view in views:
        row = view.row
        money = {"realized": view.realized, "churn": view.churn}
        total.add_action(row, **money)
        if totals_only:
            continue
        by_pool.setdefault(row.nodepool, Totals(row.nodepool)).add_action(row, **money)
        by_reason.setdefault(row.reason, Totals(row.reason)).add_action(row, **money)
        teams = row.teams or (NO_TEAM,)
        for team in teams:
            group = by_team.setdefault(team, Totals(team))
            share = 1.0 / len(teams)
            group.add_action(row, **money, share=share)
            # Node counts are whole: attribute the node to its first team, the money evenly.
            if share != 1.0 and team == teams[0]:
                if row.action == "replace":
                    group.nodes_replaced += 1
                else:
                    group.nodes_removed += 1
    paid_by_row = [UsageMoney.of(sample) for sample in usage]
    for sample, paid in zip(usage, paid_by_row, strict=True):
        total.add_usage(paid)
        if not totals_only:
            by_pool.setdefault(sample.nodepool, Totals(sample.nodepool)).add_usage(paid)
    # Teams pay as the showback divides each node (`costs`): their requests' share, and the idle part to
    # the pool's owner team or "unallocated"; so the team rows agree with `report costs`.
    for part in () if totals_only else costs.shares(usage):
        payer = by_team.setdefault(part.team, Totals(part.team))
        payer.cost += part.cost
        if part.kind == "idle":
            payer.idle_cost += part.cost
            payer.gpu_idle_hours += part.gpu_hours
    # Usage rows carry no reason: put the paid and idle figures of a reason's nodes beside it.
    reason_of_node = {} if totals_only else {v.row.node: v.row.reason for v in views}
    for sample, paid in zip(usage, paid_by_row, strict=True):
        reason = reason_of_node.get(sample.node)
        if reason is not None:
            by_reason[reason].add_usage(paid)
    churn = Churn(
        pods_moved=sum(a.pods_moved for a in actions),
        pods_evicted=sum(len(a.evicted_pods) for a in actions),
        nodes_replaced=sum(1 for a in actions if a.action == "replace"),
        nodes_removed=sum(1 for a in actions if a.action == "delete"),
        nodes_launched_again=relaunched,
        cost=sum(charges),
    )
    born: dict[str, datetime] = {}
    for row in actions:
        for name in row.replacement_nodes:
            born.setdefault(name, row.time)
    for row in actions:
        started = born.get(row.node)
        if started is not None and timedelta(0) <= row.time - started < CHURN_WINDOW:
            churn.replacements_disrupted_within_hour += 1
    grouped: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for b in blockers:
        evaluations, nodes = grouped.setdefault((b.kind, b.detail, b.nodepool), (set(), set()))
        evaluations.add(b.evaluation_id)
        nodes.add(b.node)
    counts = [
        BlockerCount(kind=k, detail=d, nodepool=p, evaluations=len(ev), nodes=len(nodes))
        for (k, d, p), (ev, nodes) in grouped.items()
    ]
    counts.sort(key=lambda c: (-c.evaluations * c.nodes, c.kind, c.detail))

    def ordered(groups: dict[str, Totals]) -> list[Totals]:
        return sorted(groups.values(), key=lambda t: (-t.savings_per_hour, -t.cost, t.name))

    return ScaleDownReport(
        since=since,
        now=now,
        pool=pool,
        total=total,
        pools=ordered(by_pool),
        teams=ordered(by_team),
        reasons=ordered(by_reason),
        churn=churn,
        blockers=counts[:top_blockers],
        cost_per_hour={} if totals_only else hourly_cost(usage, since=since, now=now),
        actions=views,
        reservations=utilization if utilization.reservations else None,
        best=best_possible.compare(best, usage, realized=total.realized_savings, since=since, now=now),
        best_per_hour=best_possible.per_hour(best, since=since, now=now),
    )


def hourly_cost(
    usage: Sequence[UsageRow], *, since: datetime, now: datetime
) -> dict[str, list[tuple[datetime, float]]]:
    """Pool -> $ paid in each clock hour from the first sample (or `since`, if later) to `now`: a sample
    spanning hours adds to each in proportion, and an hour with no node is a zero (a pool scaled to zero
    draws its line down to 0)."""
    start = max([since, min((r.time for r in usage), default=since)])
    first = start.replace(minute=0, second=0, microsecond=0)
    hours: list[datetime] = []
    hour = first
    while hour < now:
        hours.append(hour)
        hour += timedelta(hours=1)
    buckets: dict[str, dict[datetime, float]] = defaultdict(lambda: dict.fromkeys(hours, 0.0))
    for row in usage:
        start, end = row.time, row.time + timedelta(hours=row.hours)
        hour = start.replace(minute=0, second=0, microsecond=0)
        while hour < end:
            overlap = (min(end, hour + timedelta(hours=1)) - max(start, hour)).total_seconds() / 3600
            series = buckets[row.nodepool]
            series[hour] = series.get(hour, 0.0) + row.price_per_hour * overlap
            hour += timedelta(hours=1)
    return {p: sorted(values.items()) for p, values in sorted(buckets.items())}
