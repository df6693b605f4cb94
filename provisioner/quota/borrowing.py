"""Borrowing: the pods left after the in-quota pass, served over quota in turn so idle capacity is shared
by `overQuotaWeight` (a gang's members one after another), and the reclaims among borrowers when a pool
is full: a team below its fair share takes pods back from teams above theirs (inside a department that
may not borrow, among its own teams).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence

from provisioner.api import quantities
from provisioner.api.team import Department, Team
from provisioner.quota import reclaim
from provisioner.quota.book import counted
from provisioner.quota.work import AdmissionPass, order_key, short_of
from provisioner.scheduling.gangs import membership
from provisioner.state.objects import Pod

Borrower = tuple[Pod, Team, Department | None, tuple[str, ...], list[tuple[str, str]], bool]
"""(pod, team, department, pools it may use in order, reasons so far, whether it could ever run)."""
Admitted = tuple[Pod, str, Team, tuple[Pod, ...]]
"""(pod, pool, team, victims to evict first) of a pod admitted over quota."""


FAIR_RECLAIMS_PER_PASS = 8
"""Pods admitted by a fair-share reclaim in one pass at most: shares converge over a few passes, without
a burst of evictions, and a pass stays cheap (each such reclaim looks at every waiting borrower)."""


def serve(work: AdmissionPass, borrowers: Sequence[Borrower]) -> tuple[list[Admitted], list[Borrower]]:
    """Admit borrowers over quota in turn: those admitted, and the ones left, in their order. Each team's candidates queue in
    order; a turn goes to the team whose next candidate borrows least per unit of weight. Room only
    shrinks as pods are admitted, so a candidate that fits nowhere is set aside for the pass, until a
    fair-share reclaim frees room and every candidate gets another look."""
    book, usage = work.book, work.usage
    index = {id(b): i for i, b in enumerate(borrowers)}
    left: list[Borrower] = list(borrowers)

    def feasible(candidate: Borrower) -> str | None:
        pod, team, dept, pools, _, _ = candidate
        request = counted(pod.requests)
        for pool in pools:
            if (
                work.may_borrow(pod, team, dept, pool, request) is None
                and work.pool_full(pool, request, team) is None
            ):
                return pool
        return None

    def share(team: Team, pool: str) -> float:
        entry = book.team_entry(team, pool)
        use = usage.of_team(team.name, pool)
        over = reclaim.over_quota(use, {r: entry.limit(r) for r in use})
        return reclaim.borrowed_share(over, book.pool_limits(pool), entry.weight)

    admitted: list[Admitted] = []
    fair_reclaims = 0
    while left:
        queues: dict[str, deque[Borrower]] = {}
        for candidate in left:
            queues.setdefault(candidate[1].name, deque()).append(candidate)
        set_aside: list[Borrower] = []
        gang: tuple[str, str] | None = None  # (team, gang) of the pod admitted last
        while True:
            best: tuple[tuple[float, int, bool, float, str], str, str] | None = None
            if gang is not None:
                # A gang borrows as one workload (Kueue admits a workload whole, one at a time): its
                # next member takes the next turn, so two gangs never split the room between them.
                queue = queues[gang[0]]
                if queue and _gang_of(queue[0][0]) == gang[1] and (pool := feasible(queue[0])) is not None:
                    best = ((0.0, 0, False, 0.0, ""), gang[0], pool)
            for name, queue in queues.items() if best is None else ():
                while queue:
                    pool = feasible(queue[0])
                    if pool is not None:
                        key = (share(queue[0][1], pool), *order_key(queue[0][0]))
                        if best is None or key < best[0]:
                            best = (key, name, pool)
                        break
                    set_aside.append(queue.popleft())
            if best is None:
                break
            _, name, pool = best
            pod, team, _dept, _pools, _reasons, _ever = queues[name].popleft()
            work.count_in(pod, pool, team)
            admitted.append((pod, pool, team, ()))
            found = _gang_of(pod)
            gang = (name, found) if found is not None else None
        left = sorted(set_aside, key=lambda b: index[id(b)])
        fair = None
        if fair_reclaims < FAIR_RECLAIMS_PER_PASS:
            fair = _owner_reclaim(work, left) or _fair_reclaim(work, left)
        if fair is None:
            break
        fair_reclaims += 1
        i, pool, taken = fair
        pod, team, _dept, _pools, _reasons, _ever = left.pop(i)
        work.count_in(pod, pool, team)
        admitted.append((pod, pool, team, taken))
    return admitted, left


def _gang_of(pod: Pod) -> str | None:
    found = membership(pod)
    return found[0] if found is not None else None


def _owner_reclaim(
    work: AdmissionPass, remaining: Sequence[Borrower]
) -> tuple[int, str, tuple[Pod, ...]] | None:
    """Before fair sharing: the first borrower (by order) whose department owns the room it needs (the
    pod keeps the department within its quota on the pool) while teams of other departments, or of none,
    hold it on loan: their borrowed pods give way (Run:ai's "reclaimed by the owner Project or
    Department", Kueue's hierarchical cohorts)."""
    book, usage = work.book, work.usage
    order = sorted(range(len(remaining)), key=lambda i: order_key(remaining[i][0]))
    for i in order:
        pod, team, dept, pools, _, _ = remaining[i]
        if dept is None:
            continue
        request = counted(pod.requests)
        for pool in pools:
            if work.may_borrow(pod, team, dept, pool, request) is not None:
                continue
            owned = {r: lim for r, lim in work.limits_of(dept, pool, request).items() if lim is not None}
            if not owned or short_of(usage.of_department(dept.name, pool), request, owned):
                continue  # beyond what the department owns there: fair sharing decides
            short = short_of(work.pool_use(pool, request, team), request, book.pool_limits(pool))
            if not short:
                continue
            victims = reclaim.select(
                short,
                pool=pool,
                reclaimer=team.name,
                usage=usage,
                book=book,
                exclude=work.exclude,
                among=work.borrowing_from_others(pool, short, but=dept.name),
            )
            if victims is None:
                continue
            for victim in victims:
                work.take_out(victim, pool)
            work.exclude.update(v.key for v in victims)
            return i, pool, victims
    return None


def _fair_reclaim(
    work: AdmissionPass, remaining: Sequence[Borrower]
) -> tuple[int, str, tuple[Pod, ...]] | None:
    """When no borrower fits in the room left: the first (least borrowed per weight, then by order) whose
    team is below its fair share where the room is short, with the pods to take from teams above theirs.
    Room is short under a department's cap (its quota, when it may not borrow: shared among its own
    teams, victims from its teams) or under the pool's limits (shared among every borrowing team)."""
    book, usage = work.book, work.usage
    waiting: dict[str, set[str]] = {}
    for pod, team, _dept, pools, _, _ in remaining:
        for pool in pools:
            if work.may_ever_borrow(pod, team, pool) is None:
                waiting.setdefault(pool, set()).add(team.name)
    shares = {
        pool: reclaim.fair_shares(pool, usage=usage, book=book, waiting=teams)
        for pool, teams in waiting.items()
    }
    tried: set[tuple[str, str, tuple[tuple[str, int], ...]]] = set()
    order = sorted(range(len(remaining)), key=lambda i: order_key(remaining[i][0]))
    for i in order:
        pod, team, dept, pools, _, _ = remaining[i]
        request = counted(pod.requests)
        for pool in pools:
            if team.name not in shares.get(pool, {}) or work.may_ever_borrow(pod, team, pool) is not None:
                continue
            signature = (team.name, pool, tuple(sorted(request.items())))
            if signature in tried:
                continue
            tried.add(signature)
            victims = _fair_victims(work, team, dept, pool, request, shares[pool], waiting[pool])
            if victims is None:
                continue
            return i, pool, victims
    return None


def _fair_victims(
    work: AdmissionPass,
    team: Team,
    dept: Department | None,
    pool: str,
    request: Mapping[str, int],
    pool_shares: Mapping[str, Mapping[str, int]],
    waiting: Collection[str],
) -> tuple[Pod, ...] | None:
    """The pods a borrower below its fair share takes back so its pod fits: first under its department's
    cap (from its sibling teams above their share of it), then under the pool's limits; None when it
    cannot (nothing short, or it would go beyond its own share). Victims are taken out of the use."""
    book, usage = work.book, work.usage
    entry = book.team_entry(team, pool)
    chosen: list[Pod] = []

    def take(
        short: Mapping[str, int], fair: Mapping[str, Mapping[str, int]], among: Collection[str] | None
    ) -> bool:
        use = usage.of_team(team.name, pool)
        over = reclaim.over_quota(use, {r: entry.limit(r) for r in use})
        mine = fair.get(team.name, {})
        # Only up to its own fair share: beyond it the team waits its turn.
        if any(over.get(r, 0) + request.get(r, 0) > mine.get(r, 0) for r in short):
            return False
        found = reclaim.select(
            short,
            pool=pool,
            reclaimer=team.name,
            usage=usage,
            book=book,
            exclude=work.exclude | {p.key for p in chosen},
            among=among
            if among is not None
            else work.borrowing_from_others(pool, short, but=None, dept=dept),
            floors=fair,
        )
        if found is None:
            return False
        for victim in found:
            work.take_out(victim, pool)
            chosen.append(victim)
        return True

    ok = True
    if dept is not None:
        # Siblings share what their department owns, by weight: what takes the department beyond its
        # ceiling (its quota when it may not borrow, else quota plus borrowingLimit), and under its quota
        # what the pool lacks (the rest is borrowed from outside the department).
        cap = {r: lim for r, lim in work.limits_of(dept, pool, request).items() if lim is not None}
        use = quantities.add(
            usage.of_department(dept.name, pool), work.kept(pool, request, team, within=dept.name)
        )
        must = short_of(use, request, work.department_cap(dept, pool, request))
        lacking = short_of(work.pool_use(pool, request, team), request, book.pool_limits(pool))
        short = {
            r: max(must.get(r, 0), min(a, lacking.get(r, 0)))
            for r, a in short_of(use, request, cap).items()
            if must.get(r, 0) or lacking.get(r, 0)
        }
        if short:
            members = {t.name for t in book.members(dept.name)}
            fair = reclaim.fair_shares(
                pool,
                usage=usage,
                book=book,
                waiting=[t for t in waiting if t in members],
                among=members,
                capacity=cap,
            )
            ok = take(short, fair, members) or not must
    if ok:
        short = short_of(work.pool_use(pool, request, team), request, book.pool_limits(pool))
        ok = take(short, pool_shares, None) if short else bool(chosen)
    if not ok:
        for victim in chosen:
            work.put_back(victim, pool)
        return None
    work.exclude.update(v.key for v in chosen)
    return tuple(chosen)
