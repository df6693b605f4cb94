"""EventBridge messages about EC2 instances, as delivered into an SQS queue, read into interruption kinds.

Pure: `parse(body)` turns one message body into (kind, instance ids, time, detail) or None when the
message is not one we act on. Four kinds of message matter (the same EventBridge rules Karpenter's
interruption queue uses):
- `EC2 Spot Instance Interruption Warning` (aws.ec2): the instance goes in two minutes;
- `EC2 Instance Rebalance Recommendation` (aws.ec2): spot capacity at elevated risk, move early;
- `AWS Health Event` (aws.health) of category `scheduledChange` for EC2: maintenance retires the host;
- `EC2 Instance State-change Notification` (aws.ec2): the instance is stopping, stopped, shutting down
  or terminated outside of our control (pending and running are not interruptions).
The provider turns instance ids into provider ids (it needs the zone) and deletes the messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SPOT_INTERRUPTION = "spot-interruption"
REBALANCE = "rebalance"
SCHEDULED_CHANGE = "scheduled-change"
STATE_CHANGE = "state-change"

_INTERRUPTING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    kind: str
    instance_ids: tuple[str, ...]
    time: datetime | None
    detail: str


def _time(raw: Any) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse(body: str) -> ParsedMessage | None:
    """The interruption a message body reports, or None when it is not one (or not JSON)."""
    try:
        event = json.loads(body)
    except (TypeError, ValueError):
        return None
    if not isinstance(event, dict):
        return None
    source = event.get("source")
    detail_type = event.get("detail-type")
    raw_detail = event.get("detail")
    detail: dict[str, Any] = raw_detail if isinstance(raw_detail, dict) else {}
    when = _time(event.get("time"))
    if source == "aws.ec2" and detail_type == "EC2 Spot Instance Interruption Warning":
        iid = detail.get("instance-id")
        action = detail.get("instance-action", "terminate")
        return ParsedMessage(SPOT_INTERRUPTION, (iid,), when, f"instance-action={action}") if iid else None
    if source == "aws.ec2" and detail_type == "EC2 Instance Rebalance Recommendation":
        iid = detail.get("instance-id")
        return ParsedMessage(REBALANCE, (iid,), when, "") if iid else None
    if source == "aws.ec2" and detail_type == "EC2 Instance State-change Notification":
        iid = detail.get("instance-id")
        state = detail.get("state")
        if not iid or state not in _INTERRUPTING_STATES:
            return None
        return ParsedMessage(STATE_CHANGE, (iid,), when, f"state={state}")
    if source == "aws.health" and detail_type == "AWS Health Event":
        if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
            return None
        ids = tuple(
            str(e["entityValue"])
            for e in detail.get("affectedEntities") or []
            if isinstance(e, dict) and str(e.get("entityValue", "")).startswith("i-")
        )
        if not ids:
            return None
        return ParsedMessage(SCHEDULED_CHANGE, ids, when, str(detail.get("eventTypeCode", "")))
    return None
