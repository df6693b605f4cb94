"""The AWS CloudProvider: EC2 instance types, offerings and prices, launches through CreateFleet,
termination, listing by the cluster tag, AMI drift, and interruption messages from SQS.

Orchestrates the pieces, each in its own module: boto3 clients, translated calls and pagination in
providers.aws.sdk (no botocore exception leaves a call; codes are mapped in providers.aws.errors); what
an AWSNodeClass resolves to (subnets, security groups, AMIs, instance profile, launch templates) in
providers.aws.nodeclass; which offerings in which CreateFleet requests, and how an answer reads, in
providers.aws.launch (the order itself is provisioner.cloudprovider.launch_order's); shapes in
providers.aws.instancetypes; prices in providers.aws.pricing; what the region offers (shapes, zones,
prices, reserved offerings, cached) in providers.aws.offerings; message parsing in
providers.aws.interruption and the queue in providers.aws.queue; node bootstrap user data in
providers.aws.bootstrap; gang launches and placement groups in providers.aws.group; EFA in
providers.aws.efa; network-topology labels in providers.aws.topology.

Credentials come from boto3's default chain (environment, IRSA web identity token, instance profile)
unless a session is given; they are never logged, and error messages carry AWS's code and message only.
The endpoint is the `endpoint_url` argument, else `AWS_ENDPOINT_URL`, else AWS's own.
"""

from __future__ import annotations

import builtins
import logging
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import boto3

