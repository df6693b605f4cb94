"""One admission pass's running count and its checks: what a team, a department and a pool hold as pods
are admitted and victims taken out, why a pod is beyond a quota or a pool's limits, whether it may borrow,
and the victims of a reclaim for a pod within its team's quota (`provisioner.quota.reclaim` picks them).
`provisioner.quota.admission` drives a pass; `provisioner.quota.borrowing` serves the borrowers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from provisioner.api import quantities
from provisioner.api.team import Department, Team
from provisioner.quota import reclaim
from provisioner.quota.book import QuotaBook
from provisioner.quota.usage import Usage
from provisioner.state.objects import Pod, TaintValue, tolerates_all

RECLAIMS_PER_PASS = 32
"""In-quota pods admitted by reclaiming in one pass at most: evictions go out in measured steps (each
takes a grace period anyway), and a pass over thousands of borrowers stays short. The rest are next."""
NOTHING_TO_RECLAIM = "nothing borrowed there to reclaim"
PACED = f"a reclaim is due: reclaims are paced ({RECLAIMS_PER_PASS} pods a pass), this pod is next"


def fmt(resource: str, amount: int) -> str:
    return quantities.format_quantity(resource, amount)


def order_key(pod: Pod) -> tuple[int, bool, float, str]:
    """Highest priority first; then pods that are not preemptible, so a team's guaranteed work is not
    kept out of its own quota by its borrowers; then the oldest."""
    created: datetime | None = pod.created
    return (-pod.priority, pod.preemptible, created.timestamp() if created is not None else 0.0, pod.key)


def quota_problem(
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
                f"{who}: {resource} on {pool} {fmt(resource, use.get(resource, 0))} of "
                f"{fmt(resource, limit)} in use, the pod asks {fmt(resource, amount)}"
            )
    return None


def short_of(use: Mapping[str, int], request: Mapping[str, int], limits: Mapping[str, int]) -> dict[str, int]:
    """Per limited resource, how much the pool lacks for the request (empty: it fits)."""
    return {
        r: use.get(r, 0) + a - limits[r]
        for r, a in request.items()
        if r in limits and use.get(r, 0) + a > limits[r]
    }


class AdmissionPass:
    """One admission pass's running count: the book, the use as pods are admitted and victims taken out,
    the pods no reclaim may take (`exclude`), and the reclaims made."""

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
        return quota_problem(
            f"team {team.name}",
            pool,
            self.usage.of_team(team.name, pool),
            request,
            self.limits_of(team, pool, request),
        )

    def department_problem(
        self, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> str | None:
        """Why the pod would take its department beyond what it may use on the pool (None: it would not).
        A department that may borrow is bounded by the pool's limits only."""
        if dept is None:
            return None
        return quota_problem(
            f"department {dept.name}",
            pool,
            self.usage.of_department(dept.name, pool),
            request,
            self.department_cap(dept, pool, request, owner=True),
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
            # Only a cap the department may not go beyond: a department that may borrow holds more than
            # its quota on loan, and taking that back frees nothing the pool lacks.
            limits = self.department_cap(dept, pool, request, owner=True)
            members = {t.name for t in self.book.members(dept.name)}
            ok = take(
                short_of(self.usage.of_department(dept.name, pool), request, limits), members, "department"
            )
        if ok:
            ok = take(short_of(self.usage.of_pool(pool), request, self.book.pool_limits(pool)), None, "pool")
        if not ok:
            for victim in chosen:
                self.put_back(victim, pool)
            return None
        self.exclude.update(p.key for p in chosen)
        return tuple(chosen)

    def _yielding(self, pod: Pod, team: Team, pool: str) -> list[Pod]:
        """The team's pods on the pool that give way to `pod` (none when the team opted out)."""
        policy = team.spec.preemption.within_team
        if policy == "Never":
            return []
        newer_equal = policy == "LowerOrNewerEqualPriority"
        return [
            p
            for p in self.usage.pods.get((team.name, pool), ())
            if not p.deleting
            and p.key not in self.exclude
            and reclaim.yields_to(p, pod, newer_equal=newer_equal)
        ]

    def preempt_within(
        self, pod: Pod, team: Team, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> tuple[Pod, ...] | None:
        """For a pod beyond its team's quota (or its department's guarantee): the team's own pods that
        give way to it (`reclaim.yields_to`) to evict now, taken out of the use (maybe none), or None (it
        stays beyond them even so, the team opted out, or reclaims are paced). Its preemptible pods that
        give way may stay on as what the team borrows; the rest must go as far as they are in the way:
        pods that are not preemptible beyond the quota, anything beyond the team's ceiling (quota when it
        may not borrow, quota plus `borrowingLimit`) or the department's guarantee; and of the team's
        excess over quota, what the pool (or the department's cap) lacks. Lowest priority first, just
        enough; the rest of a shortfall is reclaimed from other teams' borrowers as for any pod."""
        yielding = self._yielding(pod, team, pool)
        if not yielding:
            return None
        quota = {r: lim for r, lim in self.limits_of(team, pool, request).items() if lim is not None}
        use = self.usage.of_team(team.name, pool)
        soft = [p for p in yielding if p.preemptible]
        standing: Mapping[str, int] = use
        for p in soft:
            standing = quantities.subtract(standing, self.usage.request_of(p))
        # Only pods that are not preemptible free room in the quota and the department's guarantee:
        # the preemptible ones giving way are counted out of both already.
        hard = dict(short_of(standing, request, quota))
        for r, a in self.department_guarantee_short(dept, pool, request, own=(team.name, standing)).items():
            hard[r] = max(hard.get(r, 0), a)
        entry = self.book.team_entry(team, pool)
        must = dict(short_of(use, request, {r: c for r in request if (c := entry.ceiling(r)) is not None}))
        lacking = dict(short_of(self.usage.of_pool(pool), request, self.book.pool_limits(pool)))
        if dept is not None:
            cap = self.department_cap(dept, pool, request, owner=True)
            for r, a in short_of(self.usage.of_department(dept.name, pool), request, cap).items():
                lacking[r] = max(lacking.get(r, 0), a)
        excess = short_of(use, request, quota)
        need = {
            r: max(must.get(r, 0), min(excess.get(r, 0), lacking.get(r, 0)))
            for r in set(must) | set(excess)
            if must.get(r, 0) or (excess.get(r, 0) and lacking.get(r, 0))
        }
        if not hard and not need:
            return ()
        if self.reclaims >= RECLAIMS_PER_PASS:
            return None
        found: tuple[Pod, ...] = ()
        if hard:
            firm = [p for p in yielding if not p.preemptible]
            taken = reclaim.within_team(hard, pod, candidates=firm, usage=self.usage)
            if taken is None:
                return None
            found = taken
            for victim in found:
                need = {r: a - self.usage.request_of(victim).get(r, 0) for r, a in need.items()}
                must = {r: a - self.usage.request_of(victim).get(r, 0) for r, a in must.items()}
        need = {r: a for r, a in need.items() if a > 0}
        if need:
            rest = [p for p in yielding if p not in found]
            more = reclaim.within_team(
                need, pod, candidates=rest, usage=self.usage, partial={r: a for r, a in must.items() if a > 0}
            )
            if more is None:
                return None
            found += more
        for victim in found:
            self.take_out(victim, pool)
        self.exclude.update(v.key for v in found)
        return found

    def borrowing_from_others(
        self, pool: str, short: Mapping[str, int], *, but: str | None, dept: Department | None = None
    ) -> set[str]:
        """The teams whose pods on the pool are on loan from outside their department (a team of no
        department, or one whose department holds more than its quota of a `short` resource there):
        the teams a reclaim at the pool's level may take from. Not those of department `but`; the
        teams of `dept` (the reclaimer's own) always, as siblings share what their department holds."""
        out: set[str] = set()
        for team in self.book.teams.values():
            name = team.spec.department
            if name is not None and name == but:
                continue
            if name is None or (dept is not None and name == dept.name):
                out.add(team.name)
                continue
            found = self.book.departments.get(name)
            if found is None:
                out.add(team.name)
                continue
            entry = self.book.department_entry(found, pool)
            use = self.usage.of_department(name, pool)
            if any((lim := entry.limit(r)) is None or use.get(r, 0) > lim for r in short):
                out.add(team.name)
        return out

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

    def put_back_all(self, pods: Collection[Pod], pool: str) -> None:
        """Victims chosen for a pod that is not admitted after all: back in the count, free to choose."""
        for pod in pods:
            self.put_back(pod, pool)
        self.exclude.difference_update(p.key for p in pods)

    def department_guarantee_short(
        self,
        dept: Department | None,
        pool: str,
        request: Mapping[str, int],
        *,
        own: tuple[str, Mapping[str, int]] | None = None,
    ) -> dict[str, int]:
        """How far a pod within its team's quota is beyond what its department guarantees on the pool:
        what its teams use within their own quotas, plus the pod, above the department's quota (the teams
        are promised more than it holds). Borrowed pods do not count: they give way (a reclaim). `own`:
        (its team, that team's use as the pod sees it: less its pods that give way to it)."""
        if dept is None:
            return {}
        limits = {r: lim for r, lim in self.limits_of(dept, pool, request).items() if lim is not None}
        if not limits:
            return {}
        return short_of(self._in_quota(dept, pool, request, own), request, limits)

    def _in_quota(
        self,
        dept: Department,
        pool: str,
        request: Mapping[str, int],
        own: tuple[str, Mapping[str, int]] | None = None,
    ) -> dict[str, int]:
        in_quota: dict[str, int] = {}
        for team in self.book.members(dept.name):
            entry = self.book.team_entry(team, pool)
            use = own[1] if own is not None and own[0] == team.name else self.usage.of_team(team.name, pool)
            for r in request:
                lim = entry.limit(r)
                in_quota[r] = in_quota.get(r, 0) + (use.get(r, 0) if lim is None else min(use.get(r, 0), lim))
        return in_quota

    def department_guarantee_problem(
        self, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> str | None:
        """`department_guarantee_short` in words (None: within it)."""
        if dept is None or not self.department_guarantee_short(dept, pool, request):
            return None
        limits = self.limits_of(dept, pool, request)
        problem = quota_problem(
            f"department {dept.name}", pool, self._in_quota(dept, pool, request), request, limits
        )
        return None if problem is None else problem.replace(" in use,", " in use within quotas,", 1)

    def put_back(self, pod: Pod, pool: str) -> None:
        team, department = self._owner(pod)
        self.usage.add(pod, pool=pool, team=team, department=department)

    def may_ever_borrow(self, pod: Pod, team: Team, pool: str) -> str | None:
        """Why the pod may never run over quota on the pool, whatever others use (None: it may)."""
        if not self.book.team_entry(team, pool).over_quota:
            return "over-quota not allowed"
        if not pod.preemptible:
            return 'not preemptible, so it may not borrow: raise the quota, or label it provisioner.sh/preemptible: "true"'
        return None

    def department_cap(
        self, dept: Department, pool: str, request: Mapping[str, int], *, owner: bool = False
    ) -> dict[str, int]:
        """What the department's teams may use of each requested resource on the pool: its quota when the
        department may not borrow there, its quota plus its `borrowingLimit` where it sets one; else
        unbounded (absent), except, for a pod within its team's quota (`owner`), on a resource the pool's
        limits do not bound: there the department's quota is the only promise its teams share, and a
        sibling beyond it gives way."""
        entry = self.book.department_entry(dept, pool)
        caps = {r: c for r in request if (c := entry.ceiling(r)) is not None}
        if owner and entry.over_quota:
            pool_limits = self.book.pool_limits(pool)
            for r in request:
                if (lim := entry.limit(r)) is not None and r not in pool_limits:
                    caps[r] = lim
        return caps

    def kept(
        self, pool: str, request: Mapping[str, int], borrower: Team, *, within: str | None = None
    ) -> dict[str, int]:
        """What others keep free of their quota on the pool (`lendingLimit`), which `borrower` may not
        borrow: every other team's (only department `within`'s teams, for its cap), and, at the pool's
        level, every other department's beyond what its own teams keep."""
        among = None if within is None else {t.name for t in self.book.members(within)}
        return reclaim.kept_back(
            pool, usage=self.usage, book=self.book, among=among, resources=request, borrower=borrower
        )

    def may_borrow(
        self, pod: Pod, team: Team, dept: Department | None, pool: str, request: Mapping[str, int]
    ) -> str | None:
        """Why the pod may not run over quota on the pool now (None: it may, pool room permitting)."""
        never = self.may_ever_borrow(pod, team, pool)
        if never is not None:
            return never
        entry = self.book.team_entry(team, pool)
        ceiling = {r: c for r in request if (c := entry.ceiling(r)) is not None}
        team_problem = quota_problem(
            f"team {team.name}", pool, self.usage.of_team(team.name, pool), request, ceiling
        )
        if team_problem is not None:
            return f"{team_problem}, beyond the team's quota plus borrowingLimit"
        if dept is not None:
            cap = self.department_cap(dept, pool, request)
            use = quantities.add(
                self.usage.of_department(dept.name, pool), self.kept(pool, request, team, within=dept.name)
            )
            dept_problem = quota_problem(f"department {dept.name}", pool, use, request, cap)
            if dept_problem is not None:
                if self.book.department_entry(dept, pool).over_quota:
                    return f"{dept_problem}, beyond the department's quota plus borrowingLimit"
                return f"{dept_problem}, over-quota not allowed for the department"
        return None

    def pool_use(
        self, pool: str, request: Mapping[str, int], borrower: Team | None = None
    ) -> Mapping[str, int]:
        """The pool's use as a pod sees it: for a `borrower`, what others keep free of their quota counts
        as used (`lendingLimit`)."""
        use = self.usage.of_pool(pool)
        if borrower is None or not self.book.pool_limits(pool):
            return use
        kept = self.kept(pool, request, borrower)
        return quantities.add(use, kept) if kept else use

    def pool_full(self, pool: str, request: Mapping[str, int], borrower: Team | None = None) -> str | None:
        limits = self.book.pool_limits(pool)
        use = self.pool_use(pool, request, borrower)
        short = short_of(use, request, limits)
        if not short:
            return None
        r = sorted(short)[0]
        kept = use.get(r, 0) - self.usage.of_pool(pool).get(r, 0)
        return (
            f"pool {pool} limits: {r} {fmt(r, self.usage.of_pool(pool).get(r, 0))} of {fmt(r, limits[r])} "
            f"in use{f' and {fmt(r, kept)} kept by its lenders (lendingLimit)' if kept else ''}, "
            f"the pod asks {fmt(r, request[r])}"
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
        empty = AdmissionPass(self.book, Usage(), ())
        return empty.may_borrow(pod, team, dept, pool, request) is None


def taint_problem(book: QuotaBook, pod: Pod, pool: str) -> str | None:
    found = book.pools[pool]
    taints = found.spec.template.spec.taints
    blocking = tolerates_all(
        pod.tolerations, [TaintValue(key=t.key, effect=t.effect.value, value=t.value) for t in taints]
    )
    if blocking is not None:
        return f"the pod does not tolerate the pool's taint {blocking.key}={blocking.value or ''}:{blocking.effect}"
    return None
