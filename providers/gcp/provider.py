"""The Compute Engine CloudProvider: reads machine and accelerator types, launches, finds and deletes
instances through google-cloud-compute, and reports spot preemptions.

What it decides: which offering of a claim to try first (cheapest allowed and available), what to try
after a stockout (the next offering: another zone, then on-demand) within one create, and how the
instance is named (from the claim, so a retried create finds what the first one made). What it leaves to
others: retrying TransientError (the retry wrapper; every client call here passes `retry=None`, so the
client never retries for its default 600 s), caching unavailable offerings across claims (the
unavailable-offerings cache; this provider only remembers its own recent stockouts for `instance_types`).

Operations are waited on explicitly through ZoneOperationsClient.wait with a deadline: the client's own
extended-operation polling would call Google's endpoint, not an endpoint override, and reads an
operation that failed with only `error.errors` as a success.

Preemptions: each call to `interruptions()` lists the region's zone operations of type
`compute.instances.preempted` and reports those on this cluster's instances not reported before. With
`instanceTerminationAction: DELETE` the instance may already be gone, so operations (which outlive it)
are the reliable record; an instance that still exists must carry this cluster's label.

Credentials: Application Default Credentials / workload identity (google.auth.default) unless given;
AnonymousCredentials when an endpoint override is set without credentials. They are never logged, and
`repr()` of the provider does not show them.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from providers.gcp import errors, machines, naming
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import GCPNodeClass, NodeClass
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
from provisioner.cloudprovider.protocol import Instance, InterruptionEvent
from provisioner.cloudprovider.types import InstanceType, Offering

log = logging.getLogger(__name__)

ENDPOINT_ENV = "PROVISIONER_GCP_ENDPOINT"
SCOPES = ("https://www.googleapis.com/auth/compute",)
PREEMPTED = "compute.instances.preempted"
DEFAULT_BOOT_DISK_GIB = 100
_DONE = compute_v1.Operation.Status.DONE

_STATES = {
    "PROVISIONING": "pending",
    "STAGING": "pending",
    "RUNNING": "running",
    "REPAIRING": "running",
    "STOPPING": "stopping",
    "SUSPENDING": "stopping",
    "STOPPED": "stopped",
    "SUSPENDED": "stopped",
    "TERMINATED": "terminated",
}


@dataclass(frozen=True, slots=True)
class _Candidate:
    instance_type: InstanceType
    offering: Offering
    rank: int

    @property
    def key(self) -> OfferingKey:
        return OfferingKey(self.instance_type.name, self.offering.zone, self.offering.capacity_type)


class _Clients:
    """The google-cloud-compute clients, made once on first use."""

    def __init__(self, *, credentials: Any, endpoint: str | None) -> None:
        options = {"api_endpoint": endpoint} if endpoint else None
        kwargs: dict[str, Any] = {"credentials": credentials, "client_options": options}
        self.instances = compute_v1.InstancesClient(**kwargs)
        self.operations = compute_v1.ZoneOperationsClient(**kwargs)
        self.machine_types = compute_v1.MachineTypesClient(**kwargs)
        self.accelerator_types = compute_v1.AcceleratorTypesClient(**kwargs)
        self.zones = compute_v1.ZonesClient(**kwargs)


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
        self._credentials = credentials
        self.operation_timeout = operation_timeout
        self.request_timeout = request_timeout
        self.types_ttl = types_ttl
        self.unavailable_ttl = unavailable_ttl
        self.max_launch_attempts = max_launch_attempts
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._clients_: _Clients | None = None
        self._listing: tuple[float, list[machines.Machine], dict[str, dict[str, int]], list[str]] | None = (
            None
        )
        self._unavailable: dict[tuple[str, str, str], float] = {}
        self._launches: dict[str, machines.Launch] = {}
        self._seen_preemptions: set[str] = set()
        self._cluster_label = naming.label_value(cluster_name)
        self._prefix = naming.instance_prefix(cluster_name)

    def __repr__(self) -> str:
        return (
            f"GCPProvider(project={self.project!r}, region={self.region!r}, cluster={self.cluster_name!r}, "
            f"endpoint={self.endpoint!r})"
        )

    # --- clients and credentials ------------------------------------------------------------------------

    def _clients(self) -> _Clients:
        with self._lock:
            if self._clients_ is None:
                credentials = self._credentials
                if credentials is None and self.endpoint:
                    from google.auth.credentials import AnonymousCredentials

                    credentials = AnonymousCredentials()
                elif credentials is None:
                    import google.auth
                    from google.auth import exceptions as auth_exceptions

                    try:
                        credentials, _ = google.auth.default(scopes=list(SCOPES))
                    except auth_exceptions.DefaultCredentialsError as err:
                        raise NodeClassNotReady(
                            "no Google credentials found: set GOOGLE_APPLICATION_CREDENTIALS, use workload "
                            "identity, or run `gcloud auth application-default login`"
                        ) from err
                self._clients_ = _Clients(credentials=credentials, endpoint=self.endpoint)
                log.debug("gcp clients ready (endpoint=%s)", self.endpoint or "default")
            return self._clients_

    def _call(
        self, what: str, fn: Callable[..., Any], /, *, offering: OfferingKey | None = None, **kw: Any
    ) -> Any:
        """One client call, never retried by the client, its errors translated."""
        try:
            return fn(retry=None, timeout=self.request_timeout, **kw)
        except Exception as err:
            raise errors.translate(err, what=what, offering=offering) from err

    def _listed(self, what: str, pager: Any) -> builtins.list[Any]:
        """Drain a pager (later pages are fetched while iterating, so errors surface here too)."""
        try:
            return builtins.list(pager)
        except Exception as err:
            raise errors.translate(err, what=what) from err

    # --- instance types ---------------------------------------------------------------------------------

    def _read_cloud(
        self,
    ) -> tuple[builtins.list[machines.Machine], dict[str, dict[str, int]], builtins.list[str]]:
        """Machine types, accelerator types and zones of the region; cached for `types_ttl` seconds."""
        now = self._clock()
        cached = self._listing
        if cached and now - cached[0] < self.types_ttl:
            return cached[1], cached[2], cached[3]
        c = self._clients()
        zone_items = self._listed(
            "list zones",
            self._call("list zones", c.zones.list, request={"project": self.project}),
        )
        zones = sorted(
            z.name
            for z in zone_items
            if naming.last(z.region) == self.region and (not z.status or z.status == "UP")
        )
        region_zones = set(zones)
        scopes = self._listed(
            "list machine types",
            self._call(
                "list machine types",
                c.machine_types.aggregated_list,
                request={"project": self.project, "max_results": 500},
            ),
        )
        found: builtins.list[machines.Machine] = []
        for scope, scoped in scopes:
            zone = naming.last(scope)
            if zone not in region_zones:
                continue
            for mt in scoped.machine_types:
                found.append(
                    machines.Machine(
                        name=mt.name,
                        zone=zone,
                        vcpu=int(mt.guest_cpus),
                        memory_mib=int(mt.memory_mb),
                        accelerators=tuple(
                            (a.guest_accelerator_type, int(a.guest_accelerator_count))
                            for a in mt.accelerators
                        ),
                        shared_cpu=bool(mt.is_shared_cpu),
                        architecture=mt.architecture or "X86_64",
                        deprecated=bool(mt.deprecated and mt.deprecated.state),
                    )
                )
        acc_scopes = self._listed(
            "list accelerator types",
            self._call(
                "list accelerator types",
                c.accelerator_types.aggregated_list,
                request={"project": self.project, "max_results": 500},
            ),
        )
        accelerators: dict[str, dict[str, int]] = {}
        for scope, scoped in acc_scopes:
            zone = naming.last(scope)
            if zone in region_zones:
                for at in scoped.accelerator_types:
                    accelerators.setdefault(zone, {})[at.name] = int(at.maximum_cards_per_instance or 1)
        self._listing = (now, found, accelerators, zones)
        return found, accelerators, zones

    def _unavailable_now(self) -> set[tuple[str, str, str]]:
        now = self._clock()
        with self._lock:
            for key in [k for k, until in self._unavailable.items() if until <= now]:
                del self._unavailable[key]
            return set(self._unavailable)

    def _mark_unavailable(self, keys: Iterable[OfferingKey]) -> None:
        until = self._clock() + self.unavailable_ttl
        with self._lock:
            for k in keys:
                self._unavailable[(k.instance_type, k.zone, k.capacity_type)] = until

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
        return types

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
        nc = self._node_class(node_class)
        name = naming.instance_name(self.cluster_name, claim.name)
        existing = self._find(name)
        if existing is not None:
            log.info("gcp: claim %s already has instance %s", claim.name, existing.provider_id)
            return existing
        candidates = self._candidates(claim, instance_types, nc)
        if not candidates:
            raise InsufficientCapacity(
                [],
                f"claim {claim.name}: no available offering of {claim.instance_type_options() or 'its types'} "
                "is allowed by its zone and capacity-type requirements and the node class zones",
            )
        failed: builtins.list[OfferingKey] = []
        kinds: set[str] = set()
        reasons: dict[str, None] = {}  # the cloud's distinct messages, in order
        quota_out: set[tuple[str, str]] = set()
        attempts = 0
        for cand in candidates:
            if (cand.instance_type.name, cand.offering.capacity_type) in quota_out:
                failed.append(cand.key)
                continue
            if attempts >= self.max_launch_attempts:
                break
            attempts += 1
            try:
                return self._launch(name, claim=claim, cand=cand, nc=nc)
            except InsufficientCapacity as err:
                kinds.add(err.kind)
                reasons[str(err).split(": ", 1)[-1]] = None
                failed.append(cand.key)
                log.info("gcp: %s for claim %s: %s; trying the next offering", err.kind, claim.name, err)
                if err.kind == "quota":
                    # Quota is regional: every zone of this type and capacity type will say the same.
                    quota_out.add((cand.instance_type.name, cand.offering.capacity_type))
                    self._mark_unavailable(
                        OfferingKey(cand.instance_type.name, o.zone, o.capacity_type)
                        for o in cand.instance_type.offerings
                        if o.capacity_type == cand.offering.capacity_type
                    )
                else:
                    self._mark_unavailable([cand.key])
        kind = "quota" if kinds == {"quota"} else "capacity"
        raise InsufficientCapacity(
            failed,
            f"claim {claim.name}: every offering tried is out of {kind}: "
            + ", ".join(str(k) for k in failed)
            + (f" ({' | '.join(reasons)})" if reasons else ""),
            kind=kind,
        )

    def _candidates(
        self, claim: NodeClaim, instance_types: builtins.list[InstanceType], nc: GCPNodeClass
    ) -> builtins.list[_Candidate]:
        """The offerings the claim allows, cheapest first (ties: the scheduler's option order, then zone)."""
        options = claim.instance_type_options()
        by_name = {t.name: t for t in instance_types}
        ordered = [by_name[o] for o in options if o in by_name] if options else builtins.list(instance_types)
        zones_in, zones_out = claim.allowed_values(wk.ZONE)
        if nc.spec.zones:
            zones_in = set(nc.spec.zones) if zones_in is None else zones_in & set(nc.spec.zones)
        unavailable = self._unavailable_now()
        out: builtins.list[_Candidate] = []
        for rank, it in enumerate(ordered):
            for o in it.offerings:
                if not o.available or (it.name, o.zone, o.capacity_type) in unavailable:
                    continue
                if o.capacity_type == wk.CAPACITY_TYPE_RESERVED:
                    continue  # reservations are not modelled on GCP yet
                if (zones_in is not None and o.zone not in zones_in) or o.zone in zones_out:
                    continue
                if not claim.admits(wk.CAPACITY_TYPE, o.capacity_type):
                    continue
                if naming.region_of(o.zone) != self.region:
                    continue
                out.append(_Candidate(it, o, rank))
        out.sort(key=lambda c: (c.offering.price, c.rank, c.offering.zone, c.offering.capacity_type))
        return out

    def _launch_of(self, instance_type: str) -> machines.Launch:
        with self._lock:
            known = self._launches.get(instance_type)
        return known or machines.launch_of(instance_type)

    def _launch(self, name: str, *, claim: NodeClaim, cand: _Candidate, nc: GCPNodeClass) -> Instance:
        zone, spot = cand.offering.zone, cand.offering.capacity_type == wk.CAPACITY_TYPE_SPOT
        body = self._instance_body(name, claim=claim, cand=cand, nc=nc, spot=spot)
        c = self._clients()
        what = f"insert instance {name} ({cand.key})"
        try:
            op = c.instances.insert_unary(
                project=self.project,
                zone=zone,
                instance_resource=body,
                retry=None,
                timeout=self.request_timeout,
            )
        except gexc.Conflict:
            # Already exists in this zone: an earlier create got this far. Same name, same claim.
            return self.get(naming.provider_id(self.project, zone, name))
        except Exception as err:
            raise errors.translate(err, what=what, offering=cand.key) from err
        done = self._wait(zone, op, what=what)
        failure = _failure(done)
        if failure is not None:
            if failure.kind == "exists":
                return self.get(naming.provider_id(self.project, zone, name))
            if failure.kind in ("capacity", "quota"):
                raise InsufficientCapacity([cand.key], f"{what}: {failure.message}", kind=failure.kind)
            if failure.kind == "transient":
                raise TransientError(f"{what}: {failure.message}")
            raise CreateError(f"{what}: {failure.message}")
        log.info(
            "gcp: launched %s as %s in %s (%s)",
            claim.name,
            cand.instance_type.name,
            zone,
            cand.offering.capacity_type,
        )
        try:
            return self.get(naming.provider_id(self.project, zone, name))
        except NotFound as err:
            # Gone between DONE and our read (a spot VM taken back at once): launching again may work.
            raise TransientError(f"{what}: the instance vanished right after it was launched") from err

    def _instance_body(
        self, name: str, *, claim: NodeClaim, cand: _Candidate, nc: GCPNodeClass, spot: bool
    ) -> compute_v1.Instance:
        spec = nc.spec
        zone = cand.offering.zone
        launch = self._launch_of(cand.instance_type.name)
        has_gpu = launch.gpu or cand.instance_type.gpu is not None
        nodepool = claim.nodepool or ""
        gce_labels = {k: naming.label_value(v) for k, v in spec.labels.items()}
        gce_labels.update(
            {
                naming.LABEL_CLUSTER: self._cluster_label,
                naming.LABEL_NODEPOOL: naming.label_value(nodepool),
                naming.LABEL_NODECLAIM: naming.label_value(claim.name),
                naming.LABEL_CAPACITY_TYPE: cand.offering.capacity_type,
            }
        )
        metadata = dict(spec.metadata)
        metadata.update(
            {
                naming.META_CLUSTER: self.cluster_name,
                naming.META_NODEPOOL: nodepool,
                naming.META_NODECLAIM: claim.name,
                naming.META_IMAGE: spec.image,
            }
        )
        init = compute_v1.AttachedDiskInitializeParams(
            source_image=spec.image,
            disk_size_gb=spec.boot_disk.size_gb,
            disk_type=f"zones/{zone}/diskTypes/{spec.boot_disk.type}",
            labels=gce_labels,
        )
        boot = compute_v1.AttachedDisk(
            boot=True, auto_delete=True, type_="PERSISTENT", initialize_params=init
        )
        if spec.boot_disk.kms_key:
            boot.disk_encryption_key = compute_v1.CustomerEncryptionKey(kms_key_name=spec.boot_disk.kms_key)
        disks = [boot]
        for _ in range(spec.local_ssd_count):
            disks.append(
                compute_v1.AttachedDisk(
                    type_="SCRATCH",
                    interface="NVME",
                    auto_delete=True,
                    initialize_params=compute_v1.AttachedDiskInitializeParams(
                        disk_type=f"zones/{zone}/diskTypes/local-ssd"
                    ),
                )
            )
        nic = compute_v1.NetworkInterface(network=_network_url(spec.network))
        if spec.subnetwork:
            nic.subnetwork = _subnetwork_url(spec.subnetwork, self.region)
        scheduling = compute_v1.Scheduling()
        if spot:
            # Spot VMs must not migrate; DELETE so a preempted node does not linger (and cost disk) as
            # TERMINATED: the claim is replaced anyway.
            scheduling.provisioning_model = "SPOT"
            scheduling.instance_termination_action = "DELETE"
            scheduling.automatic_restart = False
            scheduling.on_host_maintenance = "TERMINATE"
        elif has_gpu:
            # GPUs cannot live-migrate: host maintenance stops the VM, which then restarts.
            scheduling.on_host_maintenance = "TERMINATE"
            scheduling.automatic_restart = True
        body = compute_v1.Instance(
            name=name,
            machine_type=f"zones/{zone}/machineTypes/{launch.machine_type}",
            disks=disks,
            network_interfaces=[nic],
            labels=gce_labels,
            metadata=compute_v1.Metadata(
                items=[compute_v1.Items(key=k, value=v) for k, v in sorted(metadata.items())]
            ),
            scheduling=scheduling,
            description=f"provisioner {self.cluster_name} nodeclaim {claim.name}",
        )
        if spec.network_tags:
            body.tags = compute_v1.Tags(items=builtins.list(spec.network_tags))
        if spec.service_account is not None:
            body.service_accounts = [
                compute_v1.ServiceAccount(
                    email=spec.service_account.email, scopes=builtins.list(spec.service_account.scopes)
                )
            ]
        if launch.accelerator_type:
            body.guest_accelerators = [
                compute_v1.AcceleratorConfig(
                    accelerator_type=f"zones/{zone}/acceleratorTypes/{launch.accelerator_type}",
                    accelerator_count=launch.accelerator_count,
                )
            ]
        return body

    def _wait(self, zone: str, op: compute_v1.Operation, *, what: str) -> compute_v1.Operation:
        """Wait for a zone operation to be DONE, through zoneOperations.wait, until `operation_timeout`."""
        deadline = self._clock() + self.operation_timeout
        pause = 0.1
        c = self._clients()
        while op.status != _DONE:
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise TransientError(
                    f"{what}: operation {op.name} not done after {self.operation_timeout:g}s "
                    "(a retry finds the instance if it comes up)"
                )
            started = self._clock()
            try:
                # The server answers within about 2 minutes even if the operation is still running.
                op = c.operations.wait(
                    project=self.project,
                    zone=zone,
                    operation=op.name,
                    retry=None,
                    timeout=min(remaining, 150.0),
                )
            except Exception as err:
                raise errors.translate(err, what=f"{what}: wait for {op.name}") from err
            if op.status != _DONE and self._clock() - started < 1.0:
                # A wait that came back at once and not done: do not spin on it.
                self._sleep(min(pause, max(0.0, deadline - self._clock())))
                pause = min(pause * 2, 2.0)
        return op

    # --- find, get, list, delete ------------------------------------------------------------------------

    def _find(self, name: str) -> Instance | None:
        """The instance with this name in any zone of the project, or None."""
        c = self._clients()
        scopes = self._listed(
            "find instance",
            self._call(
                f"find instance {name}",
                c.instances.aggregated_list,
                request={"project": self.project, "filter": f'name = "{name}"'},
            ),
        )
        for scope, scoped in scopes:
            for inst in scoped.instances:
                if inst.name == name:
                    return self._instance(inst, zone=naming.last(inst.zone or scope))
        return None

    def get(self, provider_id: str) -> Instance:
        project, zone, name = naming.parse_provider_id(provider_id)
        c = self._clients()
        inst = self._call(
            f"get instance {provider_id}", c.instances.get, project=project, zone=zone, instance=name
        )
        return self._instance(inst, zone=zone, project=project)

    def list(self) -> builtins.list[Instance]:
        c = self._clients()
        scopes = self._listed(
            "list instances",
            self._call(
                "list instances",
                c.instances.aggregated_list,
                request={
                    "project": self.project,
                    "filter": f'labels.{naming.LABEL_CLUSTER} = "{self._cluster_label}"',
                    "max_results": 500,
                },
            ),
        )
        out = []
        for scope, scoped in scopes:
            for inst in scoped.instances:
                # Belt and braces: the filter is the server's; the label check is ours.
                if inst.labels.get(naming.LABEL_CLUSTER) == self._cluster_label:
                    out.append(self._instance(inst, zone=naming.last(inst.zone or scope)))
        return sorted(out, key=lambda i: i.provider_id)

    def delete(self, provider_id: str) -> None:
        project, zone, name = naming.parse_provider_id(provider_id)
        c = self._clients()
        what = f"delete instance {provider_id}"
        op = self._call(what, c.instances.delete_unary, project=project, zone=zone, instance=name)
        done = self._wait(zone, op, what=what)
        failure = _failure(done)
        if failure is None:
            log.info("gcp: deleted %s", provider_id)
            return
        if failure.kind == "not-found":
            raise NotFound(f"{what}: {failure.message}")
        if failure.kind == "transient":
            raise TransientError(f"{what}: {failure.message}")
        raise CloudProviderError(f"{what}: {failure.message}")

    def _instance(self, inst: compute_v1.Instance, *, zone: str, project: str | None = None) -> Instance:
        meta = {item.key: item.value for item in inst.metadata.items} if inst.metadata else {}
        labels = dict(inst.labels)
        machine = naming.last(inst.machine_type)
        type_name = machine
        if inst.guest_accelerators:
            acc = inst.guest_accelerators[0]
            type_name = catalog.gcp_attached_name(
                machine, naming.last(acc.accelerator_type), acc.accelerator_count
            )
        spot = inst.scheduling.provisioning_model == "SPOT" or bool(inst.scheduling.preemptible)
        capacity_type = wk.CAPACITY_TYPE_SPOT if spot else wk.CAPACITY_TYPE_ON_DEMAND
        region = naming.region_of(zone)
        price = (
            catalog.spot_price("gcp", type_name, region)
            if spot
            else catalog.on_demand_price("gcp", type_name, region)
        )
        return Instance(
            provider_id=naming.provider_id(project or self.project, zone, inst.name),
            instance_type=type_name,
            zone=zone,
            capacity_type=capacity_type,
            price=price or 0.0,
            state=_STATES.get(inst.status, inst.status.lower() if inst.status else "unknown"),
            nodeclaim=meta.get(naming.META_NODECLAIM) or labels.get(naming.LABEL_NODECLAIM),
            nodepool=meta.get(naming.META_NODEPOOL) or labels.get(naming.LABEL_NODEPOOL),
            launched_at=_time(inst.creation_timestamp),
            image_id=meta.get(naming.META_IMAGE),
            tags=labels,
        )

    # --- drift and interruptions ------------------------------------------------------------------------

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        nc = self._node_class(node_class)
        provider_id = claim.status.provider_id
        if not provider_id:
            return None
        try:
            project, zone, name = naming.parse_provider_id(provider_id)
            inst = self._call(
                f"get instance {provider_id}",
                self._clients().instances.get,
                project=project,
                zone=zone,
                instance=name,
            )
        except NotFound:
            return None
        meta = {item.key: item.value for item in inst.metadata.items} if inst.metadata else {}
        image = meta.get(naming.META_IMAGE)
        if image is not None and image != nc.spec.image:
            return f"ImageDrift: instance booted {image}, node class wants {nc.spec.image}"
        nic = inst.network_interfaces[0] if inst.network_interfaces else None
        if nic is not None and nic.network and naming.last(nic.network) != naming.last(nc.spec.network):
            return (
                f"NetworkDrift: instance is on {naming.last(nic.network)}, node class wants {nc.spec.network}"
            )
        if (
            nic is not None
            and nc.spec.subnetwork
            and nic.subnetwork
            and naming.last(nic.subnetwork) != naming.last(nc.spec.subnetwork)
        ):
            return (
                f"SubnetworkDrift: instance is on {naming.last(nic.subnetwork)}, "
                f"node class wants {nc.spec.subnetwork}"
            )
        return None

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        _, _, zones = self._read_cloud()
        c = self._clients()
        events: builtins.list[InterruptionEvent] = []
        listed: set[str] = set()
        for zone in zones:
            ops = self._listed(
                "list preemptions",
                self._call(
                    f"list operations in {zone}",
                    c.operations.list,
                    request={
                        "project": self.project,
                        "zone": zone,
                        "filter": f'operationType = "{PREEMPTED}"',
                    },
                ),
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
                        time=_time(op.end_time or op.insert_time),
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
            inst = self._call(
                f"get instance {name}",
                self._clients().instances.get,
                project=self.project,
                zone=zone,
                instance=name,
            )
        except NotFound:
            return True
        return inst.labels.get(naming.LABEL_CLUSTER) == self._cluster_label


def _failure(op: compute_v1.Operation) -> errors.OperationFailure | None:
    pairs = [(e.code, e.message) for e in op.error.errors] if op.error else []
    return errors.classify_operation(pairs, http_status=int(op.http_error_status_code or 0))


def _network_url(network: str) -> str:
    return network if "/" in network else f"global/networks/{network}"


def _subnetwork_url(subnetwork: str, region: str) -> str:
    return subnetwork if "/" in subnetwork else f"regions/{region}/subnetworks/{subnetwork}"


def _time(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
