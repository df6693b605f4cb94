"""The launch step: a NodeClaim without an instance gets one (Karpenter's `lifecycle/launch.go`).

`provider.create` with the claim's options (the claim name is the idempotency token, so a controller
restarted between the launch and the status write gets the same instance back). An InsufficientCapacity
marks those offerings unavailable (the CachingProvider wrapper also remembers them, so the next solve
avoids them) and the next option is tried; when none is left the claim is replaced, so its pods fall to
the next tier or pool. Any other failure sets `Launched=False` with its reason (once) and backs off,
doubling up to `launch_backoff_max`. When the launch fell back from the offering the scheduler priced,
an Event says so. A gang's claims launch together through `gang_launch`, which uses this step's
back-off, failure and success bookkeeping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, quantities
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import LAUNCHED
from provisioner.cloudprovider import (
    CloudProviderError,
    CreateError,
    Instance,
    InstanceType,
    InsufficientCapacity,
    NodeClassNotReady,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.types import for_template
from provisioner.controllers.conditions import condition_status, condition_time
from provisioner.controllers.lifecycle.step import Pass, Step, log, step_condition, summary
from provisioner.controllers.provider_set import node_class_of


@dataclass(kw_only=True, eq=False)
class Launch(Step):
    # Claim -> (failed launches, not before): a failing launch backs off instead of calling the cloud
    # every step (in memory only: a restart tries at once, which is what a restart is for).
    _retry: dict[str, tuple[int, datetime]] = field(default_factory=dict, init=False)

    def reconcile(self, claim: NodeClaim, p: Pass) -> bool:
        if claim.status.provider_id:
            return False
        now = p.now
        if condition_time(claim, LAUNCHED) is None:
            # Start the launch clock durably, so a restarted controller keeps counting from here.
            conditions = step_condition(
                claim.status.conditions, LAUNCHED, None, reason="Launching", message="", now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
        if now < self.not_before(claim.name, now):
            return False
        ref = claim.spec.node_class_ref
        provider = self.providers.for_claim(claim)
        node_class = node_class_of(p.snap, ref.kind, ref.name)
        if provider is None or node_class is None:
            what = f"no cloud serves {ref.kind}" if provider is None else f"{ref.kind} {ref.name} not found"
            self.failed(claim, "NodeClassNotFound", what, now)
            return False
        try:
            # The claim carries its pool's template labels: a MIG layout there makes its types offer slices.
            by_name = {
                t.name: t for t in for_template(claim.metadata.labels, provider.instance_types(node_class))
            }
        except CloudProviderError as err:
            self.failed(claim, type(err).__name__, str(err), now)
            return False
        options = [by_name[n] for n in claim.instance_type_options() if n in by_name]
        if not options:
            options = list(by_name.values()) if not claim.instance_type_options() else []
        exhausted: set[OfferingKey] = set()
        instance: Instance | None = None
        for _ in range(self.settings.max_launch_attempts):
            try:
                instance = provider.create(claim, _flag_unavailable(options, exhausted), node_class)
                break
            except InsufficientCapacity as err:
                new = set(err.offerings) - exhausted
                self.metrics.launch_failures.labels(reason="InsufficientCapacity").inc(max(1, len(new)))
                if not new:
                    break
                exhausted |= new
                log.info("NodeClaim %s: no capacity for %s; trying the next option", claim.name, err)
            except (CreateError, NodeClassNotReady) as err:
                self.metrics.launch_failures.labels(reason=type(err).__name__).inc()
                self.failed(claim, type(err).__name__, str(err), now)
                return False
            except TransientError as err:
                self.metrics.launch_failures.labels(reason="TransientError").inc()
                log.warning("NodeClaim %s: launch will be retried: %s", claim.name, err)
                self.back_off(claim.name, now)
                return False
        if instance is None:
            tried = summary(exhausted) or "every option"
            self.replace(
                claim,
                reason="InsufficientCapacity",
                message=(
                    f"no capacity for any of its options (tried {tried}); "
                    "its pods will be provisioned again on the next tier or pool"
                ),
            )
            return True
        self.launched(claim, instance, by_name.get(instance.instance_type), exhausted, now)
        return False

    def not_before(self, name: str, now: datetime) -> datetime:
        """When the claim's next launch may be tried (now, unless it is backing off)."""
        return self._retry.get(name, (0, now))[1]

    def back_off(self, name: str, now: datetime) -> None:
        failures = self._retry.get(name, (0, now))[0] + 1
        delay = min(self.settings.launch_backoff_max, self.settings.launch_backoff * 2 ** (failures - 1))
        self._retry[name] = (failures, now + delay)

    def failed(self, claim: NodeClaim, reason: str, message: str, now: datetime) -> None:
        """A launch failed for a reason other than capacity: back off, and say why (once per reason)."""
        self.back_off(claim.name, now)
        if condition_status(claim, LAUNCHED) == "False" and any(
            c.type == LAUNCHED and c.reason == reason for c in claim.status.conditions
        ):
            return
        conditions = step_condition(
            claim.status.conditions, LAUNCHED, False, reason=reason, message=message, now=now
        )
        self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
        self.cluster.record_event(
            kind="NodeClaim", name=claim.name, reason=reason, message=message, type="Warning"
        )

    def launched(
        self,
        claim: NodeClaim,
        instance: Instance,
        instance_type: InstanceType | None,
        exhausted: set[OfferingKey],
        now: datetime,
    ) -> None:
        """Write what the cloud launched on the claim: its labels, its status, `Launched=True`."""
        self._retry.pop(claim.name, None)
        capacity, allocatable = _resources_of(instance_type) if instance_type else ({}, {})
        labels = dict(instance_type.labels) if instance_type else {}
        labels.update(
            {
                wk.INSTANCE_TYPE: instance.instance_type,
                wk.ZONE: instance.zone,
                wk.CAPACITY_TYPE: instance.capacity_type,
            }
        )
        labels.update(instance.labels)  # what only the cloud knows (network topology), when it told us
        if instance.reservation_id:
            labels[wk.CAPACITY_RESERVATION_ID] = instance.reservation_id
            labels[wk.CAPACITY_RESERVATION_TYPE] = instance.reservation_type or wk.RESERVATION_TYPE_DEFAULT
        self.cluster.patch_nodeclaim(claim.name, {"metadata": {"labels": labels}})
        status: dict[str, Any] = {
            "providerID": instance.provider_id,
            "instanceType": instance.instance_type,
            "zone": instance.zone,
            "capacityType": instance.capacity_type,
            "pricePerHour": instance.price,
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": step_condition(
                claim.status.conditions,
                LAUNCHED,
                True,
                reason="Launched",
                message=f"{instance.instance_type} {instance.capacity_type} in {instance.zone}",
                now=now,
            ),
        }
        if instance.image_id:
            status["imageID"] = instance.image_id
        self.cluster.patch_nodeclaim_status(claim.name, status)
        log.info(
            "launched NodeClaim %s as %s (%s %s in %s, $%.4f/h)",
            claim.name,
            instance.provider_id,
            instance.instance_type,
            instance.capacity_type,
            instance.zone,
            instance.price,
        )
        planned = claim.metadata.annotations.get(wk.PLANNED_OFFERING)
        got = f"{instance.instance_type}/{instance.zone}/{instance.capacity_type}"
        if planned and planned != got:
            p_type, _, rest = planned.partition("/")
            p_zone, _, p_ct = rest.partition("/")
            message = (
                f"{p_ct} capacity for {p_type} in {p_zone} was not available; launched "
                f"{instance.capacity_type} {instance.instance_type} in {instance.zone} instead"
            )
            if exhausted:
                message += f" (no capacity: {summary(exhausted)})"
            self.cluster.record_event(kind="NodeClaim", name=claim.name, reason="FellBack", message=message)


def _flag_unavailable(types: list[InstanceType], gone: set[OfferingKey]) -> list[InstanceType]:
    return [
        t.with_offerings(
            tuple(replace(o, available=False) if o.offering_key(t.name) in gone else o for o in t.offerings)
        )
        for t in types
    ]


def _resources_of(instance_type: InstanceType) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a type as quantity strings, for a claim's status."""

    def fmt(rl: Mapping[str, int]) -> dict[str, str]:
        return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items()) if v > 0}

    return fmt(instance_type.capacity), fmt(instance_type.allocatable)
