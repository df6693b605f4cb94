"""Reclaim: which borrowed pods to evict so an owner's in-quota pod fits under its pool's limits, or
so a borrower below its fair share of what is borrowed gets it from one above.

Victims are preemptible pods of other teams that are over their quota on that pool (a gang's members
all together, as a gang runs whole or not at all: Kueue evicts a workload whole), taken lowest
priority first, then from the team most over its fair share (its borrowed share per unit of
`overQuotaWeight`), then the newest; only while their team is still over quota on a resource that is
short (for a fair-share reclaim: only while the team stays at or above its fair share, so two borrowers
never take pods back and forth), and only until the shortfall is covered: just enough. None when even
all of them would not do.

Fair shares (`fair_shares`): what a pool's limits leave once every team's in-quota use, the use of
pods of no team and what lenders keep back of their quota (`lendingLimit`, `kept_back`) are counted,
split among the teams borrowing there (or waiting to) by weight.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from provisioner.api.team import Team
from provisioner.quota.book import QuotaBook
from provisioner.quota.usage import Usage
from provisioner.scheduling.gangs import membership
from provisioner.state.objects import Pod


def over_quota(use: Mapping[str, int], limits: Mapping[str, int | None]) -> dict[str, int]:
    """Per resource, how far `use` is above the quota (only resources the quota limits, only > 0)."""
    out: dict[str, int] = {}
    for resource, amount in use.items():
        limit = limits.get(resource)
        if limit is not None and amount > limit:
            out[resource] = amount - limit
    return out


def borrowed_share(over: Mapping[str, int], pool_limits: Mapping[str, int], weight: int) -> float:
    """How much of the pool a team borrows, per unit of weight: its largest share of any limited resource
    (the dominant share), divided by its weight. Only orders teams; never used for capacity."""
    shares = [over.get(r, 0) / limit for r, limit in pool_limits.items() if limit > 0]
    return max(shares, default=0.0) / max(weight, 1)


def _newest_first(pod: Pod) -> float:
    created: datetime | None = pod.created
    return -created.timestamp() if created is not None else 0.0


def _units(pods: Collection[Pod]) -> list[list[Pod]]:
    """The pods as they give way: a gang's members together (a gang runs whole or not at all), any other
    pod alone."""
    units: dict[str, list[Pod]] = {}
    for pod in pods:
        found = membership(pod)
        units.setdefault(found[0] if found is not None else pod.key, []).append(pod)
    return list(units.values())


def _sum(amounts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for amount in amounts:
        for r, a in amount.items():
            out[r] = out.get(r, 0) + a
    return out


def select(
    short: Mapping[str, int],
    *,
    pool: str,
    reclaimer: str,
    usage: Usage,
    book: QuotaBook,
    exclude: Collection[str] = (),
    among: Collection[str] | None = None,
    floors: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[Pod, ...] | None:
    """The pods to evict from `pool` to free `short` (resource -> amount missing), or None. `among`:
    only these teams' pods (a department's), default any team's. `floors`: team -> its fair share of
    borrowed capacity, below which none of its pods is taken (default: its quota)."""
    pool_limits = book.pool_limits(pool)
    missing = {r: a for r, a in short.items() if a > 0}
    candidates: list[tuple[tuple[int, float, float, str], list[Pod], str, dict[str, int]]] = []
    excess: dict[str, dict[str, int]] = {}
    reachable: dict[str, int] = {}
    for (team_name, pool_name), pods in usage.pods.items():
        if pool_name != pool or team_name == reclaimer or (among is not None and team_name not in among):
            continue
        team = book.teams.get(team_name)
        if team is None:
            continue
        entry = book.team_entry(team, pool)
        use = usage.of_team(team_name, pool)
        over = over_quota(use, {r: entry.limit(r) for r in use})
        if floors is not None:
            floor = floors.get(team_name, {})
            over = {r: a - floor.get(r, 0) for r, a in over.items() if a > floor.get(r, 0)}
        if not any(over.get(r, 0) > 0 for r in missing):
            continue
        excess[team_name] = over
        rank = -borrowed_share(over, pool_limits, entry.weight)
        for r in missing:
            reachable[r] = reachable.get(r, 0) + over.get(r, 0)
        for unit in _units(pods):
            if any(p.deleting or not p.preemptible or p.key in exclude for p in unit):
                continue
            req = _sum(usage.request_of(p) for p in unit)
            if any(req.get(r, 0) for r in missing):
                head = max(unit, key=lambda p: (p.priority, -_newest_first(p)))
                candidates.append(
                    ((head.priority, rank, _newest_first(head), head.key), unit, team_name, req)
                )
    # What the teams borrow bounds what a reclaim can free: say no before ordering anyone.
    if any(reachable.get(r, 0) < a for r, a in missing.items()):
        return None
    heapq.heapify(candidates)
    chosen: list[Pod] = []
    while missing and candidates:
        _, unit, team_name, req = heapq.heappop(candidates)
        over = excess[team_name]
        # Only pods that are (part of) what the team borrows: a team back within quota keeps the rest.
        if not any(over.get(r, 0) > 0 and req.get(r, 0) > 0 for r in missing):
            continue
        if floors is not None and any(req.get(r, 0) > over.get(r, 0) for r in short if req.get(r, 0)):
            continue  # taking it would put its team below its fair share
        chosen.extend(unit)
        for r, amount in req.items():
            if r in over:
                over[r] -= amount
            if r in missing:
                missing[r] -= amount
                if missing[r] <= 0:
                    del missing[r]
    return tuple(chosen) if not missing else None


def fair_shares(
    pool: str,
    *,
    usage: Usage,
    book: QuotaBook,
    waiting: Collection[str],
    among: Collection[str] | None = None,
    capacity: Mapping[str, int] | None = None,
) -> dict[str, dict[str, int]]:
    """Team -> its fair share of the capacity borrowed on `pool`, per limited resource, among the teams
    borrowing there now and those in `waiting` (teams with a preemptible pod waiting to borrow there).
    `among` and `capacity`: only these teams (a department's) sharing this much (what the department
    may use there), instead of every team sharing the pool's limits."""
    limits = book.pool_limits(pool) if capacity is None else capacity
    if not limits:
        return {}
    in_quota: dict[str, int] = {}
    team_use: dict[str, int] = {}
    borrowers: dict[str, int] = {}
    overs: dict[str, dict[str, int]] = {}
    for (team_name, pool_name), use in sorted(usage.team.items()):
        team = book.teams.get(team_name)
        if pool_name != pool or team is None or (among is not None and team_name not in among):
            continue
        entry = book.team_entry(team, pool)
        over = overs[team_name] = over_quota(use, {r: entry.limit(r) for r in use})
        for r in limits:
            team_use[r] = team_use.get(r, 0) + use.get(r, 0)
            in_quota[r] = in_quota.get(r, 0) + use.get(r, 0) - over.get(r, 0)
    # What a team borrows within its department's quota is the department's own, not the pool's to share
    # (departments own their quota): it counts as in quota, and the team keeps it besides its share.
    covered = _department_covered(pool, usage=usage, book=book, overs=overs) if among is None else {}
    for team_name, over in overs.items():
        mine = covered.get(team_name, {})
        for r, amount in mine.items():
            if r in limits:
                in_quota[r] = in_quota.get(r, 0) + amount
        if any(over.get(r, 0) > mine.get(r, 0) for r in limits):
            borrowers[team_name] = book.team_entry(book.teams[team_name], pool).weight
    for team_name in waiting:
        team = book.teams.get(team_name)
        if team is not None:
            borrowers.setdefault(team_name, book.team_entry(team, pool).weight)
    total_weight = sum(borrowers.values())
    if not total_weight:
        return {}
    pool_use = usage.of_pool(pool) if among is None else team_use
    kept = kept_back(pool, usage=usage, book=book, among=among, resources=limits)
    out: dict[str, dict[str, int]] = {}
    for team_name, weight in borrowers.items():
        share: dict[str, int] = {}
        for r, limit in limits.items():
            others = pool_use.get(r, 0) - team_use.get(r, 0)  # pods of no team
            borrowable = max(0, limit - in_quota.get(r, 0) - others - kept.get(r, 0))
            share[r] = borrowable * weight // total_weight + covered.get(team_name, {}).get(r, 0)
        out[team_name] = share
    return out


