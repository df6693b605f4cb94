"""Cross-cutting work around any CloudProvider: retries, metrics and the unavailable-offerings cache.

Each wrapper is itself a CloudProvider and forwards every other attribute to the provider it wraps (so
`wrapped.region_instance_types()` or the fake's knobs still work). `wrap()` stacks them in the order the
controllers want:

    MetricsProvider(CachingProvider(RetryingProvider(provider)))

Retries innermost, so a throttled call retried three times is one call to the cache and one sample in
the metrics; the cache outside the retries, so it sees only the final InsufficientCapacity.
"""

from __future__ import annotations

import builtins
import random
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import tenacity
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from provisioner import crashpoints
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.errors import (
    CreateError,
    InsufficientCapacity,
    NodeClassNotReady,
    NotFound,
    TransientError,
)
from provisioner.cloudprovider.protocol import CloudProvider, GangPlacement, Instance, InterruptionEvent
from provisioner.cloudprovider.types import InstanceType
from provisioner.cloudprovider.unavailable import UnavailableOfferings

T = TypeVar("T")


class Forwarding:
    """A CloudProvider that hands every call to the one it wraps, and unknown attributes too: a wrapper
    overrides only the calls it changes."""

    def __init__(self, provider: CloudProvider) -> None:
        self.provider = provider
        self.name: str = provider.name

    def __getattr__(self, item: str) -> Any:
        # Only called for attributes not found on the wrapper itself. `provider` itself missing means we
        # are half-built (copy, pickle): do not recurse.
        if item == "provider":
            raise AttributeError(item)
        return getattr(self.provider, item)

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        return self.provider.instance_types(node_class)

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        return self.provider.create(claim, instance_types, node_class)

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        return self.provider.create_group(claims, instance_types, node_class, placement=placement)

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        return self.provider.collect_placement(older_than=older_than)

    def delete(self, provider_id: str) -> None:
        self.provider.delete(provider_id)

    def get(self, provider_id: str) -> Instance:
        return self.provider.get(provider_id)

    def list(self) -> builtins.list[Instance]:
        return self.provider.list()

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        return self.provider.is_drifted(claim, node_class)

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        return self.provider.interruptions()


def backoff(
    *,
    initial: float,
    maximum: float,
    rng: random.Random | None = None,
) -> Callable[[tenacity.RetryCallState], float]:
    """Exponential backoff with jitter, bounded: before retry n (1-based) wait
    `min(maximum, initial * 2**(n-1) + uniform(0, initial))` seconds. Jitter spreads the retries of many
    controllers hitting one throttled API; the bound keeps a long outage from parking a launch for minutes."""
    source = rng or random.Random()

    def wait(state: tenacity.RetryCallState) -> float:
        n: int = max(1, state.attempt_number)
        return min(maximum, initial * 2.0 ** (n - 1) + source.uniform(0, initial))

    return wait


