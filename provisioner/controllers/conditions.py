"""Condition bookkeeping on status dicts, as every controller writes it: set one condition (its
transition time moves only when its status changes), derive a NodeClaim's root `Ready` condition from its
lifecycle steps (as Karpenter does), and read one back from a NodeClaim."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim
from provisioner.api.common import Condition, ConditionStatus
from provisioner.api.nodeclaim import READY
from provisioner.clock import isoformat


def set_condition(
    conditions: Iterable[Condition],
    type_: str,
    status: bool | None,
    *,
    reason: str,
    message: str = "",
    now: datetime,
) -> list[dict[str, Any]]:
    """The conditions with `type_` set, as JSON for a status patch; the transition time moves only when
    the status changes."""
    text = (
        ConditionStatus.UNKNOWN
        if status is None
        else ConditionStatus.TRUE
        if status
        else ConditionStatus.FALSE
    )
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        d = c.model_dump(by_alias=True, exclude_none=True, mode="json")
        if c.type == type_:
            found = True
            if c.status != text:
                d["lastTransitionTime"] = isoformat(now)
            d.update(status=text.value, reason=reason, message=message)
        out.append(d)
    if not found:
        out.append(
            {
                "type": type_,
                "status": text.value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": isoformat(now),
            }
        )
    return out


def with_ready(
    conditions: list[dict[str, Any]], steps: Sequence[str], *, now: datetime
) -> list[dict[str, Any]]:
    """The conditions (JSON, as `set_condition` returns them) with the root `Ready` set from `steps`:
    True when every step is True, False when one is False, Unknown otherwise; reason and message are
    those of the first step not True (what `kubectl get nodeclaims` shows in its Ready column)."""
    by_type = {c["type"]: c for c in conditions}
    blocking = next(
        (by_type.get(s) or {"type": s} for s in steps if by_type.get(s, {}).get("status") != "True"), None
    )
    if blocking is None:
        status: bool | None = True
        reason, message = "Ready", ""
    else:
        status = False if blocking.get("status") == "False" else None
        reason = blocking.get("reason") or f"Awaiting{blocking['type']}"
        message = blocking.get("message") or ""
    kept = [Condition.model_validate(c) for c in conditions]
    return set_condition(kept, READY, status, reason=reason, message=message, now=now)


def condition_time(claim: NodeClaim, type_: str) -> datetime | None:
    """When the claim's condition last changed status, or None when it has none of that type."""
    for c in claim.status.conditions:
        if c.type == type_:
            return c.last_transition_time
    return None


def condition_status(claim: NodeClaim, type_: str) -> str | None:
    """The claim's condition status (`True`, `False`, `Unknown`), or None when it has none of that type."""
    for c in claim.status.conditions:
        if c.type == type_:
            return c.status.value
    return None