def kept_back(
    pool: str,
    *,
    usage: Usage,
    book: QuotaBook,
    among: Collection[str] | None,
    resources: Collection[str],
    borrower: Team | None = None,
) -> dict[str, int]:
    """Per resource, what lenders keep free of their quota on `pool` (`lendingLimit`), which no borrower
    may use: every team's (only `among`'s, for a department's cap), and, for the whole pool, every
    department's beyond what its own teams keep. Not `borrower`'s own, nor its department's."""
    out: dict[str, int] = {}
    if not book.has_lenders:
        return out
    by_dept: dict[str, dict[str, int]] = {}
    for team in book.teams.values():
        if (among is not None and team.name not in among) or (
            borrower is not None and team.name == borrower.name
        ):
            continue
        entry = book.team_entry(team, pool)
        if entry.lending is None:
            continue
        use = usage.of_team(team.name, pool)
        for r in resources:
            if (k := entry.kept(r, use.get(r, 0))) > 0:
                out[r] = out.get(r, 0) + k
                if team.spec.department is not None:
                    mine = by_dept.setdefault(team.spec.department, {})
                    mine[r] = mine.get(r, 0) + k
    if among is None:
        for dept in book.departments.values():
            entry = book.department_entry(dept, pool)
            if entry.lending is None or (borrower is not None and dept.name == borrower.spec.department):
                continue
            use = usage.of_department(dept.name, pool)
            for r in resources:
                k = entry.kept(r, use.get(r, 0)) - by_dept.get(dept.name, {}).get(r, 0)
                if k > 0:
                    out[r] = out.get(r, 0) + k
    return out