class RetryingProvider(Forwarding):
    """Retries TransientError (throttling, 5xx, timeouts) with exponential backoff and jitter, at most
    `attempts` calls in all, each wait at most `maximum` seconds; every other error passes at once. The
    last TransientError is re-raised when the attempts run out."""

    def __init__(
        self,
        provider: CloudProvider,
        *,
        attempts: int = 5,
        initial: float = 0.2,
        maximum: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(provider)
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.attempts = attempts
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=backoff(initial=initial, maximum=maximum),
            retry=tenacity.retry_if_exception_type(TransientError),
            sleep=sleep,
            reraise=True,
        )

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # Nearly every call succeeds or fails for good at once: it runs bare, without tenacity's
        # per-call bookkeeping (a tenth of a millisecond, on every cloud call of a large fleet). Only a
        # TransientError hands over to tenacity, whose first attempt re-raises it instead of calling
        # again, so the waits and the bound on attempts are exactly those of a call retried from the
        # start.
        try:
            return fn(*args, **kwargs)
        except TransientError as err:
            first: list[TransientError] = [err]

        def attempt() -> T:
            if first:
                raise first.pop()
            return fn(*args, **kwargs)

        return self._retrying(attempt)

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        return self._call(self.provider.instance_types, node_class)

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        # Safe to repeat: create is idempotent by claim name (the protocol's contract).
        return self._call(self.provider.create, claim, instance_types, node_class)

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        # Safe to repeat: all or nothing, and idempotent by the claims' names.
        return self._call(self.provider.create_group, claims, instance_types, node_class, placement=placement)

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        return self._call(self.provider.collect_placement, older_than=older_than)

    def delete(self, provider_id: str) -> None:
        self._call(self.provider.delete, provider_id)

    def get(self, provider_id: str) -> Instance:
        return self._call(self.provider.get, provider_id)

    def list(self) -> builtins.list[Instance]:
        return self._call(self.provider.list)

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        return self._call(self.provider.is_drifted, claim, node_class)

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        # Not retried: a failed poll is simply polled again on the controller's next tick.
        return self.provider.interruptions()


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "provisioner_cloudprovider_calls_total",
            "CloudProvider calls by provider, method and outcome (success or the error type).",
            ["provider", "method", "outcome"],
            registry=registry,
        )
        self.errors = Counter(
            "provisioner_cloudprovider_errors_total",
            "CloudProvider errors by provider, method and error type.",
            ["provider", "method", "error"],
            registry=registry,
        )
        self.duration = Histogram(
            "provisioner_cloudprovider_duration_seconds",
            "Duration of CloudProvider calls.",
            ["provider", "method"],
            registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.launch_failures = Counter(
            "provisioner_cloudprovider_launch_failures_total",
            "Failed creates by provider and reason (insufficient-capacity, quota, create-error, ...).",
            ["provider", "reason"],
            registry=registry,
        )
        self.launches = Counter(
            "provisioner_cloudprovider_launches_total",
            "Instances launched by provider, capacity type and instance type.",
            ["provider", "capacity_type", "instance_type"],
            registry=registry,
        )


# One set of collectors per registry: prometheus-client refuses to register a name twice. Keyed weakly by
# the registry itself: an id() would be reused by a new registry once an old one is collected.
_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, _Metrics] = weakref.WeakKeyDictionary()


def _metrics_for(registry: CollectorRegistry) -> _Metrics:
    if registry not in _METRICS:
        _METRICS[registry] = _Metrics(registry)
    return _METRICS[registry]


def launch_failure_reason(err: BaseException) -> str:
    """A low-cardinality label for why a create failed."""
    if isinstance(err, InsufficientCapacity):
        return "quota" if err.kind == "quota" else "insufficient-capacity"
    if isinstance(err, NodeClassNotReady):
        return "nodeclass-not-ready"
    if isinstance(err, TransientError):
        return "transient"
    if isinstance(err, CreateError):
        return "create-error"
    return "other"


