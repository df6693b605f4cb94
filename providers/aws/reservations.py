"""EC2 capacity reservations as `reserved` offerings: which reservations an AWSNodeClass selects, what
DescribeCapacityReservations says of them (type, zone, free count, end of a Capacity Block), and
launching into them.

Pure except `describe` and `launch_into`, which call EC2: selection terms become DescribeCapacityReservations
filters, and each active reservation with a free instance becomes one offering of its type and zone,
priced zero (the money is spent whether the reservation is used or not; its hourly price goes on the
Reservation for the idle-cost reports). A reservation that is full, pending, expired or cancelled gives
no available offering, so only that reservation is passed over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from providers.aws import errors, launch
from providers.aws.model import CapacityReservationSelectorTerm
from providers.aws.sdk import SDK, tag_filters
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.cloudprovider import CreateError, Instance, InstanceType, Offering, OfferingKey, Reservation

log = logging.getLogger("providers.aws")

ACTIVE = "active"

REPLACED_CODES = frozenset(
    {
        "ReservationCapacityExceeded",
        "InvalidCapacityReservationId.NotFound",
        "InvalidCapacityReservationId.Malformed",
        "CapacityReservationNotActive",
    }
)
"""Launch errors that mean "this reservation cannot take it now" (full, expired, cancelled): a capacity
error for that reservation only, never for the type's other offerings."""


def describe(sdk: SDK, terms: list[CapacityReservationSelectorTerm] | None) -> list[dict[str, Any]]:
    """The active reservations the terms select (None: every active reservation of the account, for
    the catalog), deduplicated by id, sorted by id."""
    found: dict[str, dict[str, Any]] = {}
    state = [{"Name": "state", "Values": [ACTIVE]}]
    if terms is None:
        queries: list[dict[str, Any]] = [{"Filters": state}]
    else:
        queries = []
        for term in terms:
            if term.id:
                queries.append({"CapacityReservationIds": [term.id], "Filters": state})
                continue
            filters = [*state, *tag_filters(term.tags)]
            if term.owner_id:
                filters.append({"Name": "owner-id", "Values": [term.owner_id]})
            queries.append({"Filters": filters})
    for params in queries:
        for r in sdk.paginate(
            "DescribeCapacityReservations", "describe_capacity_reservations", "CapacityReservations", **params
        ):
            found[str(r["CapacityReservationId"])] = r
    return [found[k] for k in sorted(found)]


def kind_of(raw: dict[str, Any]) -> str:
    """`capacity-block` for a Capacity Block for ML, else `default`."""
    if raw.get("ReservationType") == "capacity-block":
        return wk.RESERVATION_TYPE_CAPACITY_BLOCK
    return wk.RESERVATION_TYPE_DEFAULT


def offerings(
    raw: list[dict[str, Any]],
    *,
    zones: set[str] | None,
    hourly_price: Callable[[str], float | None],
) -> dict[str, list[Offering]]:
    """Instance type -> its reserved offerings, one per active reservation in `zones` (None: any zone).
    A reservation with no free instance is listed unavailable (so the catalog shows it, and the
    scheduler passes it over)."""
    out: dict[str, list[Offering]] = {}
    for r in raw:
        if r.get("State", ACTIVE) != ACTIVE:
            continue
        zone = str(r.get("AvailabilityZone", ""))
        if zones is not None and zone not in zones:
            continue
        type_name = str(r["InstanceType"])
        free = int(r.get("AvailableInstanceCount", 0))
        end = r.get("EndDate")
        reservation = Reservation(
            id=str(r["CapacityReservationId"]),
            kind=kind_of(r),
            free=free,
            total=int(r.get("TotalInstanceCount", free)),
            ends_at=end if isinstance(end, datetime) else None,
            hourly_price=hourly_price(type_name) or 0.0,
        )
        out.setdefault(type_name, []).append(
            Offering(
                zone=zone,
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=0.0,
                available=free > 0,
                reservation=reservation,
            )
        )
    return out


def with_reserved(types: list[InstanceType], reserved: dict[str, list[Offering]]) -> list[InstanceType]:
    """The types with their reserved offerings first."""
    if not reserved:
        return types
    return [
        it.with_offerings((*reserved[it.name], *it.offerings)) if it.name in reserved else it for it in types
    ]


def launch_into(
    ec2: Any,
    claim: NodeClaim,
    attempt: launch.FleetAttempt,
    *,
    templates: dict[str, str],
    tags: dict[str, str],
    provider_id: Callable[[str, str], str],
) -> Instance | list[OfferingKey]:
    """Launch into the attempt's reservations one at a time (RunInstances aimed at each): the
    instance, or the reservations that could not take it (full, expired: those only)."""
    failed: list[OfferingKey] = []
    for c in attempt.candidates:
        request = launch.reserved_request(
            c, launch_templates=templates, tags=tags, client_token=f"{claim.name}-{c.reservation_id}"[:64]
        )
        try:
            answer = ec2.run_instances(**request)
        except Exception as err:
            code = errors.error_code(err)
            if code in REPLACED_CODES or errors.is_capacity_code(code):
                log.info(
                    "nodeclaim %s: reservation %s cannot take %s now (%s); trying the next option",
                    claim.name,
                    c.reservation_id,
                    c.instance_type,
                    code,
                )
                failed.append(c.key)
                continue
            raise errors.translate(err, operation="RunInstances", default=CreateError) from err
        raw = answer["Instances"][0]
        log.info(
            "launched %s (%s in %s, reservation %s %s) for nodeclaim %s",
            raw["InstanceId"],
            c.instance_type,
            c.zone,
            c.reservation_type,
            c.reservation_id,
            claim.name,
        )
        return Instance(
            provider_id=provider_id(c.zone, raw["InstanceId"]),
            instance_type=c.instance_type,
            zone=c.zone,
            capacity_type=c.capacity_type,
            price=c.price,
            state="pending",
            nodeclaim=claim.name,
            nodepool=claim.nodepool,
            image_id=raw.get("ImageId"),
            tags=tags,
            reservation_id=c.reservation_id,
            reservation_type=c.reservation_type,
            skipped=tuple(failed),
        )
    return failed
