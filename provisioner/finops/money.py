"""The money rule of a disruption action, written once: what it may claim as saved, and what it moved.

Pure: plain numbers and names in, numbers out. `provisioner.finops.action_rows` applies it when a
command's rows are made, and the reports apply it again to every row they read, so a ledger written by an
older program is judged by the same rule.

The rule:
- Only moves made *to save money* claim a saving: consolidation (`Empty`, `Underutilized`),
  return-to-preferred (`ReturnToPreferred`, which also moves nodes into a reservation with room).
  Their claimed saving is the $/h of what they removed minus the $/h of what they launched, less the
  share of the removed nodes that paid for bare pods evicted for good (workload evicted is never a
  saving); that share never turns a saving into a loss the bill does not show.
- Moves made for another reason are *not savings*: expiration, drift, interruption, repair, and a
  Capacity Block ending (`capacity-block-ending`, whose reason is `Expired`). Their claimed saving is 0;
  the change they made to the fleet's $/h (`change_per_hour`: what they removed minus what they launched,
  positive when the fleet got cheaper) is shown as such, never as saved.
So once an action's replacements are up, the fleet's $/h has fallen by at least its claimed saving (its
pods moved onto nodes already paid for, or onto the replacements it launched).
"""

from __future__ import annotations

SAVING_REASONS = frozenset({"Empty", "Underutilized", "ReturnToPreferred"})
"""Disruption reasons (Karpenter's, and ours) of moves made to save money."""

NOT_SAVING_METHODS = frozenset({"capacity-block-ending"})
"""Methods that are never savings whatever their reason says (a block's end is `Expired`, forced)."""


def is_saving(reason: str, method: str) -> bool:
    """Whether an action of this reason and method may claim a saving."""
    return reason in SAVING_REASONS and method not in NOT_SAVING_METHODS


def change_per_hour(removed: float, launched: float) -> float:
    """How much the fleet's $/h falls once the action's replacements are up (negative: it rises)."""
    return removed - launched


def claimed_saving(
    *, reason: str, method: str, removed: float, launched: float, evicted: float = 0.0
) -> float:
    """The $/h an action claims as saved (see the module's rule). `removed` and `launched` are the $/h
    of the nodes it removed and of the replacements it launched; `evicted` is the part of `removed` that
    paid for bare pods evicted for good."""
    if not is_saving(reason, method):
        return 0.0
    change = change_per_hour(removed, launched)
    return change - min(max(evicted, 0.0), max(change, 0.0))