class MetricsProvider(Forwarding):
    """Counts every call by method and outcome, times it, and counts launches and launch failures.

    Metrics (labels): `provisioner_cloudprovider_calls_total` (provider, method, outcome),
    `provisioner_cloudprovider_errors_total` (provider, method, error),
    `provisioner_cloudprovider_duration_seconds` (provider, method),
    `provisioner_cloudprovider_launch_failures_total` (provider, reason),
    `provisioner_cloudprovider_launches_total` (provider, capacity_type, instance_type).
    NotFound from get/delete is counted as an outcome too: the caller decides whether it is an error.
    """

    def __init__(
        self,
        provider: CloudProvider,
        registry: CollectorRegistry | None = None,
        *,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(provider)
        self.registry = registry if registry is not None else REGISTRY
        self.metrics = _metrics_for(self.registry)
        self._timer = timer
        self._labelled: dict[tuple[str, str], tuple[Histogram, Counter]] = {}
        """Per (provider, method), the duration and success series every call touches: looked up once,
        not on every call (a label lookup takes a lock and formats the labels)."""

    def _call(self, method: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        name = self.provider.name
        series = self._labelled.get((name, method))
        if series is None:
            series = self._labelled[(name, method)] = (
                self.metrics.duration.labels(name, method),
                self.metrics.calls.labels(name, method, "success"),
            )
        duration, succeeded = series
        start = self._timer()
        try:
            result = fn(*args, **kwargs)
        except Exception as err:
            error = type(err).__name__
            self.metrics.calls.labels(name, method, error).inc()
            self.metrics.errors.labels(name, method, error).inc()
            if method in ("create", "create_group") and not isinstance(err, NotFound):
                self.metrics.launch_failures.labels(name, launch_failure_reason(err)).inc()
            raise
        finally:
            duration.observe(max(0.0, self._timer() - start))
        succeeded.inc()
        return result

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        return self._call("instance_types", self.provider.instance_types, node_class)

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        instance = self._call("create", self.provider.create, claim, instance_types, node_class)
        self.metrics.launches.labels(self.provider.name, instance.capacity_type, instance.instance_type).inc()
        crashpoints.reached("launch-called")
        return instance

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        instances = self._call(
            "create_group",
            self.provider.create_group,
            claims,
            instance_types,
            node_class,
            placement=placement,
        )
        for instance in instances:
            self.metrics.launches.labels(
                self.provider.name, instance.capacity_type, instance.instance_type
            ).inc()
        crashpoints.reached("launch-called")
        return instances

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        return self._call("collect_placement", self.provider.collect_placement, older_than=older_than)

    def delete(self, provider_id: str) -> None:
        self._call("delete", self.provider.delete, provider_id)
        crashpoints.reached("instance-deleted")

    def get(self, provider_id: str) -> Instance:
        return self._call("get", self.provider.get, provider_id)

    def list(self) -> builtins.list[Instance]:
        return self._call("list", self.provider.list)

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        return self._call("is_drifted", self.provider.is_drifted, claim, node_class)

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        return self._call("interruptions", self.provider.interruptions)


class CachingProvider(Forwarding):
    """Applies the unavailable-offerings cache: `instance_types()` comes back with cached offerings
    flagged unavailable, `create()` skips them, and an InsufficientCapacity from `create()` marks the
    offerings it names (for its kind's TTL) before it propagates; so do the `skipped` offerings of an
    Instance that launched after meeting stockouts."""

    def __init__(
        self,
        provider: CloudProvider,
        cache: UnavailableOfferings | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(provider)
        self.cache = cache if cache is not None else UnavailableOfferings()
        self._clock = clock or (lambda: datetime.now(UTC))

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        return self.cache.apply(self.provider.instance_types(node_class), now=self._clock())

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        options = self.cache.apply(instance_types, now=self._clock())
        try:
            instance = self.provider.create(claim, options, node_class)
        except InsufficientCapacity as err:
            self.cache.mark_error(err, now=self._clock())
            raise
        if instance.skipped:
            # Stockouts met on the way to this launch: the next claim should not walk into them again.
            self.cache.mark(instance.skipped, now=self._clock(), kind="capacity")
        return instance

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        # An offering marked here ran out for a whole group: a smaller one might still fit there, but
        # the next attempt of the gang should try elsewhere first (the same TTL as a single launch).
        options = self.cache.apply(instance_types, now=self._clock())
        try:
            instances = self.provider.create_group(claims, options, node_class, placement=placement)
        except InsufficientCapacity as err:
            self.cache.mark_error(err, now=self._clock())
            raise
        skipped = tuple(dict.fromkeys(k for i in instances for k in i.skipped))
        if skipped:
            self.cache.mark(skipped, now=self._clock(), kind="capacity")
        return instances


def wrap(
    provider: CloudProvider,
    *,
    cache: UnavailableOfferings | None = None,
    clock: Callable[[], datetime] | None = None,
    registry: CollectorRegistry | None = None,
    retry: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> MetricsProvider:
    """The stack the controllers run: metrics over the cache over retries over the provider."""
    inner: CloudProvider = RetryingProvider(provider, sleep=sleep) if retry else provider
    return MetricsProvider(CachingProvider(inner, cache, clock), registry)
