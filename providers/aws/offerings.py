"""What EC2 offers in a region, as the AWS provider reads it: each type's shape (DescribeInstanceTypes,
with its EFA interfaces), the zones that offer it (DescribeInstanceTypeOfferings), spot and on-demand
prices (providers.aws.pricing, else the built-in catalog), and the reserved offerings of the account's
capacity reservations (providers.aws.reservations). Every answer is kept for the provider's cache period
(reservations for `RESERVATIONS_TTL`); deciding what a NodeClass may launch is the provider's.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any

from botocore.config import Config

from providers.aws import efa, errors, instancetypes, pricing, reservations
from providers.aws.sdk import SDK, TTLCache, translated
from provisioner.api import labels as wk
from provisioner.cloudprovider import CloudProviderError, InstanceType, Offering

log = logging.getLogger("providers.aws")

RESERVATIONS_TTL = 30.0
"""Seconds a DescribeCapacityReservations answer is used: free counts move with every launch anywhere
in the account (our own launches drop the cached answer at once)."""


class RegionOfferings:
    """The region's types, zones, prices and reserved offerings, cached (see the module docstring)."""

    def __init__(self, sdk: SDK, cache: TTLCache, *, region: str, use_pricing_api: bool) -> None:
        self._sdk = sdk
        self._cache = cache
        self.region = region
        self._use_pricing_api = use_pricing_api
        self.efa_max: dict[str, int] = {}
        """Type -> the EFA interfaces it allows (0 without EFA), read with the shapes."""

    def shapes(self) -> dict[str, InstanceType]:
        """Type -> its shape (no offerings), from DescribeInstanceTypes; notes each type's EFA interfaces."""

        def load() -> dict[str, InstanceType]:
            out: dict[str, InstanceType] = {}
            for info in self._sdk.paginate(
                "DescribeInstanceTypes", "describe_instance_types", "InstanceTypes"
            ):
                it = instancetypes.from_description(info, region=self.region)
                if it is not None:
                    out[it.name] = it
                    self.efa_max[it.name] = efa.interfaces(info)
            return out

        return self._cache.get("shapes", load)

    def type_zones(self) -> dict[str, set[str]]:
        def load() -> dict[str, set[str]]:
            out: dict[str, set[str]] = {}
            for o in self._sdk.paginate(
                "DescribeInstanceTypeOfferings",
                "describe_instance_type_offerings",
                "InstanceTypeOfferings",
                LocationType="availability-zone",
            ):
                out.setdefault(o["InstanceType"], set()).add(o["Location"])
            return out

        return self._cache.get("type-zones", load)

    def spot_prices(self) -> dict[tuple[str, str], float]:
        def load() -> dict[tuple[str, str], float]:
            with translated("DescribeSpotPriceHistory"):
                return pricing.fetch_spot(self._sdk.ec2)

        return self._cache.get("spot-prices", load)

    def on_demand_prices(self) -> dict[str, float]:
        def load() -> dict[str, float]:
            if not self._use_pricing_api:
                return {}
            try:
                client = self._sdk.client(
                    "pricing",
                    region=pricing.pricing_region(self.region),
                    config=Config(retries={"total_max_attempts": 1}, connect_timeout=3, read_timeout=20),
                )
                prices = pricing.fetch_on_demand(client, self.region)
            except Exception as err:  # any failure: the Pricing API is optional, the catalog answers
                log.info(
                    "AWS Pricing API unavailable (%s); using built-in on-demand list prices",
                    errors.translate(err, operation="GetProducts"),
                )
                return {}
            if not prices:
                log.info("AWS Pricing API returned no prices; using built-in on-demand list prices")
            return prices

        return self._cache.get("on-demand-prices", load)

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """$/h of a spot or on-demand offering: the APIs' answer, else the built-in catalog's."""
        if capacity_type == wk.CAPACITY_TYPE_SPOT:
            price = self.spot_prices().get((instance_type, zone))
            return price if price is not None else pricing.fallback_spot(instance_type, self.region, zone)
        price = self.on_demand_prices().get(instance_type)
        return price if price is not None else pricing.fallback_on_demand(instance_type, self.region)

    def reserved_offerings(
        self, terms: builtins.list[Any] | None, zones: set[str] | None
    ) -> dict[str, builtins.list[Offering]]:
        """Type -> reserved offerings of the reservations `terms` select (None: all the account's)."""
        key = (
            "reservations",
            None if terms is None else tuple(t.model_dump_json() for t in terms),
        )
        raw = self._cache.get(key, lambda: reservations.describe(self._sdk, terms), ttl=RESERVATIONS_TTL)
        return reservations.offerings(raw, zones=zones, hourly_price=self.on_demand_price)

    def on_demand_price(self, instance_type: str) -> float | None:
        return self.price(instance_type, "", wk.CAPACITY_TYPE_ON_DEMAND)

    def priced_types(self, zones: set[str] | None) -> builtins.list[InstanceType]:
        """Every type with its spot and on-demand offerings in `zones` (None: every zone), priced."""
        key = ("priced", frozenset(zones) if zones is not None else None)
        return self._cache.get(key, lambda: self._price_types(zones))

    def _price_types(self, zones: set[str] | None) -> builtins.list[InstanceType]:
        shapes = self.shapes()
        type_zones = self.type_zones()
        out = []
        for name in sorted(shapes):
            offerings = []
            for zone in sorted(type_zones.get(name, set())):
                if zones is not None and zone not in zones:
                    continue
                for capacity_type in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND):
                    price = self.price(name, zone, capacity_type)
                    if price is not None:
                        offerings.append(Offering(zone=zone, capacity_type=capacity_type, price=price))
            out.append(shapes[name].with_offerings(tuple(offerings)))
        return out

    def instance_price(self, instance_type: str, zone: str, capacity_type: str) -> float:
        """$/h of a running instance, for get and list: 0 in a reservation, the catalog's when the APIs fail."""
        if capacity_type == wk.CAPACITY_TYPE_RESERVED:
            return 0.0  # paid for whether used or not: running in it costs nothing more
        try:
            return self.price(instance_type, zone, capacity_type) or 0.0
        except CloudProviderError:
            # A price is informative on get/list; failing the read for it would hide the instance.
            fallback = (
                pricing.fallback_spot(instance_type, self.region, zone)
                if capacity_type == wk.CAPACITY_TYPE_SPOT
                else pricing.fallback_on_demand(instance_type, self.region)
            )
            return fallback or 0.0
