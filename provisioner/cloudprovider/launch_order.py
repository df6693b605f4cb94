"""The one order in which every provider tries the offerings of a NodeClaim's options.

What it decides, for the AWS, GCP and fake providers alike:

1. **Which offerings.** Those of the claim's options (its instance-type In values, in the scheduler's
   order; every given type when it lists none) whose zone and capacity type the claim admits
   (`NodeClaim.admits`: a claim silent on a key admits every value, as the scheduler read it), within
   what the provider can launch (`zones`, `capacity_types`). An offering flagged unavailable (by the
   cloud, the unavailable-offerings cache, or the provider's own memory passed as `unavailable`) is not
   tried: it is listed apart, so the provider can name it when nothing is left.
2. **Reserved first.** A reservation is paid for whether used or not: its offerings come before any
   other, cheapest first.
3. **Then the cheapest of spot and on-demand.** The other offerings by price, whatever their capacity
   type: spot in every allowed zone before on-demand while spot is cheaper (the fallback ladder), and
   never a dearer spot offering before a cheaper on-demand one (an 8-GPU spot instance is no fallback
   for a small on-demand one; Karpenter likewise leaves out spot dearer than the cheapest on-demand).
   At one price: the type's rank among the claim's options, then zone, then on-demand before spot (the
   same money without the interruptions), as the scheduler breaks the same ties, so equal prices always
   resolve the same way and the first attempt is the offering the scheduler planned.

So the first attempt is the cheapest allowed offering, the one the scheduler priced the claim at,
unless a reservation can take the claim. `LaunchOrder.phases` cuts the order where the capacity type
changes: an AWS CreateFleet request holds one capacity type.

A group (`group_launch_order`, the members of one gang) uses the same order over the offerings every
member allows, each offering tried for the whole group at once: a reservation with fewer free
instances than members is no candidate. Pure: no I/O, no clock; providers turn attempts into calls.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from provisioner.api import labels
from provisioner.api.nodeclaim import NodeClaim
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType, Offering

_AT_ONE_PRICE = {labels.CAPACITY_TYPE_ON_DEMAND: 0, labels.CAPACITY_TYPE_SPOT: 1}
"""Between offerings of one price, on-demand first: the same money without the interruptions."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One offering to try: an instance type, the offering (zone, capacity type, price), and the type's
    rank among the claim's options (0 is the scheduler's first choice)."""

    instance_type: InstanceType
    offering: Offering
    rank: int

    @property
    def zone(self) -> str:
        return self.offering.zone

    @property
    def capacity_type(self) -> str:
        return self.offering.capacity_type

    @property
    def price(self) -> float:
        return self.offering.price

    @property
    def key(self) -> OfferingKey:
        return self.offering.offering_key(self.instance_type.name)


@dataclass(frozen=True, slots=True)
class LaunchOrder:
    """The attempts in the order to make them, and the allowed offerings skipped as unavailable."""

    attempts: tuple[Attempt, ...]
    unavailable: tuple[OfferingKey, ...] = ()
    """Offerings the claim allows that were flagged unavailable, in the claim's option order."""

    def phases(self) -> list[tuple[str, tuple[Attempt, ...]]]:
        """The attempts cut where the capacity type changes: (capacity type, its run of attempts), in
        order. A capacity type may come back in a later phase (cheap spot, on-demand, dearer spot)."""
        out: list[tuple[str, tuple[Attempt, ...]]] = []
        for attempt in self.attempts:
            if out and out[-1][0] == attempt.capacity_type:
                out[-1] = (attempt.capacity_type, (*out[-1][1], attempt))
            else:
                out.append((attempt.capacity_type, (attempt,)))
        return out


def options_of(claim: NodeClaim, instance_types: Sequence[InstanceType]) -> list[InstanceType]:
    """The claim's options among `instance_types`, in the claim's order; every type (in the order
    given) when the claim names none."""
    names = claim.instance_type_options()
    if not names:
        return list(instance_types)
    by_name = {it.name: it for it in instance_types}
    return [by_name[name] for name in names if name in by_name]


def launch_order(
    claim: NodeClaim,
    instance_types: Sequence[InstanceType],
    *,
    zones: Collection[str] | None = None,
    capacity_types: Collection[str] | None = None,
    unavailable: Collection[OfferingKey] = (),
) -> LaunchOrder:
    """The offerings of the claim's options in the order to try them (see the module docstring).

    `zones` and `capacity_types` narrow what the claim allows to what the provider can launch (None:
    no narrowing); `unavailable` adds offerings to skip beyond those flagged in the types.
    """
    found: list[Attempt] = []
    skipped: list[OfferingKey] = []
    # The options' offerings repeat a few zones and capacity types: each is read off the claim's
    # requirements once.
    admits = functools.cache(claim.admits)
    for rank, it in enumerate(options_of(claim, instance_types)):
        for offering in it.offerings:
            if zones is not None and offering.zone not in zones:
                continue
            if capacity_types is not None and offering.capacity_type not in capacity_types:
                continue
            if not (
                admits(labels.ZONE, offering.zone) and admits(labels.CAPACITY_TYPE, offering.capacity_type)
            ):
                continue
            attempt = Attempt(it, offering, rank)
            if not offering.available or attempt.key in unavailable:
                skipped.append(attempt.key)
            else:
                found.append(attempt)
    return LaunchOrder(attempts=tuple(_ordered(found)), unavailable=tuple(dict.fromkeys(skipped)))


def _ordered(attempts: Iterable[Attempt]) -> list[Attempt]:
    def key(a: Attempt) -> tuple[bool, float, int, str, int, str, str]:
        return (
            a.capacity_type != labels.CAPACITY_TYPE_RESERVED,
            a.price,
            a.rank,
            a.zone,
            _AT_ONE_PRICE.get(a.capacity_type, 2),
            a.capacity_type,
            a.key.reservation_id,
        )

    return sorted(attempts, key=key)


def group_launch_order(
    claims: Sequence[NodeClaim],
    instance_types: Sequence[InstanceType],
    *,
    zone: str | None = None,
    zones: Collection[str] | None = None,
    capacity_types: Collection[str] | None = None,
    unavailable: Collection[OfferingKey] = (),
) -> LaunchOrder:
    """The offerings a group of claims can all launch in together, in the launch order of the first
    claim: those every claim allows (its options, zone and capacity type), in `zone` when given, and
    for a reservation only one with a free instance for every claim."""
    if not claims:
        return LaunchOrder(attempts=())
    first, rest = claims[0], claims[1:]
    narrowed = zones
    if zone is not None:
        narrowed = [zone] if zones is None or zone in zones else []
    order = launch_order(
        first,
        instance_types,
        zones=narrowed,
        capacity_types=capacity_types,
        unavailable=unavailable,
    )
    admits = [(functools.cache(c.admits), set(c.instance_type_options())) for c in rest]

    def everyone(a: Attempt) -> bool:
        return all(
            (not names or a.instance_type.name in names)
            and ok(labels.ZONE, a.zone)
            and ok(labels.CAPACITY_TYPE, a.capacity_type)
            for ok, names in admits
        )

    def enough(a: Attempt) -> bool:
        return a.offering.reservation is None or a.offering.reservation.free >= len(claims)

    return LaunchOrder(
        attempts=tuple(a for a in order.attempts if everyone(a) and enough(a)),
        unavailable=order.unavailable,
    )