def _department_covered(
    pool: str, *, usage: Usage, book: QuotaBook, overs: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Team -> the part of its over-quota use on `pool` its department's quota holds (what the
    department's quota leaves once its teams' in-quota use is counted, handed to its borrowing teams in
    name order)."""
    room: dict[str, dict[str, int]] = {}
    out: dict[str, dict[str, int]] = {}
    for team_name, over in sorted(overs.items()):
        team = book.teams[team_name]
        dept = book.department_of(team)
        if dept is None or not over:
            continue
        if dept.name not in room:
            entry = book.department_entry(dept, pool)
            use = usage.of_department(dept.name, pool)
            members = book.members(dept.name)
            dept_over: dict[str, int] = {}
            for member in members:
                for r, a in overs.get(member.name, {}).items():
                    dept_over[r] = dept_over.get(r, 0) + a
            room[dept.name] = {
                r: max(0, lim - (use.get(r, 0) - dept_over.get(r, 0)))
                for r in use
                if (lim := entry.limit(r)) is not None
            }
        left = room[dept.name]
        mine = {r: min(a, left.get(r, 0)) for r, a in over.items() if left.get(r, 0) > 0}
        for r, a in mine.items():
            left[r] -= a
        if mine:
            out[team_name] = mine
    return out


def yields_to(victim: Pod, pod: Pod, *, newer_equal: bool = False) -> bool:
    """Whether `victim`, a pod of the same team, gives way to `pod` in its team's quota: lower priority, or
    equal priority and preemptible while `pod` is not (or, with `newer_equal`, created after `pod`); never
    a pod that is not preemptible for one that is."""
    if not victim.preemptible and pod.preemptible:
        return False
    if victim.priority != pod.priority:
        return victim.priority < pod.priority
    if victim.preemptible and not pod.preemptible:
        return True
    return newer_equal and _newest_first(victim) < _newest_first(pod)


def within_team(
    short: Mapping[str, int],
    pod: Pod,
    *,
    candidates: Collection[Pod],
    usage: Usage,
    partial: Mapping[str, int] | None = None,
) -> tuple[Pod, ...] | None:
    """Of `candidates` (the team's pods that yield to `pod`), those to evict to free `short`: lowest
    priority first, preemptible before not, newest first; just enough. None when they cannot free
    `short`; with `partial`, only what `partial` names must be freed in full, the rest as far as they go."""
    missing = {r: a for r, a in short.items() if a > 0}
    required = {r: a for r, a in (short if partial is None else partial).items() if a > 0}
    ordered = sorted(candidates, key=lambda p: (p.priority, not p.preemptible, _newest_first(p), p.key))
    chosen: list[Pod] = []
    for victim in ordered:
        if not missing:
            break
        req = usage.request_of(victim)
        if not any(req.get(r, 0) for r in missing):
            continue
        chosen.append(victim)
        for r, amount in req.items():
            if r in missing:
                missing[r] -= amount
                if missing[r] <= 0:
                    del missing[r]
            if r in required:
                required[r] -= amount
                if required[r] <= 0:
                    del required[r]
    return tuple(chosen) if not required else None
