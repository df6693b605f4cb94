"""Reservations within one solve: how many instances each can still take, and how many this solve's new
nodes already hold. A reservation's offerings are priced zero (paid for either way), so the solver puts
new nodes into them first; `ReservationRoom` says when one is used up, so the rest go to the usual ladder.

Pure bookkeeping: which offerings drop out once a reservation is full is `offerings.OptionCache`'s, and
the order pools are asked in is the solver's.
"""

from __future__ import annotations

from collections.abc import Iterable

from provisioner.scheduling.offerings import Option
from provisioner.scheduling.pools import Pool


def reservation_of(option: Option) -> str | None:
    """The reservation a new node on this option launches into, or None."""
    reservation = option[2].reservation
    return reservation.id if reservation is not None else None


class ReservationRoom:
    """Free count per reservation (as the providers said) and what this solve's new nodes hold."""

    __slots__ = ("free", "held")

    def __init__(self, pools: Iterable[Pool]) -> None:
        self.free: dict[str, int] = {}
        self.held: dict[str, int] = {}
        for pool in pools:
            for t in pool.types:
                for o in t.it.offerings:
                    if o.reservation is not None and o.available:
                        rid = o.reservation.id
                        # Pools sharing a NodeClass list the same reservation: it is counted once.
                        self.free[rid] = max(self.free.get(rid, 0), o.reservation.free)

    def __bool__(self) -> bool:
        return bool(self.free)

    def left(self) -> bool:
        """Some reservation can still take a new node."""
        return any(self.held.get(rid, 0) < free for rid, free in self.free.items())

    def hold(self, reservation_id: str | None) -> bool:
        """A new node takes one instance of the reservation; True when that used it up."""
        if reservation_id is None:
            return False
        self.held[reservation_id] = self.held.get(reservation_id, 0) + 1
        return self.held[reservation_id] >= self.free.get(reservation_id, 0)

    def release(self, reservation_id: str | None) -> None:
        """A node moved off the reservation (its grown type is not in it): its slot is given back. The
        reservation stays out of this solve's new option lists (conservative: a later node launches on
        the ladder instead)."""
        if reservation_id is not None:
            self.held[reservation_id] -= 1
