"""What each offering of the fake cloud can still launch: capacity limits and stockouts by selector, and
the reservations (`add_reservation`) with the slots their instances hold.

A reservation is published with its free count, as DescribeCapacityReservations does: one `reserved`
offering of its type and zone, priced zero, taking at most its count of instances; a terminated instance
gives its slot (and its capacity slot) back, and an ended reservation offers nothing.

`CapacityBook` keeps no lock of its own: its FakeProvider calls it under the provider's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from provisioner.api import labels
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.protocol import Instance
from provisioner.cloudprovider.types import InstanceType, Offering, Reservation


@dataclass(frozen=True, slots=True)
class Selector:
    """Which offerings a capacity or stockout setting applies to; None matches any."""

    instance_type: str | None = None
    zone: str | None = None
    capacity_type: str | None = None

    def matches(self, key: OfferingKey) -> bool:
        return (
            (self.instance_type is None or self.instance_type == key.instance_type)
            and (self.zone is None or self.zone == key.zone)
            and (self.capacity_type is None or self.capacity_type == key.capacity_type)
        )


class CapacityBook:
    """The limits, stockouts and reservations over a catalog's offerings, and what launches took of them."""

    def __init__(self, types: Mapping[str, InstanceType]) -> None:
        self._types = types
        """The catalog by type name (the provider's own mapping)."""
        self._capacity: dict[OfferingKey, int] = {}
        self._unavailable: set[OfferingKey] = set()
        self._reservations: dict[str, tuple[str, Reservation]] = {}
        """Reservation id -> (zone, the reservation with its total); free counts come from `_held`."""
        self._type_of: dict[str, str] = {}
        self._held: dict[str, int] = {}

    # --- settings -----------------------------------------------------------------------------------------

    def set_capacity(self, selector: Selector, count: int | None) -> None:
        """Each matching offering can launch `count` more instances (None: unlimited again)."""
        if count is not None and count < 0:
            raise ValueError(f"count must be >= 0 or None, got {count}")
        for key in self._matching(selector):
            if count is None:
                self._capacity.pop(key, None)
            else:
                self._capacity[key] = count

    def mark_unavailable(self, selector: Selector) -> None:
        self._unavailable.update(self._matching(selector))

    def mark_available(self, selector: Selector) -> None:
        self._unavailable.difference_update(self._matching(selector))

    def add_reservation(
        self,
        reservation_id: str,
        *,
        instance_type: str,
        zone: str,
        count: int,
        kind: str,
        ends_at: datetime | None,
    ) -> None:
        """A reservation of `count` instances of the type in the zone, paid for at the type's on-demand
        price there. Adding an id again changes it (count, end)."""
        if instance_type not in self._types:
            raise ValueError(f"unknown instance type {instance_type!r} in the fake provider's catalog")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        on_demand = self._types[instance_type].cheapest(
            zones={zone}, capacity_types={labels.CAPACITY_TYPE_ON_DEMAND}
        )
        self._reservations[reservation_id] = (
            zone,
            Reservation(
                id=reservation_id,
                kind=kind,
                total=count,
                ends_at=ends_at,
                hourly_price=on_demand.price if on_demand else 0.0,
            ),
        )
        self._held.setdefault(reservation_id, 0)
        self._type_of[reservation_id] = instance_type

    def end_reservation(self, reservation_id: str) -> None:
        self._reservations.pop(reservation_id, None)

    # --- reading ------------------------------------------------------------------------------------------

    def reservations(self) -> list[Reservation]:
        """The live reservations with their free counts now."""
        return [self._reservation(rid) for rid in sorted(self._reservations)]

    def remaining(self, key: OfferingKey) -> int | None:
        """The offering's capacity setting (None: unlimited; 0 when stocked out)."""
        if key in self._unavailable:
            return 0
        return self._capacity.get(key)

    def exhausted(self, key: OfferingKey) -> bool:
        room = self.room(key)
        return room is not None and room <= 0

    def room(self, key: OfferingKey) -> int | None:
        """How many more instances the offering can launch now (None: no limit)."""
        if key in self._unavailable:
            return 0
        limits = [self._capacity[key]] if key in self._capacity else []
        if key.reservation_id:
            live = key.reservation_id in self._reservations
            limits.append(self._reservation(key.reservation_id).free if live else 0)
        return min(limits) if limits else None

    def with_reservations(self, types: list[InstanceType]) -> list[InstanceType]:
        """The types with one reserved offering per live reservation (free count as of now)."""
        by_type: dict[str, list[Offering]] = {}
        for rid, (zone, _r) in sorted(self._reservations.items()):
            live = self._reservation(rid)
            by_type.setdefault(self._type_of[rid], []).append(
                Offering(zone, labels.CAPACITY_TYPE_RESERVED, 0.0, live.free > 0, reservation=live)
            )
        return [t.with_offerings((*by_type[t.name], *t.offerings)) if t.name in by_type else t for t in types]

    # --- launches and terminations --------------------------------------------------------------------------

    def take(self, key: OfferingKey, reservation: Reservation | None) -> None:
        """A launch in the offering: one capacity slot used, one slot of its reservation held."""
        if key in self._capacity:
            self._capacity[key] -= 1
        if reservation is not None:
            self._held[reservation.id] = self._held.get(reservation.id, 0) + 1

    def give_back(self, instance: Instance) -> None:
        """A terminated instance: its capacity slot and its reservation slot are free again."""
        key = OfferingKey(
            instance.instance_type, instance.zone, instance.capacity_type, instance.reservation_id or ""
        )
        if key in self._capacity:
            self._capacity[key] += 1
        if instance.reservation_id in self._held:
            self._held[instance.reservation_id] -= 1

    # --- internals ----------------------------------------------------------------------------------------

    def _matching(self, selector: Selector) -> Iterable[OfferingKey]:
        if selector.instance_type is not None and selector.instance_type not in self._types:
            raise ValueError(
                f"unknown instance type {selector.instance_type!r} in the fake provider's catalog"
            )
        keys = [
            o.offering_key(t.name)
            for t in self._types.values()
            for o in t.offerings
            if selector.instance_type is None or selector.instance_type == t.name
        ]
        return [k for k in keys if selector.matches(k)]

    def _reservation(self, reservation_id: str) -> Reservation:
        _, r = self._reservations[reservation_id]
        return replace(r, free=max(0, r.total - self._held.get(reservation_id, 0)))