from providers.aws import (
    bootstrap,
    efa,
    errors,
    group,
    launch,
    queue,
    reservations,
    topology,
)
from providers.aws.model import AWSNodeClass
from providers.aws.nodeclass import Resolver, aws_node_class
from providers.aws.offerings import RegionOfferings
from providers.aws.sdk import SDK, TTLCache, call
from provisioner.api import NodeClaim, mig
from provisioner.api import labels as wk
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import (
    CloudProviderError,
    CreateError,
    Instance,
    InstanceType,
    InsufficientCapacity,
    InterruptionEvent,
    NotFound,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.protocol import GangPlacement

log = logging.getLogger("providers.aws")

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
"""Instance states that still cost money or may come back (terminated ones are gone)."""

RECENT_LAUNCH_WINDOW = 300.0
"""Seconds a launch is remembered in memory, covering DescribeInstances' eventual consistency."""


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """(zone, instance id) of `aws:///ZONE/i-...`. Raises NotFound for anything else."""
    prefix = "aws:///"
    if not provider_id.startswith(prefix):
        raise NotFound(f"{provider_id!r} is not an AWS provider id (aws:///ZONE/i-...)")
    zone, _, instance_id = provider_id[len(prefix) :].rpartition("/")
    if not instance_id.startswith("i-"):
        raise NotFound(f"{provider_id!r} is not an AWS provider id (aws:///ZONE/i-...)")
    return zone, instance_id


def provider_id_of(zone: str, instance_id: str) -> str:
    return f"aws:///{zone}/{instance_id}"


class AWSProvider:
    """EC2 behind the CloudProvider protocol (see the module docstring)."""

    name = "aws"

    def __init__(
        self,
        *,
        region: str,
        cluster_name: str,
        endpoint_url: str | None = None,
        session: boto3.Session | None = None,
        interruption_queue_url: str | None = None,
        max_attempts: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        cache_ttl: float = 300.0,
        selector_ttl: float = 60.0,
        use_pricing_api: bool = True,
        kubernetes_version: str | None = None,
        cluster_endpoint: str | None = None,
        cluster_ca_bundle: str | None = None,
        cluster_service_cidr: str | None = None,
    ) -> None:
        self.region = region
        self.cluster_name = cluster_name
        self._queue_url = interruption_queue_url
        self._sdk = SDK(region=region, session=session, endpoint_url=endpoint_url, max_attempts=max_attempts)
        self._cache = TTLCache(clock, cache_ttl)
        self._offerings = RegionOfferings(
            self._sdk, self._cache, region=region, use_pricing_api=use_pricing_api
        )
        # Aliases name AMIs per Kubernetes minor version (SSM paths); the controller knows it, or the env.
        kubernetes_version = kubernetes_version or os.environ.get("PROVISIONER_KUBERNETES_VERSION")
        self._nodeclasses = Resolver(
            self._sdk,
            self._cache,
            cluster_name=cluster_name,
            selector_ttl=selector_ttl,
            kubernetes_version=kubernetes_version,
            given_cluster=(
                bootstrap.ClusterInfo(
                    name=cluster_name,
                    endpoint=cluster_endpoint,
                    ca_bundle=cluster_ca_bundle,
                    service_cidr=cluster_service_cidr,
                    version=kubernetes_version,
                )
                if cluster_endpoint and cluster_ca_bundle
                else None
            ),
        )
        self._clock = clock
        self._recent: dict[str, tuple[Instance, float]] = {}
        self._topology = topology.Known()

    # --- protocol --------------------------------------------------------------------------------------

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        """Every type the NodeClass can launch: offered in its subnets' zones, with an AMI for its arch,
        with spot and on-demand offerings priced per zone. Raises NodeClassNotReady, TransientError."""
        nc = aws_node_class(node_class)
        resolved = self._nodeclasses.resolve(nc)
        zones = {s.zone for s in resolved.subnets}
        terms = nc.spec.capacity_reservation_selector_terms
        reserved = self._offerings.reserved_offerings(terms, zones) if terms else {}
        types = [
            it
            for it in reservations.with_reserved(self._offerings.priced_types(zones), reserved)
            if launch.image_key(it, set(resolved.images)) is not None and it.offerings
        ]
        efa_counts = self.efa_interfaces(nc)
        return efa.with_resource(types, efa_counts) if efa_counts else types

    def efa_interfaces(self, nc: AWSNodeClass) -> dict[str, int]:
        """Type -> EFA interfaces to launch with, when the NodeClass asks for EFA ({} otherwise)."""
        if nc.spec.placement is None or not nc.spec.placement.efa:
            return {}
        self._offerings.shapes()
        return {name: n for name, n in self._offerings.efa_max.items() if n > 0}

    def region_instance_types(self) -> list[InstanceType]:
        """Every type offered in the region, in every zone, priced (no NodeClass needed), with a
        `reserved` offering for every active capacity reservation of the account."""
        try:
            reserved = self._offerings.reserved_offerings(None, None)
        except CloudProviderError as err:
            # A listing: an endpoint without the API (moto) or a role without
            # ec2:DescribeCapacityReservations still lists every type, without reserved offerings.
            log.warning("capacity reservations not listed: %s", err)
            reserved = {}
        return [
            it
            for it in reservations.with_reserved(self._offerings.priced_types(None), reserved)
            if it.offerings
        ]

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        """Launch the first offering with capacity in the launch order of the claim's options: one
        CreateFleet per run of one capacity type, each spanning the allowed zones, so a stockout in one
        zone falls to another zone and then to on-demand within this call. Idempotent by the claim name
        (tag lookup first)."""
        nc = aws_node_class(node_class)
        existing = self._find_claim_instance(claim.name) or self._recent_launch(claim.name)
        if existing is not None:
            log.info("nodeclaim %s already has instance %s", claim.name, existing.provider_id)
            return existing
        resolved = self._nodeclasses.resolve(nc)
        plan = launch.plan(
            claim,
            instance_types,
            subnets=list(resolved.subnets),
            image_keys=set(resolved.images),
            efa_interfaces=self.efa_interfaces(nc),
        )
        unavailable = list(plan.unavailable)
        if not plan.attempts:
            raise InsufficientCapacity(
                unavailable,
                f"nodeclaim {claim.name}: no available offering of its options "
                f"{claim.instance_type_options() or '(all types)'} in the zones of node class {nc.name} "
                f"({', '.join(sorted({s.zone for s in resolved.subnets}))}) for its capacity types",
            )
        # The MIG manager partitions the GPUs before the node registers: the layout is a kubelet label.
        layout = claim.metadata.labels.get(mig.MIG_CONFIG_LABEL)
        templates = self._nodeclasses.templates(
            nc, resolved, plan.image_keys, {mig.MIG_CONFIG_LABEL: layout} if layout else None
        )
        tags = launch.instance_tags(claim, nc, cluster_name=self.cluster_name)
        zone_of_subnet = {s.id: s.zone for s in resolved.subnets}
        failed: list[OfferingKey] = list(unavailable)
        kinds: set[str] = set()
        others: list[str] = []
        for attempt in plan.attempts:
            if attempt.capacity_type == launch.RESERVED:
                reserved = reservations.launch_into(
                    self._sdk.ec2, claim, attempt, templates=templates, tags=tags, provider_id=provider_id_of
                )
                # The free counts moved (or a reservation is gone): read them again next time.
                self._cache.forget(lambda key: isinstance(key, tuple) and key[:1] == ("reservations",))
                if isinstance(reserved, Instance):
                    self._recent[claim.name] = (reserved, self._clock())
                    return reserved
                failed.extend(k for k in reserved if k not in failed)
                kinds.add("capacity")
                continue
            request = launch.fleet_request(attempt, launch_templates=templates, tags=tags)
            try:
                answer = self._sdk.ec2.create_fleet(**request)
            except Exception as err:
                code = errors.error_code(err)
                if not errors.is_capacity_code(code):
                    raise errors.translate(err, operation="CreateFleet", default=CreateError) from err
                # A capacity error for the whole request (not per override): every override shares it.
                answer = {"Errors": [{"ErrorCode": code, "Lifecycle": attempt.capacity_type}]}
            outcome = launch.read_fleet(
                answer, attempt, zone_of_subnet=zone_of_subnet, capacity_codes=errors.CAPACITY_CODES
            )
            found_out = [key for key, _ in outcome.capacity_failures]
            if outcome.instance_id is not None:
                chosen = outcome.launched or attempt.candidates[0]
                skipped = [k for k in failed[len(unavailable) :] + found_out if k != chosen.key]
                log.info(
                    "launched %s (%s in %s, %s, $%.4f/h) for nodeclaim %s",
                    outcome.instance_id,
                    chosen.instance_type,
                    chosen.zone,
                    chosen.capacity_type,
                    chosen.price,
                    claim.name,
                )
                launched = Instance(
                    provider_id=provider_id_of(chosen.zone, outcome.instance_id),
                    instance_type=chosen.instance_type,
                    zone=chosen.zone,
                    capacity_type=chosen.capacity_type,
                    price=chosen.price,
                    state="pending",
                    nodeclaim=claim.name,
                    nodepool=claim.nodepool,
                    image_id=resolved.images.get(efa.split(chosen.image_key)[0]),
                    tags=tags,
                    skipped=tuple(dict.fromkeys(skipped)),
                )
                self._recent[claim.name] = (launched, self._clock())
                return launched
            if any(e.split(":", 1)[0] in group.LT_MISSING_CODES for e in outcome.other_errors):
                # Someone deleted our template: forget it so the retry makes it again.
                self._nodeclasses.forget_templates(set(templates.values()))
                raise TransientError(f"CreateFleet: launch template missing for node class {nc.name}")
            if outcome.other_errors and not outcome.capacity_failures:
                others.extend(outcome.other_errors)
                continue
            tried = found_out or [c.key for c in attempt.candidates]
            failed.extend(k for k in tried if k not in failed)
            kinds.update(errors.capacity_kind(code) for _, code in outcome.capacity_failures)
            others.extend(outcome.other_errors)
            log.info(
                "nodeclaim %s: no %s capacity for %s; trying the next option",
                claim.name,
                attempt.capacity_type,
                ", ".join(str(k) for k in tried),
            )
        if others and len(failed) == len(unavailable):
            raise CreateError(f"CreateFleet for nodeclaim {claim.name}: {'; '.join(others)}")
        kind = "quota" if kinds == {"quota"} else "capacity"
        raise InsufficientCapacity(
            failed,
            f"nodeclaim {claim.name}: insufficient {kind} for every offering tried: "
            + ", ".join(str(k) for k in failed),
            kind=kind,
        )

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        """One CreateFleet for every member, all of one offering, or none (providers.aws.group)."""
        return group.launch_group(self, claims, instance_types, aws_node_class(node_class), placement)

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        """Delete the placement groups made per gang that no live instance is in (providers.aws.group)."""
        return group.collect_placement(self, older_than=older_than)

    def delete(self, provider_id: str) -> None:
        """Terminate. NotFound when the instance is unknown, terminated or already shutting down."""
        instance = self._describe_one(provider_id)
        if instance is None or instance["State"]["Name"] in ("terminated", "shutting-down"):
            raise NotFound(f"instance {provider_id} is already gone")
        call(
            "TerminateInstances",
            self._sdk.ec2.terminate_instances,
            not_found=True,
            InstanceIds=[instance["InstanceId"]],
        )
        log.info("terminating %s", provider_id)

    def get(self, provider_id: str) -> Instance:
        """The instance. NotFound when unknown or terminated."""
        instance = self._describe_one(provider_id)
        if instance is None or instance["State"]["Name"] == "terminated":
            raise NotFound(f"instance {provider_id} not found")
        return self.with_topology([self._instance(instance)])[0]

    def list(self) -> builtins.list[Instance]:
        """Every instance tagged with this cluster that is not terminated."""
        filters = [
            {"Name": f"tag:{wk.CLUSTER}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        return self.with_topology([self._instance(i) for i in self._describe_instances(filters)])

    def with_topology(self, instances: builtins.list[Instance]) -> builtins.list[Instance]:
        """The instances with their network-topology labels (providers.aws.topology)."""
        return self._topology.labelled(self._sdk, instances)

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        """`AMIDrift: ...` when the instance's image is not the AMI the NodeClass resolves to now."""
        nc = aws_node_class(node_class)
        image_id = claim.status.image_id
        if claim.status.provider_id and not image_id:
            try:
                image_id = self.get(claim.status.provider_id).image_id
            except NotFound:
                return None
        if not image_id:
            return None
        wanted = self._nodeclasses.resolve(nc).images
        if image_id in wanted.values():
            return None
        return f"AMIDrift: instance runs {image_id}, node class {nc.name} selects {sorted(wanted.values())}"

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        """Events from the interruption queue; every message read is deleted (unknown ones with a log)."""
        if not self._queue_url:
            return []
        parsed = queue.receive(self._sdk.client("sqs"), self._queue_url)
        if not parsed:
            return []
        ids = sorted({iid for message, _ in parsed for iid in message.instance_ids})
        zones = {
            i["InstanceId"]: i["Placement"]["AvailabilityZone"]
            for i in self._describe_instances([{"Name": "instance-id", "Values": ids}])
        }
        events = []
        for message, message_id in parsed:
            for iid in message.instance_ids:
                if iid not in zones:
                    log.info("message %s names unknown instance %s; dropped", message_id, iid)
                    continue
                events.append(
                    InterruptionEvent(
                        provider_id=provider_id_of(zones[iid], iid),
                        kind=message.kind,
                        time=message.time,
                        detail=message.detail,
                    )
                )
        return events

    # --- instances -------------------------------------------------------------------------------------

    @property
    def sdk(self) -> SDK:
        return self._sdk

    @property
    def resolver(self) -> Resolver:
        return self._nodeclasses

    def find_claim_instances(self, claim_names: builtins.list[str]) -> dict[str, Instance]:
        """Claim name -> its live instance, for those of the claims that have one (tags, then the
        launches of the last minutes DescribeInstances may not show yet)."""
        found = {
            i.nodeclaim: i
            for i in self.find_tagged({wk.NODECLAIM: claim_names})
            if i.nodeclaim and i.state != "shutting-down"
        }
        for name in claim_names:
            recent = found.get(name) or self._recent_launch(name)
            if recent is not None:
                found[name] = recent
        return found

    def find_tagged(self, tags: dict[str, str | builtins.list[str]]) -> builtins.list[Instance]:
        """This cluster's live instances with these tags (a list: any of its values)."""
        filters = [
            {"Name": f"tag:{k}", "Values": v if isinstance(v, builtins.list) else [v]}
            for k, v in tags.items()
        ]
        filters += [
            {"Name": f"tag:{wk.CLUSTER}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
        ]
        return [self._instance(i) for i in self._describe_instances(filters)]

    def remember_launch(self, claim_name: str, instance: Instance) -> None:
        self._recent[claim_name] = (instance, self._clock())

    def terminate_ids(self, instance_ids: builtins.list[str]) -> None:
        """Terminate instances by id at once (the members of a group launch that came back short)."""
        if instance_ids:
            call(
                "TerminateInstances",
                self._sdk.ec2.terminate_instances,
                not_found=True,
                InstanceIds=instance_ids,
            )

    def _find_claim_instance(self, claim_name: str) -> Instance | None:
        filters = [
            {"Name": f"tag:{wk.NODECLAIM}", "Values": [claim_name]},
            {"Name": f"tag:{wk.CLUSTER}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
        ]
        found = self._describe_instances(filters)
        return self._instance(found[0]) if found else None

    def _recent_launch(self, claim_name: str) -> Instance | None:
        """An instance this process launched for the claim moments ago. DescribeInstances is eventually
        consistent: a retried create right after a launch may not find the instance by its tags yet, and
        must not launch a second one."""
        now = self._clock()
        for name, (_, at) in builtins.list(self._recent.items()):
            if now - at > RECENT_LAUNCH_WINDOW:
                del self._recent[name]
        entry = self._recent.get(claim_name)
        return entry[0] if entry else None

    def _describe_one(self, provider_id: str) -> dict[str, Any] | None:
        _, instance_id = parse_provider_id(provider_id)
        found = self._describe_instances([{"Name": "instance-id", "Values": [instance_id]}])
        return found[0] if found else None

    def _describe_instances(self, filters: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
        reservations = self._sdk.paginate(
            "DescribeInstances", "describe_instances", "Reservations", Filters=filters
        )
        return [i for r in reservations for i in r.get("Instances") or []]

    def _instance(self, raw: dict[str, Any]) -> Instance:
        zone = raw.get("Placement", {}).get("AvailabilityZone", "")
        type_name = raw.get("InstanceType", "")
        tags = launch.tag_dict(raw.get("Tags"))
        reservation_id = raw.get("CapacityReservationId") or tags.get(wk.CAPACITY_RESERVATION_ID)
        if reservation_id:
            capacity_type = wk.CAPACITY_TYPE_RESERVED
        elif raw.get("InstanceLifecycle") == "spot":
            capacity_type = wk.CAPACITY_TYPE_SPOT
        else:
            capacity_type = wk.CAPACITY_TYPE_ON_DEMAND
        return Instance(
            provider_id=provider_id_of(zone, raw["InstanceId"]),
            instance_type=type_name,
            zone=zone,
            capacity_type=capacity_type,
            price=self._offerings.instance_price(type_name, zone, capacity_type),
            state=raw.get("State", {}).get("Name", "unknown"),
            nodeclaim=tags.get(wk.NODECLAIM),
            nodepool=tags.get(wk.NODEPOOL),
            launched_at=raw.get("LaunchTime"),
            image_id=raw.get("ImageId"),
            tags=tags,
            placement_group=raw.get("Placement", {}).get("GroupName") or None,
            reservation_id=reservation_id or None,
            reservation_type=(
                tags.get(wk.CAPACITY_RESERVATION_TYPE, wk.RESERVATION_TYPE_DEFAULT)
                if reservation_id
                else None
            ),
        )
