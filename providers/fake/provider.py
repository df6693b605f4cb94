"""FakeProvider: the CloudProvider protocol over in-memory state.

How it chooses: in the launch order every provider follows (provisioner.cloudprovider.launch_order:
reserved, then the cheapest of spot and on-demand, as the claim allows, offerings flagged
unavailable skipped). An offering out of capacity here is skipped and named in the InsufficientCapacity
raised when none is left. A group (`create_group`, a gang) launches whole under one lock in the first
offering with room for all of it, or not at all; a NodeClass asking for a placement group per gang gets
one (`placement_groups`), collected by `collect_placement` once no instance is in it.

Like a real cloud, `instance_types()` does not reveal stockouts unless built with `reveal_stockouts=True`:
a controller learns of them from create's InsufficientCapacity (and the unavailable-offerings cache).
What each offering can still launch (capacity limits, stockouts, reservations and their free counts) is
kept by the provider's `CapacityBook` (providers/fake/capacity.py).

With `state_path`, the instances (and how many launches each claim had) are kept in a journal
(providers/fake/saved.py), a line appended at every launch and termination and replayed at construction: a
restarted `provisioner run --cloud fake --fake-state PATH` sees the instances its killed predecessor
launched, as it would on a real cloud.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from providers.fake import saved
from providers.fake.capacity import CapacityBook, Selector
from provisioner.api import labels
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import catalog as catalog_
from provisioner.cloudprovider.errors import (
    CloudProviderError,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
)
from provisioner.cloudprovider.group import check_claims, pinned_order
from provisioner.cloudprovider.launch_order import Attempt, launch_order
from provisioner.cloudprovider.protocol import GangPlacement, Instance, InterruptionEvent
from provisioner.cloudprovider.types import InstanceType, Offering, Reservation

EFA_INTERFACES = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "trn1.32xlarge": 8,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
}
"""EFA interfaces of the AWS types that have them (EC2's MaximumEfaInterfaces): what an AWSNodeClass
with `placement.efa` offers as `vpc.amazonaws.com/efa` here, as the AWS provider does."""

LaunchHook = Callable[[Instance, InstanceType], None]
DeleteHook = Callable[[Instance], None]


class FakeProvider:
    """An in-memory cloud with a catalog, finite capacity, stockouts, failure and interruption
    injection, and a call log. Provider ids are `fake://ZONE/NAME`, NAME being the claim's name."""

    name = "fake"

    def __init__(
        self,
        *,
        catalog: str = "aws",
        region: str | None = None,
        instance_types: list[InstanceType] | None = None,
        cluster_name: str = "sim",
        clock: Callable[[], datetime] | None = None,
        reveal_stockouts: bool = False,
        on_launch: LaunchHook | None = None,
        on_delete: DeleteHook | None = None,
        state_path: str | None = None,
    ) -> None:
        self.region = region or (catalog_.default_region(catalog) if instance_types is None else None)
        types = instance_types if instance_types is not None else catalog_.load(catalog, region)
        self._types: dict[str, InstanceType] = {t.name: t for t in types}
        self.cluster_name = cluster_name
        self._clock = clock or (lambda: datetime.now(UTC))
        self.reveal_stockouts = reveal_stockouts
        self.on_launch = on_launch
        """Called with (instance, its InstanceType) after each launch, e.g. to register a Node."""
        self.on_delete = on_delete
        """Called with the instance after each delete."""
        self.calls: list[tuple[str, ...]] = []
        """Every protocol call, in order: ("create", claim), ("delete", provider_id), ("list",)..."""
        self.launched_total = 0
        """Instances launched since construction (a retried create that returns the first one is not counted)."""
        self._lock = threading.RLock()
        self._instances: dict[str, Instance] = {}
        self._by_claim: dict[str, str] = {}
        self._capacity = CapacityBook(self._types)
        self._failures: list[CloudProviderError] = []
        self._interruptions: list[InterruptionEvent] = []
        self._drift: dict[str, str] = {}
        self.cloud_labels: dict[str, str] = {}
        """Labels every instance launched from now on reports (`Instance.labels`: network topology)."""
        self.placement_groups: dict[str, datetime] = {}
        """Placement groups made per gang (the NodeClass's `groupPerGang`/`compactPerGang`) -> when."""
        self.launches_by_claim: dict[str, int] = {}
        """Instances launched per claim name, over every process that shared `state_path`."""
        self.state_path = state_path
        self._saved = saved.State(self._instances, self.launches_by_claim, self._by_claim)
        self._journal = saved.Journal(state_path) if state_path is not None else None
        if self._journal is not None:
            with self._journal.locked():
                self._catch_up()

    # --- knobs for tests and the simulator ---------------------------------------------------------------

    def set_capacity(
        self,
        *,
        instance_type: str | None = None,
        zone: str | None = None,
        capacity_type: str | None = None,
        count: int | None,
    ) -> None:
        """Each matching offering can launch `count` more instances (None: unlimited again). Deleting an
        instance gives its slot back."""
        with self._lock:
            self._capacity.set_capacity(Selector(instance_type, zone, capacity_type), count)

    def mark_unavailable(
        self,
        *,
        instance_type: str | None = None,
        zone: str | None = None,
        capacity_type: str | None = None,
    ) -> None:
        """A stockout: launching a matching offering fails with InsufficientCapacity until marked available."""
        with self._lock:
            self._capacity.mark_unavailable(Selector(instance_type, zone, capacity_type))

    def mark_available(
        self,
        *,
        instance_type: str | None = None,
        zone: str | None = None,
        capacity_type: str | None = None,
    ) -> None:
        """End a stockout for the matching offerings."""
        with self._lock:
            self._capacity.mark_available(Selector(instance_type, zone, capacity_type))

    def add_reservation(
        self,
        reservation_id: str,
        *,
        instance_type: str,
        zone: str,
        count: int,
        kind: str = labels.RESERVATION_TYPE_DEFAULT,
        ends_at: datetime | None = None,
    ) -> None:
        """A reservation of `count` instances of the type in the zone (paid for: its hourly price is
        the type's on-demand price there). Adding an id again changes it (count, end)."""
        with self._lock:
            self._capacity.add_reservation(
                reservation_id,
                instance_type=instance_type,
                zone=zone,
                count=count,
                kind=kind,
                ends_at=ends_at,
            )

    def end_reservation(self, reservation_id: str) -> None:
        """The reservation ends: it offers nothing more (instances in it keep running, as on-demand
        would after an ODCR is cancelled; a Capacity Block's are taken back by the caller)."""
        with self._lock:
            self._capacity.end_reservation(reservation_id)

    def reservations(self) -> builtins.list[Reservation]:
        """The live reservations with their free counts now."""
        with self._lock:
            return self._capacity.reservations()

    def fail_next_create(self, error: CloudProviderError, *, times: int = 1) -> None:
        """The next `times` creates raise `error` (before any capacity is used)."""
        with self._lock:
            self._failures.extend([error] * times)

    def clear_failures(self) -> None:
        """Forget the failures `fail_next_create` queued and not yet raised (the outage is over)."""
        with self._lock:
            self._failures.clear()

    def interrupt(
        self,
        provider_id: str,
        kind: str = "spot-interruption",
        *,
        detail: str = "",
        reclaim: bool = False,
    ) -> None:
        """Queue an interruption event for the instance; `interruptions()` returns it once. With
        `reclaim`, the cloud also takes the instance back at once (a GCP preemption, or the end of an AWS
        spot warning): it disappears and `on_delete` is called."""
        with self._lock:
            self._interruptions.append(
                InterruptionEvent(provider_id=provider_id, kind=kind, time=self._clock(), detail=detail)
            )
        if reclaim:
            self._terminate(provider_id)

    def report_labels(self, provider_id: str, labels: dict[str, str]) -> None:
        """The cloud reports these labels for a launched instance from now on (AWS reports network
        topology only once an instance is running, not in the launch's answer)."""
        with self._lock:
            instance = self._instances[provider_id]
            self._instances[provider_id] = replace(instance, labels={**instance.labels, **labels})

    def set_drifted(self, provider_id: str, reason: str | None) -> None:
        """Make `is_drifted` answer `reason` for the claim launched as this instance (None clears it)."""
        with self._lock:
            if reason is None:
                self._drift.pop(provider_id, None)
            else:
                self._drift[provider_id] = reason

    def remaining(self, *, instance_type: str, zone: str, capacity_type: str) -> int | None:
        """How many more instances the offering can launch (None: unlimited; 0 when stocked out)."""
        with self._lock:
            return self._capacity.remaining(OfferingKey(instance_type, zone, capacity_type))

    @property
    def zones(self) -> builtins.list[str]:
        """Every zone some offering is in, sorted."""
        return sorted({o.zone for t in self._types.values() for o in t.offerings})

    @property
    def catalog(self) -> builtins.list[InstanceType]:
        """The types this cloud has, as loaded (no availability flags applied)."""
        return list(self._types.values())

    def region_instance_types(self) -> builtins.list[InstanceType]:
        """Every type of the region without a NodeClass (what `provisioner catalog --cloud fake` prints)."""
        with self._lock:
            self.calls.append(("region_instance_types",))
            return self._capacity.with_reservations(list(self._types.values()))

    # --- the CloudProvider protocol ----------------------------------------------------------------------

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        types = self._instance_types(node_class)
        # Any kind's `spec.placement`, read by its fields: the fake launches pools of every kind.
        placement = getattr(node_class.spec, "placement", None)
        if not getattr(placement, "efa", False):
            return types
        return [
            replace(t, capacity={**t.capacity, labels.EFA_RESOURCE: EFA_INTERFACES[t.name]})
            if t.name in EFA_INTERFACES
            else t
            for t in types
        ]

    def _instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        with self._lock:
            self.calls.append(("instance_types", node_class.name))
            if not self.reveal_stockouts:
                return self._capacity.with_reservations(list(self._types.values()))
            return self._capacity.with_reservations(
                [
                    t.with_offerings(
                        tuple(
                            replace(o, available=False)
                            if self._capacity.exhausted(o.offering_key(t.name))
                            else o
                            for o in t.offerings
                        )
                    )
                    for t in self._types.values()
                ]
            )

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        launched: tuple[Instance, InstanceType] | None = None
        tried: builtins.list[OfferingKey] = []
        with self._lock:
            self.calls.append(("create", claim.name))
            existing = self._by_claim.get(claim.name)
            if existing is not None and existing in self._instances:
                # The claim launched already (the name is the idempotency token): the same instance, and
                # the hook again, as whoever launched it may have died before its Node was registered.
                instance = self._instances[existing]
                known = self._type_of(instance, instance_types)
                if known is None:
                    return instance
                launched = (instance, known)
            else:
                if self._failures:
                    raise self._failures.pop(0)
                for attempt in launch_order(claim, instance_types).attempts:
                    if self._capacity.exhausted(attempt.key):
                        tried.append(attempt.key)
                        continue
                    instance = self._launch(
                        claim, attempt.instance_type, attempt.offering, node_class, skipped=tuple(tried)
                    )
                    launched = (instance, attempt.instance_type)
                    break
            hook = self.on_launch
        if launched is not None:
            # Outside the lock: the hook may register a Node in a cluster that calls back into us.
            if hook is not None:
                hook(*launched)
            return launched[0]
        if not tried:
            options = ", ".join(t.name for t in instance_types) or "none"
            raise InsufficientCapacity(
                [], f"no available offering of {options} is allowed by claim {claim.name}'s requirements"
            )
        raise InsufficientCapacity(tried)

    def _type_of(self, instance: Instance, offered: Sequence[InstanceType]) -> InstanceType | None:
        """The type an instance was launched as: as the caller offers it (with its pool's MIG layout),
        else the catalog's."""
        return next((t for t in offered if t.name == instance.instance_type), None) or self._types.get(
            instance.instance_type
        )

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        """All the claims in one offering with room for every one of them, or InsufficientCapacity and
        nothing launched. Claims already launched keep their instances; the others join their offering."""
        check_claims(claims)
        names = [c.name for c in claims]
        launched: builtins.list[tuple[Instance, InstanceType]] = []
        tried: builtins.list[OfferingKey] = []
        with self._lock:
            self.calls.append(("create_group", *names))
            existing = {
                c.name: self._instances[self._by_claim[c.name]]
                for c in claims
                if self._by_claim.get(c.name) in self._instances
            }
            # Launched already: the hook again, as whoever launched them may have died before their Nodes
            # were registered.
            again = [(i, t) for i in existing.values() if (t := self._type_of(i, instance_types)) is not None]
            missing, attempts, _ = pinned_order(claims, instance_types, existing, placement)
            if missing:
                if self._failures:
                    raise self._failures.pop(0)
                launched, tried = self._launch_gang(missing, attempts, existing, node_class, placement)
            hook = self.on_launch
        if missing and not launched:
            if not tried:
                options = ", ".join(t.name for t in instance_types) or "none"
                raise InsufficientCapacity(
                    [], f"no available offering of {options} is allowed by every claim of {', '.join(names)}"
                )
            raise InsufficientCapacity(
                tried, f"no offering has room for {len(missing)} instances: {', '.join(map(str, tried))}"
            )
        if hook is not None:
            for instance, it in [*again, *launched]:
                hook(instance, it)
        return [existing[n] for n in names]

    def _launch_gang(
        self,
        missing: Sequence[NodeClaim],
        attempts: Sequence[Attempt],
        existing: dict[str, Instance],
        node_class: NodeClass,
        placement: GangPlacement | None,
    ) -> tuple[builtins.list[tuple[Instance, InstanceType]], builtins.list[OfferingKey]]:
        """Under the lock: the missing claims of a gang in the first offering with room for them all, into
        `existing`; (what was launched, the offerings tried without room)."""
        launched: builtins.list[tuple[Instance, InstanceType]] = []
        tried: builtins.list[OfferingKey] = []
        running = next(iter(existing.values()), None)
        group = (placement.group if placement else None) or (running.placement_group if running else None)
        group = group or self._placement_group(node_class, placement)
        for attempt in attempts:
            room = self._capacity.room(attempt.key)
            if room is not None and room < len(missing):
                tried.append(attempt.key)
                continue
            for claim in missing:
                instance = self._launch(
                    claim,
                    attempt.instance_type,
                    attempt.offering,
                    node_class,
                    skipped=tuple(tried),
                    gang=placement.gang if placement else None,
                    placement_group=group,
                )
                existing[claim.name] = instance
                launched.append((instance, attempt.instance_type))
            break
        return launched, tried

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        with self._lock:
            self.calls.append(("collect_placement",))
            used = {i.placement_group for i in self._instances.values()}
            gone = sorted(n for n, at in self.placement_groups.items() if n not in used and at <= older_than)
            for name in gone:
                del self.placement_groups[name]
            return gone

    def _placement_group(self, node_class: NodeClass, placement: GangPlacement | None) -> str | None:
        """The NodeClass's placement: its existing group or policy, or one made for the gang."""
        spec = getattr(node_class.spec, "placement", None)
        if spec is None:
            return None
        # AWS names a placement group (groupName, groupPerGang), GCP a policy (policy, compactPerGang).
        existing: str | None = getattr(spec, "group_name", None) or getattr(spec, "policy", None)
        per_gang = bool(getattr(spec, "group_per_gang", False) or getattr(spec, "compact_per_gang", False))
        if existing or not per_gang or placement is None:
            return existing
        name = f"fake-pg-{placement.gang}"
        self.placement_groups.setdefault(name, self._clock())
        return name

    def delete(self, provider_id: str) -> None:
        with self._lock:
            self.calls.append(("delete", provider_id))
        self._terminate(provider_id)

    def _terminate(self, provider_id: str) -> None:
        with self._lock:
            instance = self._instances.pop(provider_id, None)
            if instance is None:
                raise NotFound(f"instance {provider_id} not found")
            self._capacity.give_back(instance)
            self._drift.pop(provider_id, None)
            self._record(saved.terminate(provider_id))
            hook = self.on_delete
        if hook is not None:
            hook(replace(instance, state="terminated"))

    def get(self, provider_id: str) -> Instance:
        with self._lock:
            self.calls.append(("get", provider_id))
            instance = self._instances.get(provider_id)
            if instance is None:
                raise NotFound(f"instance {provider_id} not found")
            return instance

    def list(self) -> builtins.list[Instance]:
        with self._lock:
            self.calls.append(("list",))
            return [i for i in self._instances.values() if i.tags.get(labels.CLUSTER) == self.cluster_name]

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        with self._lock:
            self.calls.append(("is_drifted", claim.name))
            provider_id = claim.status.provider_id or self._by_claim.get(claim.name)
            return self._drift.get(provider_id) if provider_id else None

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        with self._lock:
            self.calls.append(("interruptions",))
            events, self._interruptions = self._interruptions, []
            return events

    # --- internals ---------------------------------------------------------------------------------------

    def _launch(
        self,
        claim: NodeClaim,
        instance_type: InstanceType,
        offering: Offering,
        node_class: NodeClass,
        *,
        skipped: tuple[OfferingKey, ...],
        gang: str | None = None,
        placement_group: str | None = None,
    ) -> Instance:
        self._capacity.take(offering.offering_key(instance_type.name), offering.reservation)
        provider_id = f"fake://{offering.zone}/{claim.name}"
        tags = {labels.CLUSTER: self.cluster_name, labels.NODECLAIM: claim.name}
        if claim.nodepool:
            tags[labels.NODEPOOL] = claim.nodepool
        if gang:
            tags[labels.GANG] = gang
        instance = Instance(
            provider_id=provider_id,
            instance_type=instance_type.name,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            price=offering.price,
            state="running",
            nodeclaim=claim.name,
            nodepool=claim.nodepool,
            launched_at=self._clock(),
            image_id=f"fake-image-{node_class.name}",
            tags=tags,
            reservation_id=offering.reservation.id if offering.reservation else None,
            reservation_type=offering.reservation.kind if offering.reservation else None,
            placement_group=placement_group,
            labels=dict(self.cloud_labels),
            skipped=skipped,
        )
        self._instances[provider_id] = instance
        self._by_claim[claim.name] = provider_id
        self.launched_total += 1
        self.launches_by_claim[claim.name] = self.launches_by_claim.get(claim.name, 0) + 1
        self._record(saved.launch(instance))
        return instance

    def _catch_up(self) -> bool:
        """Apply what the journal holds that this process has not seen (all of it the first time, or once
        another process compacted it: then True). Under the journal's lock."""
        assert self._journal is not None
        read = self._journal.read()
        if read.replay:
            self._saved.clear()
        for record in read.records:
            self._saved.apply(record)
        return read.replay

    def _record(self, record: dict[str, object]) -> None:
        """Append a launch or termination to the journal, compacting it once it outgrew the live state."""
        if self._journal is None:
            return
        with self._journal.locked():
            if self._catch_up():  # (nothing new when a shared provider holds the lock for the whole call)
                self._saved.apply(record)  # the replay dropped this call's own change
            self._journal.append(record)
            if self._journal.bloated(len(self._instances) + len(self.launches_by_claim)):
                self._journal.compact(saved.snapshot(self._instances.values(), self.launches_by_claim))
