"""Admission: for the pods waiting behind the `provisioner.sh/admission` gate, which may run, on which
pool, and why the others wait.

One pass (`decide`) over the gated pods, highest priority first, then the pods that are not preemptible,
then the oldest:
1. In quota: the first pool of the pod's order where its team's and its department's use plus the pod
   stay within quota. If the pool's `limits` have no room, borrowers of other teams are reclaimed (just
   enough, `provisioner.quota.reclaim`) and the pod is admitted in their place; else it waits.
2. Over quota, for the pods left that are labelled preemptible: the first pool of their order where
   their team (and department, when it would go over too) may borrow and the pool's limits have room.
   Borrowers are served in turn, the team that borrows least per unit of `overQuotaWeight` first, so
   idle capacity is shared by weight. When the pool is full, a team below its fair share of what is
   borrowed there takes pods back from teams above theirs (never below their share), just enough.
3. The rest wait, with one reason per pool that names the quota and the numbers. A pod that no pool of
   its order could ever take (quota below its request and no borrowing) is told so: `never`.

A pod whose namespace belongs to no team is admitted at once, unpinned (no team, no quota).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from provisioner.api import quantities
from provisioner.api.team import Department, Team
from provisioner.quota import gangs, reclaim
from provisioner.quota.book import QuotaBook, counted
from provisioner.quota.usage import Usage, count
from provisioner.state import Snapshot
from provisioner.state.objects import Pod, TaintValue, tolerates_all

RECLAIMS_PER_PASS = 32
"""In-quota pods admitted by reclaiming in one pass at most: evictions go out in measured steps (each
takes a grace period anyway), and a pass over thousands of borrowers stays short. The rest are next."""
NOTHING_TO_RECLAIM = "nothing borrowed there to reclaim"
PACED = f"a reclaim is due: reclaims are paced ({RECLAIMS_PER_PASS} pods a pass), this pod is next"


@dataclass(frozen=True, slots=True)
class Admit:
    """A pod to admit: pinned to `pool` (None: a pod of no team, only the gate is lifted)."""

    pod: Pod
    pool: str | None
    team: str | None = None
    over_quota: bool = False
    victims: tuple[Pod, ...] = ()
    """Borrowed pods to evict first; the pod is admitted only once they are gone."""

    @property
    def message(self) -> str:
        if self.pool is None:
            return "admitted: its namespace belongs to no team (no quota applies)"
        how = "over quota (borrowed, may be reclaimed)" if self.over_quota else "within quota"
        text = f"admitted on {self.pool} {how} of team {self.team}"
        if self.victims:
            text += f", reclaiming {len(self.victims)} borrowed pod{'s' if len(self.victims) != 1 else ''}"
        return text


@dataclass(frozen=True, slots=True)
class Hold:
    """A pod that stays gated, with why (one reason per pool of its order)."""

    pod: Pod
    team: str
    reasons: tuple[tuple[str, str], ...]
    never: bool = False
    """No pool of its order could ever take it as the quotas stand: raise a quota or change the pod."""
    first_pool: str | None = None

    @property
    def head(self) -> str:
        return "can never be admitted as quotas stand" if self.never else "waiting for quota"

    @property
    def message(self) -> str:
        return f"{self.head}: " + "; ".join(f"{pool}: {why}" for pool, why in self.reasons)


@dataclass
class Plan:
    admitted: list[Admit] = field(default_factory=list)
    held: list[Hold] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Use after this pass (the admitted pods counted, the victims not)."""


def _fmt(resource: str, amount: int) -> str:
    return quantities.format_quantity(resource, amount)


def _order_key(pod: Pod) -> tuple[int, bool, float, str]:
    """Highest priority first; then pods that are not preemptible, so a team's guaranteed work is not
    kept out of its own quota by its borrowers; then the oldest."""
    created: datetime | None = pod.created
    return (-pod.priority, pod.preemptible, created.timestamp() if created is not None else 0.0, pod.key)


def _quota_problem(
    who: str,
    pool: str,
    use: Mapping[str, int],
    request: Mapping[str, int],
    limit_of: Mapping[str, int | None],
) -> str | None:
    for resource, amount in sorted(request.items()):
        limit = limit_of.get(resource)
        if limit is not None and use.get(resource, 0) + amount > limit:
            return (
                f"{who}: {resource} on {pool} {_fmt(resource, use.get(resource, 0))} of "
                f"{_fmt(resource, limit)} in use, the pod asks {_fmt(resource, amount)}"
            )
    return None


def _short(use: Mapping[str, int], request: Mapping[str, int], limits: Mapping[str, int]) -> dict[str, int]:
    """Per limited resource, how much the pool lacks for the request (empty: it fits)."""
    return {
        r: use.get(r, 0) + a - limits[r]
        for r, a in request.items()
        if r in limits and use.get(r, 0) + a > limits[r]
    }


