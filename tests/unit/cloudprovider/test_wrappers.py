"""Retry, metrics and caching wrappers, over the fake provider (our own seam)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from providers.fake import FakeProvider
from provisioner.api.nodeclaim import NodeClaim
from provisioner.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    CreateError,
    InstanceType,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.unavailable import UnavailableOfferings
from provisioner.cloudprovider.wrappers import (
    CachingProvider,
    MetricsProvider,
    RetryingProvider,
    backoff,
    wrap,
)
from testkit.builders import node_claim
from testkit.providers.harness_fake import fake_node_class

NODE_CLASS = fake_node_class()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def m5_types(provider: FakeProvider) -> list[InstanceType]:
    return [t for t in provider.instance_types(NODE_CLASS) if t.name in ("m5.large", "m5.xlarge")]


def claim(
    name: str = "c", *, capacity_types: tuple[str, ...] = ("on-demand",), zones: Sequence[str] | None = None
) -> NodeClaim:
    return node_claim(
        name, ["m5.large", "m5.xlarge"], node_class=NODE_CLASS, capacity_types=capacity_types, zones=zones
    )


# --- retries ----------------------------------------------------------------------------------------------


def test_transient_errors_are_retried_until_success() -> None:
    fake = FakeProvider()
    fake.fail_next_create(TransientError("throttled"), times=3)
    sleeps: list[float] = []

    instance = RetryingProvider(fake, sleep=sleeps.append).create(claim(), m5_types(fake), NODE_CLASS)

    assert instance.instance_type == "m5.large"
    assert len(sleeps) == 3
    assert [c for c in fake.calls if c[0] == "create"] == [("create", "c")] * 4


def test_retries_are_bounded_and_the_last_transient_error_is_raised() -> None:
    fake = FakeProvider()
    fake.fail_next_create(TransientError("still throttled"), times=10)
    sleeps: list[float] = []

    with pytest.raises(TransientError, match="still throttled"):
        RetryingProvider(fake, attempts=4, sleep=sleeps.append).create(claim(), m5_types(fake), NODE_CLASS)

    assert len(sleeps) == 3
    assert len([c for c in fake.calls if c[0] == "create"]) == 4
    assert fake.launched_total == 0


def test_a_single_attempt_raises_the_first_transient_error_without_waiting() -> None:
    fake = FakeProvider()
    fake.fail_next_create(TransientError("throttled once"))
    sleeps: list[float] = []

    with pytest.raises(TransientError, match="throttled once"):
        RetryingProvider(fake, attempts=1, sleep=sleeps.append).create(claim(), m5_types(fake), NODE_CLASS)

    assert sleeps == []
    assert len([c for c in fake.calls if c[0] == "create"]) == 1


def test_a_call_throttled_once_is_retried_once_after_the_first_backoff() -> None:
    fake = FakeProvider()
    fake.fail_next_create(TransientError("throttled"))
    sleeps: list[float] = []

    provider = RetryingProvider(fake, attempts=2, initial=0.2, sleep=sleeps.append)
    instance = provider.create(claim(), m5_types(fake), NODE_CLASS)

    assert instance.instance_type == "m5.large"
    assert len(sleeps) == 1 and 0.2 <= sleeps[0] <= 0.4, "the wait before retry 1"
    assert len([c for c in fake.calls if c[0] == "create"]) == 2


@pytest.mark.parametrize(
    "error",
    [InsufficientCapacity([OfferingKey("m5.large", "us-east-1a", "on-demand")]), CreateError("bad AMI")],
    ids=["insufficient-capacity", "create-error"],
)
def test_other_errors_are_not_retried(error: CloudProviderError) -> None:
    fake = FakeProvider()
    fake.fail_next_create(error)
    sleeps: list[float] = []

    with pytest.raises(type(error)):
        RetryingProvider(fake, sleep=sleeps.append).create(claim(), m5_types(fake), NODE_CLASS)

    assert sleeps == []
    assert len([c for c in fake.calls if c[0] == "create"]) == 1


def test_not_found_is_not_retried() -> None:
    sleeps: list[float] = []
    with pytest.raises(NotFound):
        RetryingProvider(FakeProvider(), sleep=sleeps.append).get("fake://us-east-1a/nothing")
    assert sleeps == []


def test_backoff_grows_exponentially_with_jitter_and_stays_under_the_maximum() -> None:
    import random

    import tenacity

    wait = backoff(initial=0.2, maximum=5.0, rng=random.Random(7))
    waits = []
    for n in range(1, 10):
        state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = n
        waits.append(wait(state))

    assert 0.2 <= waits[0] <= 0.4
    assert 0.4 <= waits[1] <= 0.6
    assert 0.8 <= waits[2] <= 1.0
    assert max(waits) == 5.0
    assert all(w <= 5.0 for w in waits)


# --- metrics ----------------------------------------------------------------------------------------------


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_metrics_count_calls_by_method_and_outcome() -> None:
    registry = CollectorRegistry()
    fake = FakeProvider()
    provider = MetricsProvider(fake, registry)

    instance = provider.create(claim("a"), m5_types(fake), NODE_CLASS)
    provider.get(instance.provider_id)
    provider.delete(instance.provider_id)
    with pytest.raises(NotFound):
        provider.get(instance.provider_id)

    calls = "provisioner_cloudprovider_calls_total"
    assert sample(registry, calls, provider="fake", method="create", outcome="success") == 1
    assert sample(registry, calls, provider="fake", method="get", outcome="success") == 1
    assert sample(registry, calls, provider="fake", method="get", outcome="NotFound") == 1
    assert sample(registry, calls, provider="fake", method="delete", outcome="success") == 1
    assert (
        sample(registry, "provisioner_cloudprovider_duration_seconds_count", provider="fake", method="get")
        == 2
    )
    assert (
        sample(
            registry,
            "provisioner_cloudprovider_launches_total",
            provider="fake",
            capacity_type="on-demand",
            instance_type="m5.large",
        )
        == 1
    )


def test_metrics_count_launch_failures_by_reason() -> None:
    registry = CollectorRegistry()
    fake = FakeProvider()
    provider = MetricsProvider(fake, registry)
    fake.fail_next_create(CreateError("bad AMI"))
    fake.fail_next_create(InsufficientCapacity([], kind="quota"))
    fake.mark_unavailable()

    for name in ("a", "b", "c"):
        with pytest.raises((CreateError, InsufficientCapacity)):
            provider.create(claim(name), m5_types(fake), NODE_CLASS)

    failures = "provisioner_cloudprovider_launch_failures_total"
    assert sample(registry, failures, provider="fake", reason="create-error") == 1
    assert sample(registry, failures, provider="fake", reason="quota") == 1
    assert sample(registry, failures, provider="fake", reason="insufficient-capacity") == 1
    assert (
        sample(
            registry,
            "provisioner_cloudprovider_errors_total",
            provider="fake",
            method="create",
            error="CreateError",
        )
        == 1
    )


def test_two_metrics_wrappers_share_one_registry() -> None:
    registry = CollectorRegistry()
    MetricsProvider(FakeProvider(), registry).list()
    MetricsProvider(FakeProvider(), registry).list()

    assert (
        sample(
            registry,
            "provisioner_cloudprovider_calls_total",
            provider="fake",
            method="list",
            outcome="success",
        )
        == 2
    )


def test_a_new_registry_never_inherits_the_collectors_of_a_collected_one() -> None:
    # CPython reuses the address (the id) of a collected object: a cache keyed by id would hand the new
    # registry the old one's collectors, and its samples would go nowhere.
    for _ in range(20):
        registry = CollectorRegistry()
        MetricsProvider(FakeProvider(), registry).list()
        calls = sample(
            registry,
            "provisioner_cloudprovider_calls_total",
            provider="fake",
            method="list",
            outcome="success",
        )
        assert calls == 1
        del registry
        gc.collect()


# --- the unavailable-offerings cache around create --------------------------------------------------------


def test_caching_provider_remembers_stockouts_and_skips_them_until_the_ttl_passes() -> None:
    now = [T0]
    fake = FakeProvider()
    cache = UnavailableOfferings()
    provider = CachingProvider(fake, cache, clock=lambda: now[0])
    fake.mark_unavailable(instance_type="m5.large", capacity_type="on-demand")

    first = provider.create(claim("a"), m5_types(fake), NODE_CLASS)
    assert first.instance_type == "m5.xlarge"
    assert {k.zone for k in first.skipped} == set(fake.zones)

    large = next(t for t in provider.instance_types(NODE_CLASS) if t.name == "m5.large")
    assert not any(o.available for o in large.offerings if o.capacity_type == "on-demand")
    assert all(o.available for o in large.offerings if o.capacity_type == "spot")

    fake.mark_available()
    now[0] = T0 + timedelta(minutes=3)
    large = next(t for t in provider.instance_types(NODE_CLASS) if t.name == "m5.large")
    assert all(o.available for o in large.offerings)


def test_caching_provider_marks_the_offerings_of_an_insufficient_capacity_error() -> None:
    fake = FakeProvider()
    provider = CachingProvider(fake, UnavailableOfferings(), clock=lambda: T0)
    fake.mark_unavailable(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand")
    only_large = node_claim("b", ["m5.large"], node_class=NODE_CLASS, zones=("us-east-1a",))

    with pytest.raises(InsufficientCapacity):
        provider.create(only_large, m5_types(fake), NODE_CLASS)

    assert provider.cache.is_unavailable(OfferingKey("m5.large", "us-east-1a", "on-demand"), now=T0)
    assert not provider.cache.is_unavailable(OfferingKey("m5.large", "us-east-1b", "on-demand"), now=T0)


def test_caching_provider_does_not_send_cached_offerings_to_the_cloud() -> None:
    fake = FakeProvider()
    cache = UnavailableOfferings()
    cache.mark([OfferingKey("m5.large", z, "on-demand") for z in ("us-east-1a", "us-east-1b")], now=T0)
    provider = CachingProvider(fake, cache, clock=lambda: T0)

    instance = provider.create(claim("a", zones=("us-east-1a", "us-east-1b")), m5_types(fake), NODE_CLASS)

    # The cloud still had m5.large, but the cache says no: the next option is launched without asking.
    assert instance.instance_type == "m5.xlarge"


def test_the_wrapped_stack_is_a_cloud_provider_and_forwards_extras() -> None:
    fake = FakeProvider()
    stack = wrap(fake, registry=CollectorRegistry(), sleep=lambda _s: None)

    assert isinstance(stack, CloudProvider)
    assert stack.name == "fake"
    stack.set_capacity(count=0)  # a FakeProvider knob, reached through every wrapper
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="spot") == 0


# --- group launches through the stack ---------------------------------------------------------------------


def test_a_group_launch_is_retried_counted_and_its_stockouts_cached() -> None:
    fake = FakeProvider()
    registry = CollectorRegistry()
    stack = wrap(fake, registry=registry, clock=lambda: T0, sleep=lambda _s: None)
    fake.set_capacity(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", count=1)
    fake.fail_next_create(TransientError("throttled"))
    gang = [claim(f"g-{i}", zones=("us-east-1a",)) for i in range(2)]

    instances = stack.create_group(gang, m5_types(fake), NODE_CLASS)

    assert [(i.nodeclaim, i.instance_type) for i in instances] == [("g-0", "m5.xlarge"), ("g-1", "m5.xlarge")]
    assert stack.cache.is_unavailable(OfferingKey("m5.large", "us-east-1a", "on-demand"), now=T0)
    launched = registry.get_sample_value(
        "provisioner_cloudprovider_launches_total",
        {"provider": "fake", "capacity_type": "on-demand", "instance_type": "m5.xlarge"},
    )
    assert launched == 2


def test_a_group_launch_that_fits_nowhere_marks_every_offering_tried_and_counts_a_failure() -> None:
    fake = FakeProvider()
    registry = CollectorRegistry()
    stack = wrap(fake, registry=registry, clock=lambda: T0)
    fake.set_capacity(zone="us-east-1a", capacity_type="on-demand", count=1)
    gang = [claim(f"g-{i}", zones=("us-east-1a",)) for i in range(2)]

    with pytest.raises(InsufficientCapacity):
        stack.create_group(gang, m5_types(fake), NODE_CLASS)

    for name in ("m5.large", "m5.xlarge"):
        assert stack.cache.is_unavailable(OfferingKey(name, "us-east-1a", "on-demand"), now=T0)
    assert fake.list() == []
    failures = registry.get_sample_value(
        "provisioner_cloudprovider_launch_failures_total",
        {"provider": "fake", "reason": "insufficient-capacity"},
    )
    assert failures == 1
