"""The Compute Engine CloudProvider: reads machine and accelerator types, launches, finds and deletes
instances through google-cloud-compute, and reports spot preemptions.

Orchestrates the pieces, each in its own module: clients, credentials, translated calls and operation
waits in providers.gcp.sdk (no google.api_core exception leaves a call; errors are classified in
providers.gcp.errors); which offerings a claim tries, in which order, and the insert body in
providers.gcp.launch (the order itself is provisioner.cloudprovider.launch_order's); instance types
from the listings (providers.gcp.listings reads them, providers.gcp.machines builds types); names, labels and provider ids in providers.gcp.naming;
gang launches (bulkInsert with minCount) and compact placement policies in providers.gcp.group.

What it decides itself: how many offerings one create tries (`max_launch_attempts`), that a quota error
rules out the other zones of that type and capacity type, and how an instance is named (from the
claim, so a retried create finds what the first one made). What it leaves to others: retrying
TransientError (the retry wrapper), caching unavailable offerings across claims (the
unavailable-offerings cache; this provider only remembers its own recent stockouts for
`instance_types` and the next creates).

Preemptions: each call to `interruptions()` lists the region's zone operations of type
`compute.instances.preempted` and reports those on this cluster's instances not reported before. With
`instanceTerminationAction: DELETE` the instance may already be gone, so operations (which outlive it)
are the reliable record; an instance that still exists must carry this cluster's label.

Credentials are never logged, and `repr()` of the provider does not show them.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from providers.gcp import errors, group, instances, launch, listings, machines, naming, reservations
from providers.gcp.model import GCPNodeClass
from providers.gcp.sdk import SDK, failure
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacity,
    NodeClassNotReady,
    NotFound,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.launch_order import Attempt
from provisioner.cloudprovider.protocol import GangPlacement, Instance, InterruptionEvent
from provisioner.cloudprovider.types import InstanceType

log = logging.getLogger(__name__)

ENDPOINT_ENV = "PROVISIONER_GCP_ENDPOINT"
PREEMPTED = "compute.instances.preempted"
DEFAULT_BOOT_DISK_GIB = 100


class GCPProvider:
    """CloudProvider for Compute Engine (see the module docstring)."""

    name = "gcp"

    def __init__(
        self,
        *,
        project: str,
        region: str,
        cluster_name: str,
        endpoint: str | None = None,
        credentials: Any = None,
        operation_timeout: float = 300.0,
        request_timeout: float = 60.0,
        types_ttl: float = 300.0,
        unavailable_ttl: float = 180.0,
        max_launch_attempts: int = 12,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.project = project
        self.region = region
        self.cluster_name = cluster_name
        self.endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
        self.types_ttl = types_ttl
        self.unavailable_ttl = unavailable_ttl
        self.max_launch_attempts = max_launch_attempts
        self._clock = clock
        self._sdk = SDK(
            endpoint=self.endpoint,
            credentials=credentials,
            request_timeout=request_timeout,
            operation_timeout=operation_timeout,
            clock=clock,
            sleep=sleep,
        )
        self._lock = threading.Lock()
        self._listing: tuple[float, list[machines.Machine], dict[str, dict[str, int]], list[str]] | None = (
            None
        )
        self._unavailable: dict[OfferingKey, float] = {}
        self._launches: dict[str, machines.MachineLaunch] = {}
        self._seen_preemptions: set[str] = set()
        self._cluster_label = naming.label_value(cluster_name)
        self._prefix = naming.instance_prefix(cluster_name)

    def __repr__(self) -> str:
        return (
            f"GCPProvider(project={self.project!r}, region={self.region!r}, cluster={self.cluster_name!r}, "
            f"endpoint={self.endpoint!r})"
        )

    # --- instance types ---------------------------------------------------------------------------------

    def _read_cloud(
        self,
    ) -> tuple[builtins.list[machines.Machine], dict[str, dict[str, int]], builtins.list[str]]:
        """Machine types, accelerator types and zones of the region; cached for `types_ttl` seconds."""
        now = self._clock()
        cached = self._listing
        if cached and now - cached[0] < self.types_ttl:
            return cached[1], cached[2], cached[3]
        found, accelerators, zones = listings.read_region(self._sdk, project=self.project, region=self.region)
        self._listing = (now, found, accelerators, zones)
        return found, accelerators, zones

    def _unavailable_now(self) -> set[OfferingKey]:
        now = self._clock()
        with self._lock:
            for key in [k for k, until in self._unavailable.items() if until <= now]:
                del self._unavailable[key]
            return set(self._unavailable)

    def _mark_unavailable(self, keys: Iterable[OfferingKey]) -> None:
        until = self._clock() + self.unavailable_ttl
        with self._lock:
            for k in keys:
                self._unavailable[k] = until

    def _build(self, *, zones: builtins.list[str] | None, boot_disk_gib: int) -> builtins.list[InstanceType]:
        found, accelerators, region_zones = self._read_cloud()
        allowed = [z for z in region_zones if zones is None or z in zones]
        built = machines.build(
            found,
            accelerators,
            region=self.region,
            zones=allowed,
            boot_disk_gib=boot_disk_gib,
            unavailable=self._unavailable_now(),
        )
        with self._lock:
            self._launches.update(built.launches)
        if built.skipped_unpriced:
            log.debug(
                "gcp: %d machine types have no catalog price and are not offered: %s",
                len(built.skipped_unpriced),
                ", ".join(built.skipped_unpriced[:10]),
            )
        return built.types

    def region_instance_types(self) -> builtins.list[InstanceType]:
        """Every priced type of the region, all its zones, the default boot disk (for `catalog`)."""
        return self._build(zones=None, boot_disk_gib=DEFAULT_BOOT_DISK_GIB)

    def instance_types(self, node_class: NodeClass) -> builtins.list[InstanceType]:
        nc = self._node_class(node_class)
        zones = builtins.list(nc.spec.zones) or None
        types = self._build(zones=zones, boot_disk_gib=nc.spec.boot_disk.size_gb)
        if zones is not None and not any(t.offerings for t in types):
            raise NodeClassNotReady(
                f"GCPNodeClass {nc.name!r}: spec.zones {zones} has no zone of region {self.region} with "
                "machine types; list zones of that region"
            )
        if nc.spec.reservations is None:
            return types
        in_zones = sorted({o.zone for t in types for o in t.offerings})
        found = [
            r
            for zone in in_zones
            for r in self._sdk.listed(
                f"list reservations in {zone}",
                self._sdk.clients().reservations.list,
                project=self.project,
                zone=zone,
            )
        ]
        reserved = reservations.offerings(
            found,
            wanted=nc.spec.reservations,
            hourly_price=lambda name: catalog.on_demand_price("gcp", name, self.region),
        )
        return [
            t.with_offerings((*reserved[t.name], *t.offerings)) if t.name in reserved else t for t in types
        ]

    def _node_class(self, node_class: NodeClass) -> GCPNodeClass:
        if not isinstance(node_class, GCPNodeClass):
            raise NodeClassNotReady(f"the gcp provider launches GCPNodeClass, not {node_class.kind}")
        spec = node_class.spec
        if spec.project != self.project:
            raise NodeClassNotReady(
                f"GCPNodeClass {node_class.name!r}: spec.project {spec.project!r} differs from the "
                f"controller's project {self.project!r}"
            )
        if spec.region and spec.region != self.region:
            raise NodeClassNotReady(
                f"GCPNodeClass {node_class.name!r}: spec.region {spec.region!r} differs from the "
                f"controller's region {self.region!r}"
            )
        wrong = [z for z in spec.zones if naming.region_of(z) != self.region]
        if wrong:
            raise NodeClassNotReady(
                f"GCPNodeClass {node_class.name!r}: spec.zones {wrong} are not zones of region {self.region}"
            )
        return node_class

    # --- create -----------------------------------------------------------------------------------------

    def create(
        self, claim: NodeClaim, instance_types: builtins.list[InstanceType], node_class: NodeClass
    ) -> Instance:
        """Insert the first offering with capacity in the launch order of the claim's options, one insert
        at a time (at most `max_launch_attempts`), so a stockout falls to the next zone, then to
        on-demand, within this call. Idempotent by the instance name derived from the claim's."""
        nc = self._node_class(node_class)
        name = naming.instance_name(self.cluster_name, claim.name)
        existing = self._find(name)
        if existing is not None:
            log.info("gcp: claim %s already has instance %s", claim.name, existing.provider_id)
            return existing
        attempts = launch.order(
            claim, instance_types, node_class=nc, region=self.region, recently_out=self._unavailable_now()
        ).attempts
        if not attempts:
            raise InsufficientCapacity(
                [],
                f"claim {claim.name}: no available offering of {claim.instance_type_options() or 'its types'} "
                "is allowed by its zone and capacity-type requirements and the node class zones",
            )
        failed: builtins.list[OfferingKey] = []
        kinds: set[str] = set()
        reasons: dict[str, None] = {}  # the cloud's distinct messages, in order
        ruled_out: set[OfferingKey] = set()
        tries = 0
        for attempt in attempts:
            if attempt.key in ruled_out:
                failed.append(attempt.key)
                continue
            if tries >= self.max_launch_attempts:
                break
            tries += 1
            try:
                return self._launch(name, claim=claim, attempt=attempt, nc=nc)
            except InsufficientCapacity as err:
                kinds.add(err.kind)
                reasons[str(err).split(": ", 1)[-1]] = None
                failed.append(attempt.key)
                log.info("gcp: %s for claim %s: %s; trying the next offering", err.kind, claim.name, err)
                if err.kind == "quota":
                    ruled_out.update(launch.quota_scope(attempt))
                    self._mark_unavailable(launch.quota_scope(attempt))
                else:
                    self._mark_unavailable([attempt.key])
        kind = "quota" if kinds == {"quota"} else "capacity"
        raise InsufficientCapacity(
            failed,
            f"claim {claim.name}: every offering tried is out of {kind}: "
            + ", ".join(str(k) for k in failed)
            + (f" ({' | '.join(reasons)})" if reasons else ""),
            kind=kind,
        )

    def _launch_of(self, instance_type: str) -> machines.MachineLaunch:
        with self._lock:
            known = self._launches.get(instance_type)
        return known or machines.launch_of(instance_type)

    def _launch(self, name: str, *, claim: NodeClaim, attempt: Attempt, nc: GCPNodeClass) -> Instance:
        zone = attempt.zone
        body = launch.instance_body(
            name,
            claim=claim,
            attempt=attempt,
            node_class=nc,
            machine=self._launch_of(attempt.instance_type.name),
            cluster_name=self.cluster_name,
            region=self.region,
        )
        what = f"insert instance {name} ({attempt.key})"
        try:
            op = self._sdk.clients().instances.insert_unary(
                project=self.project,
                zone=zone,
                instance_resource=body,
                retry=None,
                timeout=self._sdk.request_timeout,
            )
        except gexc.Conflict:
            # Already exists in this zone: an earlier create got this far. Same name, same claim.
            return self.get(naming.provider_id(self.project, zone, name))
        except Exception as err:
            raise errors.translate(err, what=what, offering=attempt.key) from err
        failed = failure(self._sdk.wait(self.project, zone, op, what=what))
        if failed is not None:
            if failed.kind == "exists":
                return self.get(naming.provider_id(self.project, zone, name))
            if failed.kind in ("capacity", "quota"):
                raise InsufficientCapacity([attempt.key], f"{what}: {failed.message}", kind=failed.kind)
            if failed.kind == "transient":
                raise TransientError(f"{what}: {failed.message}")
            raise CreateError(f"{what}: {failed.message}")
        log.info(
            "gcp: launched %s as %s in %s (%s)",
            claim.name,
            attempt.instance_type.name,
            zone,
            attempt.capacity_type,
        )
        try:
            return self.get(naming.provider_id(self.project, zone, name))
        except NotFound as err:
            # Gone between DONE and our read (a spot VM taken back at once): launching again may work.
            raise TransientError(f"{what}: the instance vanished right after it was launched") from err

    # --- find, get, list, delete ------------------------------------------------------------------------

    def _find(self, name: str) -> Instance | None:
        """The instance with this name in any zone of the project, or None."""
        scopes = self._sdk.listed(
            f"find instance {name}",
            self._sdk.clients().instances.aggregated_list,
            request={"project": self.project, "filter": f'name = "{name}"'},
        )
        for scope, scoped in scopes:
            for inst in scoped.instances:
                if inst.name == name:
                    return self._instance(inst, zone=naming.last(inst.zone or scope))
        return None

    def get(self, provider_id: str) -> Instance:
        project, zone, name = naming.parse_provider_id(provider_id)
        inst = self._sdk.call(
            f"get instance {provider_id}",
            self._sdk.clients().instances.get,
            project=project,
            zone=zone,
            instance=name,
        )
        return self._instance(inst, zone=zone, project=project)

    def list(self) -> builtins.list[Instance]:
        scopes = self._sdk.listed(
            "list instances",
            self._sdk.clients().instances.aggregated_list,
            request={
                "project": self.project,
                "filter": f'labels.{naming.LABEL_CLUSTER} = "{self._cluster_label}"',
                "max_results": 500,
            },
        )
        out = []
        for scope, scoped in scopes:
            for inst in scoped.instances:
                # Belt and braces: the filter is the server's; the label check is ours.
                if inst.labels.get(naming.LABEL_CLUSTER) == self._cluster_label:
                    out.append(self._instance(inst, zone=naming.last(inst.zone or scope)))
        return sorted(out, key=lambda i: i.provider_id)

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        """One bulkInsert with minCount for every member, all of one offering, or none
        (providers.gcp.group)."""
        return group.launch_group(self, claims, instance_types, self._node_class(node_class), placement)

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        """Delete the compact placement policies made per gang that no instance uses (providers.gcp.group)."""
        return group.collect_placement(self, older_than=older_than)

    @property
    def sdk(self) -> SDK:
        return self._sdk

    def launch_of(self, instance_type: str) -> machines.MachineLaunch:
        return self._launch_of(instance_type)

    def recently_out(self) -> set[OfferingKey]:
        """Offerings this provider found out of capacity within `unavailable_ttl`."""
        return set(self._unavailable_now())

    def mark_out(self, keys: Iterable[OfferingKey]) -> None:
        self._mark_unavailable(builtins.list(keys))

    def delete(self, provider_id: str) -> None:
        project, zone, name = naming.parse_provider_id(provider_id)
        what = f"delete instance {provider_id}"
        op = self._sdk.call(
            what, self._sdk.clients().instances.delete_unary, project=project, zone=zone, instance=name
        )
        failed = failure(self._sdk.wait(project, zone, op, what=what))
        if failed is None:
            log.info("gcp: deleted %s", provider_id)
            return
        if failed.kind == "not-found":
            raise NotFound(f"{what}: {failed.message}")
        if failed.kind == "transient":
            raise TransientError(f"{what}: {failed.message}")
        raise CloudProviderError(f"{what}: {failed.message}")

    def _instance(self, inst: compute_v1.Instance, *, zone: str, project: str | None = None) -> Instance:
        return instances.to_instance(inst, project=project or self.project, zone=zone)

    # --- drift and interruptions ------------------------------------------------------------------------

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        nc = self._node_class(node_class)
        provider_id = claim.status.provider_id
        if not provider_id:
            return None
        try:
            project, zone, name = naming.parse_provider_id(provider_id)
            inst = self._sdk.call(
                f"get instance {provider_id}",
                self._sdk.clients().instances.get,
                project=project,
                zone=zone,
                instance=name,
            )
        except NotFound:
            return None
        return instances.drift(inst, nc)

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        _, _, zones = self._read_cloud()
        c = self._sdk.clients()
        events: builtins.list[InterruptionEvent] = []
        listed: set[str] = set()
        for zone in zones:
            ops = self._sdk.listed(
                f"list preemptions in {zone}",
                c.operations.list,
                request={"project": self.project, "zone": zone, "filter": f'operationType = "{PREEMPTED}"'},
            )
            for op in ops:
                if op.operation_type != PREEMPTED:
                    continue
                name = naming.last(op.target_link)
                if not name.startswith(self._prefix):
                    continue
                key = f"{zone}/{op.name}"
                listed.add(key)
                with self._lock:
                    if key in self._seen_preemptions:
                        continue
                if not self._ours(zone, name):
                    continue
                with self._lock:
                    if key in self._seen_preemptions:
                        continue  # another caller reported it meanwhile
                    self._seen_preemptions.add(key)
                events.append(
                    InterruptionEvent(
                        provider_id=naming.provider_id(self.project, zone, name),
                        kind="preemption",
                        time=instances.parse_time(op.end_time or op.insert_time),
                        detail=op.status_message or "spot instance preempted by Compute Engine",
                    )
                )
        # Forget operations Compute Engine no longer lists, so the set does not grow forever.
        with self._lock:
            self._seen_preemptions &= listed
        return events

    def _ours(self, zone: str, name: str) -> bool:
        """An instance that still exists must carry our cluster label; a deleted one is judged by name."""
        try:
            inst = self._sdk.call(
                f"get instance {name}",
                self._sdk.clients().instances.get,
                project=self.project,
                zone=zone,
                instance=name,
            )
        except NotFound:
            return True
        ours: bool = inst.labels.get(naming.LABEL_CLUSTER) == self._cluster_label
        return ours