class _Pass:
    def __init__(self, book: QuotaBook, usage: Usage, exclude: Collection[str]) -> None:
        self.book = book
        self.usage = usage
        self.exclude = set(exclude)
        self._no_victims: dict[tuple[str, str, str], list[dict[str, int]]] = {}
        self.reclaims = 0
        """Pods admitted by reclaiming in this pass."""

    def limits_of(
        self, entry_owner: Team | Department, pool: str, request: Mapping[str, int]
    ) -> dict[str, int | None]:
        entry = (
            self.book.team_entry(entry_owner, pool)
            if isinstance(entry_owner, Team)
            else self.book.department_entry(entry_owner, pool)
        )
        return {r: entry.limit(r) for r in request}

    def team_problem(self, team: Team, pool: str, request: Mapping[str, int]) -> str | None:
        """Why the pod is beyond its team's quota on the pool (None: within)."""
        return _quota_problem(
            f"team {team.name}",
            pool,
            self.usage.of_team(team.name, pool),
            request,
            self.limits_of(team, pool, request),
        )

    def department_problem(
        self, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> str | None:
        if dept is None:
            return None
        return _quota_problem(
            f"department {dept.name}",
            pool,
            self.usage.of_department(dept.name, pool),
            request,
            self.limits_of(dept, pool, request),
        )

    def reclaim_for(
        self, team: Team, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> tuple[Pod, ...] | None:
        """Borrowers to evict so an in-quota pod fits its department's quota (from sibling teams) and
        then the pool's limits (from any team); None when they cannot free enough. On success the
        victims are already taken out of the use."""
        chosen: list[Pod] = []

        def take(short: Mapping[str, int], among: Collection[str] | None, scope: str) -> bool:
            if not short:
                return True
            # What borrowers hold only shrinks while in-quota pods are admitted (they stay within
            # quota): a shortfall no smaller than one that found too few victims finds too few too.
            failed = self._no_victims.setdefault((pool, team.name, scope), [])
            if any(all(short.get(r, 0) >= a for r, a in f.items()) for f in failed):
                return False
            found = reclaim.select(
                short,
                pool=pool,
                reclaimer=team.name,
                usage=self.usage,
                book=self.book,
                exclude=self.exclude | {p.key for p in chosen} if chosen else self.exclude,
                among=among,
            )
            if found is None:
                failed.append(dict(short))
                return False
            for victim in found:
                self.take_out(victim, pool)
                chosen.append(victim)
            return True

        ok = True
        if dept is not None:
            limits = {r: lim for r, lim in self.limits_of(dept, pool, request).items() if lim is not None}
            members = {t.name for t in self.book.teams.values() if t.spec.department == dept.name}
            ok = take(
                _short(self.usage.of_department(dept.name, pool), request, limits), members, "department"
            )
        if ok:
            ok = take(_short(self.usage.of_pool(pool), request, self.book.pool_limits(pool)), None, "pool")
        if not ok:
            for victim in chosen:
                self.put_back(victim, pool)
            return None
        self.exclude.update(p.key for p in chosen)
        return tuple(chosen)

    def _owner(self, pod: Pod) -> tuple[str | None, str | None]:
        team = self.book.team_of(pod.namespace)
        return (team.name, team.spec.department) if team is not None else (None, None)

    def count_in(self, pod: Pod, pool: str, team: Team) -> None:
        """A pod admitted in this pass holds its share from now on, and is never a victim of the same
        pass (it would be evicted before it ran)."""
        self.usage.add(pod, pool=pool, team=team.name, department=team.spec.department)
        self.exclude.add(pod.key)

    def take_out(self, pod: Pod, pool: str) -> None:
        """A victim's use leaves the count (its capacity goes to the pod reclaiming it)."""
        team, department = self._owner(pod)
        self.usage.remove(pod, pool=pool, team=team, department=department)

    def put_back(self, pod: Pod, pool: str) -> None:
        team, department = self._owner(pod)
        self.usage.add(pod, pool=pool, team=team, department=department)

    def may_borrow(
        self, pod: Pod, team: Team, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> str | None:
        """Why the pod may not run over quota on the pool (None: it may, room permitting)."""
        if not self.book.team_entry(team, pool).over_quota:
            return "over-quota not allowed"
        if dept is not None and not self.book.department_entry(dept, pool).over_quota:
            dept_problem = _quota_problem(
                f"department {dept.name}",
                pool,
                self.usage.of_department(dept.name, pool),
                request,
                self.limits_of(dept, pool, request),
            )
            if dept_problem is not None:
                return f"{dept_problem}, over-quota not allowed for the department"
        if not pod.preemptible:
            return 'not preemptible, so it may not borrow: raise the quota, or label it provisioner.sh/preemptible: "true"'
        return None

    def pool_full(self, pool: str, request: Mapping[str, int]) -> str | None:
        limits = self.book.pool_limits(pool)
        short = _short(self.usage.of_pool(pool), request, limits)
        if not short:
            return None
        r = sorted(short)[0]
        return (
            f"pool {pool} limits: {r} {_fmt(r, self.usage.of_pool(pool).get(r, 0))} of {_fmt(r, limits[r])} "
            f"in use, the pod asks {_fmt(r, request[r])}"
        )

    def could_ever(
        self, pod: Pod, team: Team, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> bool:
        """Whether the pod could run on the pool some day, with every other pod gone."""
        limits = self.book.pool_limits(pool)
        if any(a > limits[r] for r, a in request.items() if r in limits):
            return False
        fits_quota = all(
            (lim := lim_of.get(r)) is None or a <= lim
            for lim_of in (
                self.limits_of(team, pool, request),
                self.limits_of(dept, pool, request) if dept is not None else {},
            )
            for r, a in request.items()
        )
        if fits_quota:
            return True
        empty = _Pass(self.book, Usage(), ())
        return empty.may_borrow(pod, team, dept, pool, request) is None


def _taint_problem(book: QuotaBook, pod: Pod, pool: str) -> str | None:
    found = book.pools[pool]
    taints = found.spec.template.spec.taints
    blocking = tolerates_all(
        pod.tolerations, [TaintValue(key=t.key, effect=t.effect.value, value=t.value) for t in taints]
    )
    if blocking is not None:
        return f"the pod does not tolerate the pool's taint {blocking.key}={blocking.value or ''}:{blocking.effect}"
    return None


Borrower = tuple[Pod, Team, Department | None, tuple[str, ...], list[tuple[str, str]], bool]
"""(pod, team, department, pools it may use in order, reasons so far, whether it could ever run)."""


FAIR_RECLAIMS_PER_PASS = 8
"""Pods admitted by a fair-share reclaim in one pass at most: shares converge over a few passes, without
a burst of evictions, and a pass stays cheap (each such reclaim looks at every waiting borrower)."""


def _borrow(work: _Pass, borrowers: Sequence[Borrower], plan: Plan) -> list[Borrower]:
    """Admit borrowers over quota in turn; the ones left, in their order. Each team's candidates queue in
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
                and work.pool_full(pool, request) is None
            ):
                return pool
        return None

    def share(team: Team, pool: str) -> float:
        entry = book.team_entry(team, pool)
        use = usage.of_team(team.name, pool)
        over = reclaim.over_quota(use, {r: entry.limit(r) for r in use})
        return reclaim.borrowed_share(over, book.pool_limits(pool), entry.weight)

    fair_reclaims = 0
    while left:
        queues: dict[str, deque[Borrower]] = {}
        for candidate in left:
            queues.setdefault(candidate[1].name, deque()).append(candidate)
        set_aside: list[Borrower] = []
        while True:
            best: tuple[tuple[float, int, bool, float, str], str, str] | None = None
            for name, queue in queues.items():
                while queue:
                    pool = feasible(queue[0])
                    if pool is not None:
                        key = (share(queue[0][1], pool), *_order_key(queue[0][0]))
                        if best is None or key < best[0]:
                            best = (key, name, pool)
                        break
                    set_aside.append(queue.popleft())
            if best is None:
                break
            _, name, pool = best
            pod, team, _dept, _pools, _reasons, _ever = queues[name].popleft()
            work.count_in(pod, pool, team)
            plan.admitted.append(Admit(pod=pod, pool=pool, team=team.name, over_quota=True))
        left = sorted(set_aside, key=lambda b: index[id(b)])
        fair = _fair_reclaim(work, left) if fair_reclaims < FAIR_RECLAIMS_PER_PASS else None
        if fair is None:
            break
        fair_reclaims += 1
        i, pool, taken = fair
        pod, team, _dept, _pools, _reasons, _ever = left.pop(i)
        work.count_in(pod, pool, team)
        plan.admitted.append(Admit(pod=pod, pool=pool, team=team.name, over_quota=True, victims=taken))
    return left


def _fair_reclaim(work: _Pass, remaining: Sequence[Borrower]) -> tuple[int, str, tuple[Pod, ...]] | None:
    """When no borrower fits in the room left: the first (least borrowed per weight, then by order) whose
    team is below its fair share on a full pool, with the pods to take from teams above theirs."""
    book, usage = work.book, work.usage
    waiting: dict[str, set[str]] = {}
    for pod, team, dept, pools, _, _ in remaining:
        for pool in pools:
            if work.may_borrow(pod, team, dept, pool, counted(pod.requests)) is None:
                waiting.setdefault(pool, set()).add(team.name)
    shares = {
        pool: reclaim.fair_shares(pool, usage=usage, book=book, waiting=teams)
        for pool, teams in waiting.items()
    }
    tried: set[tuple[str, str, tuple[tuple[str, int], ...]]] = set()
    order = sorted(range(len(remaining)), key=lambda i: _order_key(remaining[i][0]))
    for i in order:
        pod, team, dept, pools, _, _ = remaining[i]
        request = counted(pod.requests)
        for pool in pools:
            fair = shares.get(pool, {})
            if team.name not in fair or work.may_borrow(pod, team, dept, pool, request) is not None:
                continue
            signature = (team.name, pool, tuple(sorted(request.items())))
            if signature in tried:
                continue
            tried.add(signature)
            entry = book.team_entry(team, pool)
            use = usage.of_team(team.name, pool)
            over = reclaim.over_quota(use, {r: entry.limit(r) for r in use})
            mine = fair[team.name]
            short = _short(usage.of_pool(pool), request, book.pool_limits(pool))
            # Only up to its own fair share: beyond it the team waits its turn.
            if any(over.get(r, 0) + request.get(r, 0) > mine.get(r, 0) for r in short):
                continue
            victims = reclaim.select(
                short,
                pool=pool,
                reclaimer=team.name,
                usage=usage,
                book=book,
                exclude=work.exclude,
                floors=fair,
            )
            if victims is None:
                continue
            for victim in victims:
                work.take_out(victim, pool)
            work.exclude.update(v.key for v in victims)
            return i, pool, victims
    return None


def decide(
    snap: Snapshot,
    book: QuotaBook,
    *,
    gated: Sequence[Pod] | None = None,
    exclude_victims: Collection[str] = (),
) -> Plan:
    """The admission decision for the gated pods of the snapshot (or `gated`). `exclude_victims`: pods
    not to reclaim (their eviction was blocked lately)."""
    usage = count(snap, book)
    plan = Plan(usage=usage)
    work = _Pass(book, usage, exclude_victims)
    waiting = sorted(
        gated if gated is not None else [p for p in snap.pending_pods if p.gated and not p.deleting],
        key=_order_key,
    )
    borrowers: list[Borrower] = []
    for pod in waiting:
        team = book.team_of(pod.namespace)
        if team is None:
            plan.admitted.append(Admit(pod=pod, pool=None))
            continue
        dept = book.department_of(team)
        request = counted(pod.requests)
        reasons: list[tuple[str, str]] = []
        order = book.pool_order(pod, team)
        usable: list[str] = []
        ever = False
        admitted = False
        for pool in order:
            if pool not in book.pools:
                reasons.append((pool, f"no NodePool named {pool}"))
                continue
            taint = _taint_problem(book, pod, pool)
            if taint is not None:
                reasons.append((pool, taint))
                continue
            usable.append(pool)
            ever = ever or work.could_ever(pod, team, dept, pool, request)
            problem = work.team_problem(team, pool, request)
            if problem is not None:
                reasons.append((pool, problem))
                continue
            full = work.department_problem(dept, pool, request) or work.pool_full(pool, request)
            victims: tuple[Pod, ...] = ()
            if full is not None:
                if work.reclaims >= RECLAIMS_PER_PASS:
                    reasons.append((pool, f"{full}; {PACED}"))
                    continue
                found = work.reclaim_for(team, dept, pool, request)
                if found is None:
                    reasons.append((pool, f"{full}; {NOTHING_TO_RECLAIM}"))
                    continue
                victims = found
                work.reclaims += 1
            work.count_in(pod, pool, team)
            plan.admitted.append(Admit(pod=pod, pool=pool, team=team.name, victims=victims))
            admitted = True
            break
        if admitted:
            continue
        if not order:
            reasons.append(("-", "no NodePool in the pod's order"))
        borrowers.append((pod, team, dept, tuple(usable), reasons, ever))

    # Over quota: serve borrowers in turn, least borrowed per unit of weight first.
    remaining = _borrow(work, borrowers, plan)

    for pod, team, dept, pools, reasons, ever in remaining:
        request = counted(pod.requests)
        detailed = []
        for pool, why in reasons:
            if pool in pools and NOTHING_TO_RECLAIM not in why and PACED not in why:
                blocker = work.may_borrow(pod, team, dept, pool, request) or work.pool_full(pool, request)
                if blocker is None:
                    blocker = "waiting for its turn to borrow (shared by overQuotaWeight)"
                why = f"{why}; {blocker}"
            detailed.append((pool, why))
        plan.held.append(
            Hold(
                pod=pod,
                team=team.name,
                reasons=tuple(detailed),
                never=not ever,
                first_pool=pools[0] if pools else None,
            )
        )
    # A gang is admitted whole or not at all: a pass admitting part of one is made again without it.
    return gangs.whole(
        plan, waiting, redo=lambda rest: decide(snap, book, gated=rest, exclude_victims=exclude_victims)
    )
