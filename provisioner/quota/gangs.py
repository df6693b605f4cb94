"""Gangs in admission: a gang's pods are admitted together or not at all, so no team holds part of a
gang (quota spent on members that cannot run without the rest).

`whole` takes an admission pass's plan: when some member of a gang (`scheduling.gangs.membership`) is
held, the pass is made again without that gang (so the quota its admitted members took goes to the pods
after them, and no borrowed pod is reclaimed for them), and every member of it is held: those quota
held with their own reasons, the others with one naming the gang and how many of its members wait. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from provisioner.quota.decisions import AdmissionPlan, Hold
from provisioner.scheduling.gangs import membership
from provisioner.state.objects import Pod


def _gang(pod: Pod) -> str | None:
    m = membership(pod)
    return m[0] if m is not None else None


def whole(
    plan: AdmissionPlan, waiting: Sequence[Pod], *, redo: Callable[[list[Pod]], AdmissionPlan]
) -> AdmissionPlan:
    """The plan, or (when a gang is admitted in part) the plan made again without the gangs cut."""
    waits: dict[str, int] = {}
    for h in plan.held:
        g = _gang(h.pod)
        if g is not None:
            waits[g] = waits.get(g, 0) + 1
    cut = {g for g in waits if any(_gang(a.pod) == g for a in plan.admitted)}
    if not cut:
        return plan
    again = redo([p for p in waiting if _gang(p) not in cut])
    held: dict[str, Hold] = {h.pod.key: h for h in plan.held}
    for a in plan.admitted:
        g = _gang(a.pod)
        if g in cut and a.team is not None:
            why = f"gang {g}: {waits[g]} of its members wait for quota, and a gang is admitted whole or not at all"
            held[a.pod.key] = Hold(pod=a.pod, team=a.team, reasons=((a.pool or "-", why),), first_pool=a.pool)
    again.held.extend(h for key, h in held.items() if _gang(h.pod) in cut)
    return again
