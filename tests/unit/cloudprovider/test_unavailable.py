"""The unavailable-offerings cache: TTL per error kind, and flagging offerings in instance types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from provisioner.cloudprovider import InsufficientCapacity, OfferingKey, catalog
from provisioner.cloudprovider.unavailable import UnavailableOfferings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = OfferingKey("m5.large", "us-east-1a", "spot")


def test_a_capacity_error_is_remembered_for_three_minutes_by_default() -> None:
    cache = UnavailableOfferings()
    cache.mark_error(InsufficientCapacity([KEY]), now=T0)

    assert cache.is_unavailable(KEY, now=T0 + timedelta(minutes=2, seconds=59))
    assert not cache.is_unavailable(KEY, now=T0 + timedelta(minutes=3))


def test_a_quota_error_keeps_its_own_longer_ttl() -> None:
    cache = UnavailableOfferings()
    cache.mark_error(InsufficientCapacity([KEY], kind="quota"), now=T0)

    assert cache.is_unavailable(KEY, now=T0 + timedelta(minutes=10))
    assert not cache.is_unavailable(KEY, now=T0 + timedelta(minutes=15))


@pytest.mark.parametrize(
    ("kind", "expires_after"),
    [("capacity", timedelta(seconds=30)), ("quota", timedelta(hours=1)), ("other", timedelta(minutes=7))],
    ids=["capacity", "quota", "unknown-kind-uses-default"],
)
def test_ttls_are_configurable_per_kind(kind: str, expires_after: timedelta) -> None:
    cache = UnavailableOfferings(
        default_ttl=timedelta(minutes=7),
        ttls={"capacity": timedelta(seconds=30), "quota": timedelta(hours=1)},
    )
    cache.mark([KEY], now=T0, kind=kind)

    assert cache.is_unavailable(KEY, now=T0 + expires_after - timedelta(seconds=1))
    assert not cache.is_unavailable(KEY, now=T0 + expires_after)


def test_a_later_expiry_is_not_shortened_by_a_shorter_mark() -> None:
    cache = UnavailableOfferings()
    cache.mark([KEY], now=T0, kind="quota")
    cache.mark([KEY], now=T0 + timedelta(minutes=1), kind="capacity")

    assert cache.is_unavailable(KEY, now=T0 + timedelta(minutes=10))


def test_apply_flags_only_the_cached_offerings_and_leaves_the_input_untouched() -> None:
    types = [t for t in catalog.load("aws") if t.name in ("m5.large", "m5.xlarge")]
    cache = UnavailableOfferings()
    cache.mark([KEY], now=T0)

    flagged = {t.name: t for t in cache.apply(types, now=T0)}

    unavailable = [(o.zone, o.capacity_type) for o in flagged["m5.large"].offerings if not o.available]
    assert unavailable == [("us-east-1a", "spot")]
    assert all(o.available for o in flagged["m5.xlarge"].offerings)
    assert all(o.available for t in types for o in t.offerings)


def test_apply_after_expiry_returns_every_offering_available() -> None:
    types = [t for t in catalog.load("aws") if t.name == "m5.large"]
    cache = UnavailableOfferings()
    cache.mark([KEY], now=T0)

    (again,) = cache.apply(types, now=T0 + timedelta(minutes=5))

    assert all(o.available for o in again.offerings)


def test_expire_drops_old_entries_and_bumps_the_generation() -> None:
    cache = UnavailableOfferings()
    cache.mark([KEY, OfferingKey("m5.large", "us-east-1b", "spot")], now=T0)
    generation = cache.generation

    assert cache.expire(now=T0 + timedelta(minutes=1)) == 0
    assert cache.expire(now=T0 + timedelta(minutes=3)) == 2
    assert len(cache) == 0
    assert cache.generation > generation
