"""Admission: for the pods waiting behind the `provisioner.sh/admission` gate, which may run, on which
pool, and why the others wait.

One pass (`decide`) over the gated pods, highest priority first, then the pods that are not preemptible,
then the oldest:
1. In quota: the first pool of the pod's order where its team's use plus the pod stays within the team's
   quota, and its department's teams' in-quota use within the department's (counting the team's own
   pods of lower priority as giving way: `work.AdmissionPass.preempt_within`, Event `Preempted`).
   If the pool's `limits` (or a department that may not borrow) have no room, borrowers of other teams
   are reclaimed (just enough, `provisioner.quota.reclaim`) and the pod is admitted in their place; else
   it waits.
2. Over quota, for the pods left that are labelled preemptible (`provisioner.quota.borrowing`): the
   first pool of their order where their team (and department) may borrow (`overQuota`,
   `borrowingLimit`) and the pool's limits have room, less what lenders keep (`lendingLimit`).
   Borrowers are served in turn, the team that borrows least per unit of `overQuotaWeight` first. When
   the pool is full, a borrower whose department owns the room takes it back from teams holding it on
   loan; then a team below its fair share of what is borrowed takes pods back from teams above theirs
   (never below their share), just enough.
3. The rest wait, with one reason per pool that names the quota and the numbers. A pod that no pool of
   its order could ever take (quota below its request and no borrowing) is told so: `never`.

`held`: room a half-done reclaim freed, kept for its pod (nobody else is admitted into it).

A pod whose namespace belongs to no team is admitted at once, unpinned (no team, no quota).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from provisioner.quota import borrowing, gangs
from provisioner.quota import work as work_mod
from provisioner.quota.book import QuotaBook, counted
from provisioner.quota.borrowing import Borrower
from provisioner.quota.decisions import AdmissionPlan, Admit, Hold
from provisioner.quota.usage import count
from provisioner.quota.work import NOTHING_TO_RECLAIM, PACED, RECLAIMS_PER_PASS
from provisioner.state import Snapshot
from provisioner.state.objects import Pod


def decide(
    snap: Snapshot,
    book: QuotaBook,
    *,
    gated: Sequence[Pod] | None = None,
    exclude_victims: Collection[str] = (),
    held: Mapping[str, str] | None = None,
) -> AdmissionPlan:
    """The admission decision for the gated pods of the snapshot (or `gated`). `exclude_victims`: pods
    not to reclaim (their eviction was blocked lately). `held`: waiting pod -> the pool where room freed
    by its reclaim is held for it (some of its victims are gone, others not yet): no one else is
    admitted into that room, and the pod is admitted there once the rest is free."""
    usage = count(snap, book)
    plan = AdmissionPlan(usage=usage)
    work = work_mod.AdmissionPass(book, usage, exclude_victims)
    waiting = sorted(
        gated if gated is not None else [p for p in snap.pending_pods if p.gated and not p.deleting],
        key=work_mod.order_key,
    )
    holds = {p.key: (p, held[p.key]) for p in waiting if held and p.key in held and held[p.key] in book.pools}
    for pod, pool in holds.values():
        usage.add(pod, pool=pool, team=None, department=None)  # the pool's room, no one's quota
    borrowers: list[Borrower] = []
    for pod in waiting:
        team = book.team_of(pod.namespace)
        if team is None:
            plan.admitted.append(Admit(pod=pod, pool=None))
            continue
        hold = holds.pop(pod.key, None)
        if hold is not None:
            usage.remove(pod, pool=hold[1], team=None, department=None)
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
            taint = work_mod.taint_problem(book, pod, pool)
            if taint is not None:
                reasons.append((pool, taint))
                continue
            usable.append(pool)
            ever = ever or work.could_ever(pod, team, dept, pool, request)
            problem = work.team_problem(team, pool, request) or work.department_guarantee_problem(
                dept, pool, request
            )
            preempted: tuple[Pod, ...] = ()
            if problem is not None:
                found = work.preempt_within(pod, team, dept, pool, request)
                if found is None:
                    reasons.append((pool, problem))
                    continue
                preempted = found
            full = work.department_problem(dept, pool, request) or work.pool_full(pool, request)
            victims: tuple[Pod, ...] = ()
            if full is not None:
                found = (
                    None
                    if work.reclaims >= RECLAIMS_PER_PASS
                    else work.reclaim_for(team, dept, pool, request)
                )
                if found is None:
                    work.put_back_all(preempted, pool)
                    paced = work.reclaims >= RECLAIMS_PER_PASS
                    reasons.append((pool, f"{full}; {PACED if paced else NOTHING_TO_RECLAIM}"))
                    continue
                victims = found
            if victims or preempted:
                work.reclaims += 1
            work.count_in(pod, pool, team)
            plan.admitted.append(
                Admit(pod=pod, pool=pool, team=team.name, victims=preempted + victims, preempted=preempted)
            )
            admitted = True
            break
        if admitted:
            continue
        if hold is not None:
            usage.add(pod, pool=hold[1], team=None, department=None)  # still held until its reclaim is done
        if not order:
            reasons.append(("-", "no NodePool in the pod's order"))
        borrowers.append((pod, team, dept, tuple(usable), reasons, ever))

    # Over quota: serve borrowers in turn, least borrowed per unit of weight first.
    over, remaining = borrowing.serve(work, borrowers)
    plan.admitted.extend(
        Admit(pod=pod, pool=pool, team=team.name, over_quota=True, victims=victims)
        for pod, pool, team, victims in over
    )

    for pod, team, dept, pools, reasons, ever in remaining:
        request = counted(pod.requests)
        detailed = []
        for pool, why in reasons:
            if pool in pools and NOTHING_TO_RECLAIM not in why and PACED not in why:
                blocker = work.may_borrow(pod, team, dept, pool, request) or work.pool_full(
                    pool, request, team
                )
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
        plan,
        waiting,
        redo=lambda rest: decide(snap, book, gated=rest, exclude_victims=exclude_victims, held=held),
    )
