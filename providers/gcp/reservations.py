"""Compute Engine reservations as `reserved` offerings: which reservations a GCPNodeClass selects
(`spec.reservations`: by name, or any that does not require naming), and what reservations.list says of
them (machine type, zone, free count).

Pure: the provider lists the reservations of the node class's zones and passes them here. Each READY
reservation becomes one offering of its type and zone, priced zero (the money is spent whether it is
used or not; its hourly price goes on the Reservation for the idle-cost reports); a full one is listed
unavailable, so only that reservation is passed over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from providers.gcp import attached, naming
from providers.gcp.model import GCPReservations
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import Offering, Reservation


def selected(raw: Any, wanted: GCPReservations) -> bool:
    """Whether the node class launches into this reservation."""
    if raw.status != "READY":
        return False
    if wanted.names:
        return raw.name in wanted.names
    return not raw.specific_reservation_required


def offerings(
    found: Iterable[Any],
    *,
    wanted: GCPReservations,
    hourly_price: Callable[[str], float | None],
) -> dict[str, list[Offering]]:
    """Instance type -> its reserved offerings, one per selected reservation."""
    out: dict[str, list[Offering]] = {}
    for raw in found:
        if not selected(raw, wanted):
            continue
        held = raw.specific_reservation
        props = held.instance_properties
        type_name = props.machine_type
        if props.guest_accelerators:
            acc = props.guest_accelerators[0]
            type_name = attached.gcp_attached_name(
                type_name, naming.last(acc.accelerator_type), acc.accelerator_count
            )
        free = max(0, int(held.count) - int(held.in_use_count))
        reservation = Reservation(
            id=raw.name,
            kind=wk.RESERVATION_TYPE_DEFAULT,
            free=free,
            total=int(held.count),
            hourly_price=hourly_price(type_name) or 0.0,
        )
        out.setdefault(type_name, []).append(
            Offering(
                zone=naming.last(raw.zone),
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=0.0,
                available=free > 0,
                reservation=reservation,
            )
        )
    return out
