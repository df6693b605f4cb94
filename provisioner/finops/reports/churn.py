"""Churn charged back, node by node: a node launched within `CHURN_WINDOW` after an action, for pods of
the workloads that action moved, and not a replacement any action launched (that is the launching
action's own doing), has its cost up to `now` taken off that action's realized savings; split evenly
when it follows several actions. Pure.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from provisioner.finops.rows import ActionRow, UsageRow

CHURN_WINDOW = timedelta(hours=1)


def _first_seen(usage: Sequence[UsageRow]) -> dict[str, datetime]:
    first: dict[str, datetime] = {}
    for row in usage:
        if row.node not in first or row.time < first[row.node]:
            first[row.node] = row.time
    return first


def charges(
    actions: Sequence[ActionRow], usage: Sequence[UsageRow], *, now: datetime
) -> tuple[list[float], int]:
    """Per action, the cost charged back for capacity launched again for the pods it moved; and how many
    nodes were charged."""
    first = _first_seen(usage)
    cost_by_node: dict[str, float] = defaultdict(float)
    workloads_by_node: dict[str, set[str]] = defaultdict(set)
    for row in usage:
        if row.time < now:
            cost_by_node[row.node] += row.cost
        workloads_by_node[row.node].update(row.workloads)
    # Nodes by birth, so each action looks only at the nodes born in its window; the nodes it follows
    # are taken in `first`'s order, so the charges are summed in the same order as a walk over `first`.
    position = {node: i for i, node in enumerate(first)}
    births = sorted((born, position[node], node) for node, born in first.items())
    birth_times = [born for born, _, _ in births]
    followed: dict[str, list[int]] = defaultdict(list)
    # A node an action launched as its replacement is that action's doing, never another one's churn.
    replacements = {node for action in actions for node in action.replacement_nodes}
    for index, action in enumerate(actions):
        if not action.workloads:
            continue
        moved = set(action.workloads)
        lo = bisect.bisect_left(birth_times, action.time)
        hi = bisect.bisect_left(birth_times, action.time + CHURN_WINDOW)
        hits = sorted(
            (at, node)
            for _, at, node in births[lo:hi]
            if node not in replacements and moved & workloads_by_node[node]
        )
        for _, node in hits:
            followed[node].append(index)
    charges = [0.0] * len(actions)
    for node, indexes in followed.items():
        for index in indexes:
            charges[index] += cost_by_node[node] / len(indexes)
    return charges, len(followed)
