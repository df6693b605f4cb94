"""What an admission pass decides (`quota.admission.decide`): the pods to admit (`Admit`, with the pods to
evict first), the pods held with one reason per pool (`Hold`), and the whole pass (`AdmissionPlan`).
Values only, below the modules that make and read them (admission, gangs, status). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.quota.usage import Usage
from provisioner.state.objects import Pod


@dataclass(frozen=True, slots=True)
class Admit:
    """A pod to admit: pinned to `pool` (None: a pod of no team, only the gate is lifted)."""

    pod: Pod
    pool: str | None
    team: str | None = None
    over_quota: bool = False
    victims: tuple[Pod, ...] = ()
    """Pods to evict first (borrowed pods of others, and `preempted`); the pod is admitted only once
    they are gone."""
    preempted: tuple[Pod, ...] = ()
    """The part of `victims` that are its own team's pods of lower priority (`Team.spec.preemption`)."""

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
class AdmissionPlan:
    """What one admission pass decided: the pods to admit, the pods held and why, and the use after it."""

    admitted: list[Admit] = field(default_factory=list)
    held: list[Hold] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Use after this pass (the admitted pods counted, the victims not)."""
