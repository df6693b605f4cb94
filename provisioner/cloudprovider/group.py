"""Group launches for a provider without an atomic call: one `create` per member, every member pinned
to the same offering, and the launched members terminated when the group ends partial.

`launch_one_by_one` is what a provider's `create_group` falls back to where its cloud has no
all-or-nothing request (or a request of that kind cannot express the offering, e.g. an AWS capacity
reservation through RunInstances). It keeps the protocol's promise: one offering for all, in the group
launch order, and nothing left running when no offering takes the whole group. Claims that already have
an instance (`existing`) keep it, and the others join its offering.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.errors import InsufficientCapacity, NotFound, OfferingKey, PartialLaunch
from provisioner.cloudprovider.launch_order import Attempt, group_launch_order
from provisioner.cloudprovider.protocol import GangPlacement, Instance
from provisioner.cloudprovider.types import InstanceType

log = logging.getLogger(__name__)

Create = Callable[[NodeClaim, list[InstanceType], NodeClass], Instance]
Delete = Callable[[str], None]


def check_claims(claims: Sequence[NodeClaim]) -> None:
    """A group names each claim once."""
    names = [c.name for c in claims]
    if len(set(names)) != len(names):
        raise ValueError(f"create_group got a claim twice: {names}")


def pinned_order(
    claims: Sequence[NodeClaim],
    instance_types: Sequence[InstanceType],
    existing: dict[str, Instance],
    placement: GangPlacement | None,
    *,
    zones: Collection[str] | None = None,
    capacity_types: Collection[str] | None = None,
    unavailable: Collection[OfferingKey] = (),
) -> tuple[list[NodeClaim], list[Attempt], tuple[OfferingKey, ...]]:
    """The claims still to launch and the offerings to try for them: those of the group launch order,
    pinned to the offering of a member already running (else to the placement's zone). `zones` and
    `capacity_types` narrow to what the provider can launch; `unavailable` offerings are not tried."""
    missing = [c for c in claims if c.name not in existing]
    running = next(iter(existing.values()), None)
    zone = running.zone if running else (placement.zone if placement else None)
    types = [t for t in instance_types if running is None or t.name == running.instance_type]
    if running is not None:
        capacity_types = [c for c in capacity_types or [running.capacity_type] if c == running.capacity_type]
    order = group_launch_order(
        missing, types, zone=zone, zones=zones, capacity_types=capacity_types, unavailable=unavailable
    )
    return missing, list(order.attempts), order.unavailable


def launch_one_by_one(
    claims: Sequence[NodeClaim],
    instance_types: Sequence[InstanceType],
    node_class: NodeClass,
    *,
    create: Create,
    delete: Delete,
    existing: dict[str, Instance] | None = None,
    placement: GangPlacement | None = None,
) -> list[Instance]:
    """Launch the claims one `create` each, all in one offering, or none (see the module docstring)."""
    check_claims(claims)
    have = dict(existing or {})
    missing, attempts, _ = pinned_order(claims, instance_types, have, placement)
    if not missing:
        return [have[c.name] for c in claims]
    tried: list[OfferingKey] = []
    partial: list[PartialLaunch] = []
    for attempt in attempts:
        only = attempt.instance_type.with_offerings((attempt.offering,))
        launched: list[Instance] = []
        try:
            for claim in missing:
                launched.append(create(claim, [only], node_class))
        except InsufficientCapacity:
            tried.append(attempt.key)
            terminate(launched, delete)
            if launched:
                partial.append(
                    PartialLaunch(attempt.key, tuple(i.provider_id for i in launched), attempt.price)
                )
            continue
        except Exception:
            terminate(launched, delete)
            raise
        have.update({c.name: i for c, i in zip(missing, launched, strict=True)})
        return with_partial([with_skipped(have[c.name], tuple(tried)) for c in claims], partial)
    if not tried:
        raise InsufficientCapacity([], "no available offering is allowed by every claim of the group")
    raise InsufficientCapacity(
        tried, f"no offering has room for {len(missing)} instances", partial=tuple(partial)
    )


def only_capacity_type(instance_types: Sequence[InstanceType], capacity_type: str) -> list[InstanceType]:
    """The types with only their offerings of one capacity type (those without any left out): what a
    provider hands the fallback for the phase its atomic call cannot make (reservations)."""
    out = []
    for it in instance_types:
        kept = tuple(o for o in it.offerings if o.capacity_type == capacity_type)
        if kept:
            out.append(it.with_offerings(kept))
    return out


def reserved_one_by_one(
    claims: Sequence[NodeClaim],
    instance_types: Sequence[InstanceType],
    node_class: NodeClass,
    *,
    capacity_type: str,
    zone: str,
    gang: str,
    create: Create,
    delete: Delete,
    existing: dict[str, Instance],
    tried: list[OfferingKey],
    partial: list[PartialLaunch],
) -> list[Instance] | None:
    """A gang aimed at a reservation, one create per member (no cloud launches into a reservation
    atomically): the instances, or None with `tried` and `partial` extended when it found no room."""
    try:
        return with_partial(
            launch_one_by_one(
                claims,
                only_capacity_type(instance_types, capacity_type),
                node_class,
                create=create,
                delete=delete,
                existing=existing,
                placement=GangPlacement(gang=gang, zone=zone),
            ),
            partial,
        )
    except InsufficientCapacity as err:
        tried.extend(k for k in err.offerings if k not in tried)
        partial.extend(err.partial)
        return None


def no_room(
    missing: Sequence[NodeClaim], tried: Sequence[OfferingKey], partial: Sequence[PartialLaunch]
) -> InsufficientCapacity:
    """The error of a gang no offering had room for, naming its members and the offerings tried."""
    return InsufficientCapacity(
        list(tried),
        f"gang of {len(missing)} ({', '.join(c.name for c in missing)}): no offering had room for all of "
        "them: " + ", ".join(str(k) for k in tried),
        partial=tuple(partial),
    )


def with_skipped(instance: Instance, skipped: tuple[OfferingKey, ...]) -> Instance:
    """The instance also naming the offerings its group found out of room before it launched."""
    if not skipped:
        return instance
    return replace(instance, skipped=tuple(dict.fromkeys((*skipped, *instance.skipped))))


def with_partial(instances: list[Instance], partial: Sequence[PartialLaunch]) -> list[Instance]:
    """The group's instances, the first one naming the partial launches terminated on the way."""
    if not partial or not instances:
        return instances
    first = instances[0]
    return [replace(first, partial=(*first.partial, *partial)), *instances[1:]]


def terminate(instances: Sequence[Instance], delete: Delete) -> None:
    """Terminate the members of a group that ended partial; one already gone is fine."""
    for instance in instances:
        with contextlib.suppress(NotFound):
            delete(instance.provider_id)
        log.info("terminated %s: its group could not launch whole", instance.provider_id)
