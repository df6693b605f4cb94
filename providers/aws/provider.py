"""The AWS CloudProvider: EC2 instance types, offerings and prices, launches through CreateFleet,
termination, listing by the cluster tag, AMI drift, and interruption messages from SQS.

Owns every boto3 call of the provider and the translation of their errors (providers.aws.errors) so no
botocore exception leaves it. Decisions that need no I/O (which offerings, in which order, how the
answer reads) live in providers.aws.launch; shapes in providers.aws.instancetypes; prices in
providers.aws.pricing; message parsing in providers.aws.interruption; AMI aliases in
providers.aws.aliases; node bootstrap user data in providers.aws.bootstrap.

Credentials come from boto3's default chain (environment, IRSA web identity token, instance profile)
unless a session is given; they are never logged, and error messages carry AWS's code and message only.
The endpoint is the `endpoint_url` argument, else `AWS_ENDPOINT_URL`, else AWS's own.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
from botocore.config import Config

from providers.aws import aliases, bootstrap, errors, instancetypes, interruption, launch, pricing
from provisioner.api import AWSNodeClass, NodeClaim
from provisioner.api import labels as wk
from provisioner.api.nodeclass import NodeClass, SelectorTerm
from provisioner.cloudprovider import (
    CloudProviderError,
    CreateError,
    Instance,
    InstanceType,
    InsufficientCapacity,
    InterruptionEvent,
    NodeClassNotReady,
    NotFound,
    Offering,
    OfferingKey,
    TransientError,
)

log = logging.getLogger("providers.aws")

T = TypeVar("T")

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
"""Instance states that still cost money or may come back (terminated ones are gone)."""

RECENT_LAUNCH_WINDOW = 300.0
"""Seconds a launch is remembered in memory, covering DescribeInstances' eventual consistency."""

_LT_MISSING_CODES = frozenset(
    {"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"}
)


@dataclass(slots=True)
class _Entry:
    value: Any
    expires: float


class _TTLCache:
    """A few keyed values, each good for `ttl` seconds of the injected clock."""

    def __init__(self, clock: Callable[[], float], ttl: float) -> None:
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[Any, _Entry] = {}

    def get(self, key: Any, load: Callable[[], T], *, ttl: float | None = None) -> T:
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and entry.expires > now:
            return entry.value  # type: ignore[no-any-return]
        value = load()
        self._entries[key] = _Entry(value, now + (self._ttl if ttl is None else ttl))
        return value

    def forget(self, key: Any) -> None:
        self._entries.pop(key, None)


@dataclass(frozen=True, slots=True)
class _Resolved:
    """What an AWSNodeClass's selectors found."""

    subnets: tuple[launch.Subnet, ...]
    security_group_ids: tuple[str, ...]
    images: dict[str, str]
    """Image key (`amd64`, `arm64`, `amd64/nvidia`...; see launch.image_key) -> AMI id."""
    instance_profile: str


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
        self._session = session or boto3.Session()
        self._endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        retries: dict[str, Any] = {"mode": "standard"}
        if max_attempts is not None:
            retries["total_max_attempts"] = max_attempts
        self._config = Config(
            retries=retries, connect_timeout=10, read_timeout=60, user_agent_extra="provisioner"
        )
        self._clients: dict[tuple[str, str | None], Any] = {}
        self._cache = _TTLCache(clock, cache_ttl)
        self._selector_ttl = selector_ttl
        self._use_pricing_api = use_pricing_api
        # Aliases name AMIs per Kubernetes minor version (SSM paths); the controller knows it, or the env.
        self._kubernetes_version = kubernetes_version or os.environ.get("PROVISIONER_KUBERNETES_VERSION")
        self._given_cluster = (
            bootstrap.ClusterInfo(
                name=cluster_name,
                endpoint=cluster_endpoint,
                ca_bundle=cluster_ca_bundle,
                service_cidr=cluster_service_cidr,
                version=self._kubernetes_version,
            )
            if cluster_endpoint and cluster_ca_bundle
            else None
        )
        self._templates_known: set[str] = set()
        self._clock = clock
        self._recent: dict[str, tuple[Instance, float]] = {}

    # --- protocol --------------------------------------------------------------------------------------

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        """Every type the NodeClass can launch: offered in its subnets' zones, with an AMI for its arch,
        with spot and on-demand offerings priced per zone. Raises NodeClassNotReady, TransientError."""
        nc = self._aws_node_class(node_class)
        resolved = self._resolve(nc)
        zones = {s.zone for s in resolved.subnets}
        return [
            it
            for it in self._priced_types(zones)
            if launch.image_key(it, set(resolved.images)) is not None and it.offerings
        ]

    def region_instance_types(self) -> list[InstanceType]:
        """Every type offered in the region, in every zone, priced (no NodeClass needed)."""
        return [it for it in self._priced_types(None) if it.offerings]

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        """Launch the cheapest offering of the claim's options: one CreateFleet per capacity type (spot
        first when cheaper), each spanning the allowed zones, so a stockout in one zone falls to another
        zone and then to on-demand within this call. Idempotent by the claim name (tag lookup first)."""
        nc = self._aws_node_class(node_class)
        existing = self._find_claim_instance(claim.name) or self._recent_launch(claim.name)
        if existing is not None:
            log.info("nodeclaim %s already has instance %s", claim.name, existing.provider_id)
            return existing
        resolved = self._resolve(nc)
        cands, unavailable = launch.candidates(
            claim, instance_types, subnets=list(resolved.subnets), image_keys=set(resolved.images)
        )
        if not cands:
            raise InsufficientCapacity(
                unavailable,
                f"nodeclaim {claim.name}: no available offering of its options "
                f"{claim.instance_type_options() or '(all types)'} in the zones of node class {nc.name} "
                f"({', '.join(sorted({s.zone for s in resolved.subnets}))}) for its capacity types",
            )
        templates = self._ensure_templates(nc, resolved, {c.image_key for c in cands})
        tags = launch.instance_tags(claim, nc, cluster_name=self.cluster_name)
        zone_of_subnet = {s.id: s.zone for s in resolved.subnets}
        failed: list[OfferingKey] = list(unavailable)
        kinds: set[str] = set()
        others: list[str] = []
        for attempt in launch.plan(cands):
            request = launch.fleet_request(attempt, launch_templates=templates, tags=tags)
            try:
                answer = self._ec2.create_fleet(**request)
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
                    image_id=resolved.images.get(chosen.image_key),
                    tags=tags,
                    skipped=tuple(dict.fromkeys(skipped)),
                )
                self._recent[claim.name] = (launched, self._clock())
                return launched
            if any(e.split(":", 1)[0] in _LT_MISSING_CODES for e in outcome.other_errors):
                # Someone deleted our template: forget it so the retry makes it again.
                for name in templates.values():
                    self._templates_known.discard(name)
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

    def delete(self, provider_id: str) -> None:
        """Terminate. NotFound when the instance is unknown, terminated or already shutting down."""
        instance = self._describe_one(provider_id)
        if instance is None or instance["State"]["Name"] in ("terminated", "shutting-down"):
            raise NotFound(f"instance {provider_id} is already gone")
        self._call(
            "TerminateInstances",
            self._ec2.terminate_instances,
            not_found=True,
            InstanceIds=[instance["InstanceId"]],
        )
        log.info("terminating %s", provider_id)

    def get(self, provider_id: str) -> Instance:
        """The instance. NotFound when unknown or terminated."""
        instance = self._describe_one(provider_id)
        if instance is None or instance["State"]["Name"] == "terminated":
            raise NotFound(f"instance {provider_id} not found")
        return self._instance(instance)

    def list(self) -> builtins.list[Instance]:
        """Every instance tagged with this cluster that is not terminated."""
        filters = [
            {"Name": f"tag:{wk.CLUSTER}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        return [self._instance(i) for i in self._describe_instances(filters)]

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        """`AMIDrift: ...` when the instance's image is not the AMI the NodeClass resolves to now."""
        nc = self._aws_node_class(node_class)
        image_id = claim.status.image_id
        if claim.status.provider_id and not image_id:
            try:
                image_id = self.get(claim.status.provider_id).image_id
            except NotFound:
                return None
        if not image_id:
            return None
        wanted = self._resolve(nc).images
        if image_id in wanted.values():
            return None
        return f"AMIDrift: instance runs {image_id}, node class {nc.name} selects {sorted(wanted.values())}"

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        """Events from the interruption queue; every message read is deleted (unknown ones with a log)."""
        if not self._queue_url:
            return []
        sqs = self._client("sqs")
        parsed: list[tuple[interruption.ParsedMessage, str]] = []
        for _ in range(10):  # at most 100 messages a call, so a flood cannot starve the controller loop
            answer = self._call(
                "ReceiveMessage",
                sqs.receive_message,
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
            )
            messages = answer.get("Messages") or []
            if not messages:
                break
            done: builtins.list[dict[str, str]] = []
            for m in messages:
                message = interruption.parse(m.get("Body", ""))
                if message is None:
                    log.info("deleting message %s: not an interruption we act on", m.get("MessageId"))
                else:
                    parsed.append((message, m.get("MessageId", "")))
                done.append({"Id": str(len(done)), "ReceiptHandle": m["ReceiptHandle"]})
            self._call("DeleteMessageBatch", sqs.delete_message_batch, QueueUrl=self._queue_url, Entries=done)
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

    # --- instance types and prices ---------------------------------------------------------------------

    def _shapes(self) -> dict[str, InstanceType]:
        def load() -> dict[str, InstanceType]:
            out: dict[str, InstanceType] = {}
            paginator = self._ec2.get_paginator("describe_instance_types")
            with self._translated("DescribeInstanceTypes"):
                for page in paginator.paginate():
                    for info in page.get("InstanceTypes") or []:
                        it = instancetypes.from_description(info, region=self.region)
                        if it is not None:
                            out[it.name] = it
            return out

        return self._cache.get("shapes", load)

    def _type_zones(self) -> dict[str, set[str]]:
        def load() -> dict[str, set[str]]:
            out: dict[str, set[str]] = {}
            paginator = self._ec2.get_paginator("describe_instance_type_offerings")
            with self._translated("DescribeInstanceTypeOfferings"):
                for page in paginator.paginate(LocationType="availability-zone"):
                    for o in page.get("InstanceTypeOfferings") or []:
                        out.setdefault(o["InstanceType"], set()).add(o["Location"])
            return out

        return self._cache.get("type-zones", load)

    def _spot_prices(self) -> dict[tuple[str, str], float]:
        def load() -> dict[tuple[str, str], float]:
            with self._translated("DescribeSpotPriceHistory"):
                return pricing.fetch_spot(self._ec2)

        return self._cache.get("spot-prices", load)

    def _on_demand_prices(self) -> dict[str, float]:
        def load() -> dict[str, float]:
            if not self._use_pricing_api:
                return {}
            try:
                client = self._client(
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

    def _price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        if capacity_type == wk.CAPACITY_TYPE_SPOT:
            price = self._spot_prices().get((instance_type, zone))
            return price if price is not None else pricing.fallback_spot(instance_type, self.region, zone)
        price = self._on_demand_prices().get(instance_type)
        return price if price is not None else pricing.fallback_on_demand(instance_type, self.region)

    def _priced_types(self, zones: set[str] | None) -> builtins.list[InstanceType]:
        key = ("priced", frozenset(zones) if zones is not None else None)
        return self._cache.get(key, lambda: self._price_types(zones))

    def _price_types(self, zones: set[str] | None) -> builtins.list[InstanceType]:
        shapes = self._shapes()
        type_zones = self._type_zones()
        out = []
        for name in sorted(shapes):
            offerings = []
            for zone in sorted(type_zones.get(name, set())):
                if zones is not None and zone not in zones:
                    continue
                for capacity_type in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND):
                    price = self._price(name, zone, capacity_type)
                    if price is not None:
                        offerings.append(Offering(zone=zone, capacity_type=capacity_type, price=price))
            out.append(shapes[name].with_offerings(tuple(offerings)))
        return out

    # --- node class resolution -------------------------------------------------------------------------

    def _aws_node_class(self, node_class: NodeClass) -> AWSNodeClass:
        if not isinstance(node_class, AWSNodeClass):
            raise NodeClassNotReady(
                f"node class {getattr(node_class, 'name', '?')!r} is a {node_class.kind}; "
                "the AWS provider launches only AWSNodeClass"
            )
        return node_class

    def _resolve(self, nc: AWSNodeClass) -> _Resolved:
        key = ("resolved", nc.name, nc.spec.model_dump_json())
        return self._cache.get(key, lambda: self._resolve_now(nc), ttl=self._selector_ttl)

    def _resolve_now(self, nc: AWSNodeClass) -> _Resolved:
        spec = nc.spec
        subnets = {
            s["SubnetId"]: launch.Subnet(
                id=s["SubnetId"],
                zone=s["AvailabilityZone"],
                available_ips=int(s.get("AvailableIpAddressCount", 0)),
            )
            for term in spec.subnet_selector_terms
            for s in self._select("DescribeSubnets", "describe_subnets", "Subnets", "subnet-id", term)
        }
        if not subnets:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.subnetSelectorTerms matched no subnet in {self.region}"
            )
        groups = {
            g["GroupId"]
            for term in spec.security_group_selector_terms
            for g in self._select(
                "DescribeSecurityGroups", "describe_security_groups", "SecurityGroups", "group-id", term
            )
        }
        if not groups:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.securityGroupSelectorTerms matched no security group"
            )
        images = self._resolve_images(nc)
        if not images:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.amiSelectorTerms matched no available x86_64 or arm64 AMI"
            )
        profile = spec.instance_profile or self._ensure_instance_profile(nc)
        return _Resolved(
            subnets=tuple(sorted(subnets.values(), key=lambda s: s.id)),
            security_group_ids=tuple(sorted(groups)),
            images=images,
            instance_profile=profile,
        )

    def _select(
        self, operation: str, method: str, key: str, id_filter: str, term: SelectorTerm
    ) -> builtins.list[dict[str, Any]]:
        filters: builtins.list[dict[str, Any]] = []
        if term.id:
            filters.append({"Name": id_filter, "Values": [term.id]})
        if term.name:
            filters.append(
                {"Name": "group-name" if key == "SecurityGroups" else "tag:Name", "Values": [term.name]}
            )
        filters.extend(_tag_filters(term.tags))
        out: builtins.list[dict[str, Any]] = []
        with self._translated(operation):
            for page in self._ec2.get_paginator(method).paginate(Filters=filters):
                out.extend(page.get(key) or [])
        return out

    def _resolve_images(self, nc: AWSNodeClass) -> dict[str, str]:
        """Image key -> AMI: for an alias, the EKS-optimized AMIs AWS publishes in SSM; otherwise the newest
        available AMI any term selects, per architecture."""
        aliased: dict[str, str] = {}
        found: dict[str, dict[str, Any]] = {}
        for term in nc.spec.ami_selector_terms:
            if term.alias:
                for key, image_id in self._resolve_alias(nc, term.alias).items():
                    aliased.setdefault(key, image_id)
                continue
            params: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
            if term.id:
                params["ImageIds"] = [term.id]
            if term.name:
                params["Filters"].append({"Name": "name", "Values": [term.name]})
            params["Filters"].extend(_tag_filters(term.tags))
            if term.owner:
                params["Owners"] = [term.owner]
            elif not term.id:
                params["Owners"] = ["self", "amazon"]
            with self._translated("DescribeImages", not_found=False):
                try:
                    images = self._ec2.describe_images(**params).get("Images") or []
                except Exception as err:
                    if errors.error_code(err) in ("InvalidAMIID.NotFound", "InvalidAMIID.Malformed"):
                        images = []
                    else:
                        raise
            for image in images:
                arch = instancetypes.ARCHITECTURES.get(image.get("Architecture", ""))
                if arch is None:
                    continue
                best = found.get(arch)
                if best is None or (image.get("CreationDate", ""), image["ImageId"]) > (
                    best.get("CreationDate", ""),
                    best["ImageId"],
                ):
                    found[arch] = image
        return {**{arch: image["ImageId"] for arch, image in found.items()}, **aliased}

    def _resolve_alias(self, nc: AWSNodeClass, alias: str) -> dict[str, str]:
        cluster = self._cluster() if not self._kubernetes_version else None
        version = self._kubernetes_version or (cluster.version if cluster else None)
        if not version:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: amiSelectorTerms alias {alias!r} needs the cluster's Kubernetes "
                f"version: EKS DescribeCluster({self.cluster_name!r}) did not give it; pass kubernetes_version "
                "or set PROVISIONER_KUBERNETES_VERSION"
            )
        try:
            names = aliases.parameters(alias, version)
        except aliases.AliasError as err:
            raise NodeClassNotReady(f"AWSNodeClass {nc.name}: amiSelectorTerms: {err}") from None
        by_name = {name: key for key, name in names.items()}
        out: dict[str, str] = {}
        ssm = self._client("ssm")
        chunk = builtins.list(by_name)
        for i in range(0, len(chunk), 10):  # GetParameters takes at most 10 names
            answer = self._call(
                "GetParameters", ssm.get_parameters, default=NodeClassNotReady, Names=chunk[i : i + 10]
            )
            for p in answer.get("Parameters") or []:
                out[by_name[p["Name"]]] = str(p["Value"])
        return out

    def _ensure_instance_profile(self, nc: AWSNodeClass) -> str:
        """The instance profile made for the NodeClass's role (created, or repaired to hold that role)."""
        role = nc.spec.role or ""
        digest = hashlib.sha256(f"{self.region}/{nc.name}".encode()).hexdigest()[:12]
        name = f"provisioner_{self.cluster_name}_{digest}"[:128]
        iam = self._client("iam")
        operation = "GetInstanceProfile"
        try:
            try:
                roles = [
                    r["RoleName"]
                    for r in iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]
                ]
            except Exception as err:
                if errors.error_code(err) != "NoSuchEntity":
                    raise
                operation = "CreateInstanceProfile"
                tags = {**launch.cluster_tags(self.cluster_name), f"{wk.GROUP}/nodeclass": nc.name}
                iam.create_instance_profile(InstanceProfileName=name, Tags=launch.tag_list(tags))
                roles = []
            if roles != [role]:
                operation = "AddRoleToInstanceProfile"
                for old in roles:
                    iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=old)
                iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
                log.info("instance profile %s now holds role %s (node class %s)", name, role, nc.name)
        except Exception as err:
            translated = errors.translate(err, operation=operation, default=NodeClassNotReady)
            if isinstance(translated, NodeClassNotReady):
                raise NodeClassNotReady(
                    f"AWSNodeClass {nc.name}: cannot make an instance profile for spec.role {role!r}: {translated}"
                ) from err
            raise translated from err
        return name

    # --- launch templates ------------------------------------------------------------------------------

    def _ensure_templates(self, nc: AWSNodeClass, resolved: _Resolved, keys: set[str]) -> dict[str, str]:
        """Arch -> the name of an existing launch template for the NodeClass as it resolves now."""
        if not resolved.instance_profile:
            raise NodeClassNotReady(f"AWSNodeClass {nc.name}: no instance profile or role")
        family = bootstrap.family_of(nc)
        cluster = self._cluster() if bootstrap.needs_cluster(family) else None
        if bootstrap.needs_cluster(family) and cluster is None:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: {family} nodes need the cluster's endpoint and CA to join: EKS "
                f"DescribeCluster({self.cluster_name!r}) found no cluster; pass cluster_endpoint and "
                "cluster_ca_bundle, or use amiFamily Custom with your own user data"
            )
        user_data = bootstrap.user_data(family, cluster=cluster, custom=nc.spec.user_data)
        out = {}
        for key in sorted(keys):
            data = launch.launch_template_data(
                nc,
                image_id=resolved.images[key],
                security_group_ids=list(resolved.security_group_ids),
                instance_profile=resolved.instance_profile,
                cluster_name=self.cluster_name,
                user_data=user_data,
            )
            name = launch.template_name(self.cluster_name, nc, data)
            if name not in self._templates_known:
                self._create_template(name, data, nc)
                self._templates_known.add(name)
            out[key] = name
        return out

    def _cluster(self) -> bootstrap.ClusterInfo | None:
        """The cluster as nodes must know it: the constructor's arguments, else EKS DescribeCluster
        (cached; None when EKS has no such cluster)."""
        if self._given_cluster is not None:
            return self._given_cluster

        def load() -> bootstrap.ClusterInfo | None:
            eks = self._client("eks")
            try:
                raw = eks.describe_cluster(name=self.cluster_name)["cluster"]
            except Exception as err:
                if errors.error_code(err) == "ResourceNotFoundException":
                    return None
                raise errors.translate(err, operation="DescribeCluster", default=NodeClassNotReady) from err
            return bootstrap.ClusterInfo(
                name=self.cluster_name,
                endpoint=str(raw.get("endpoint", "")),
                ca_bundle=str((raw.get("certificateAuthority") or {}).get("data", "")),
                service_cidr=(raw.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr"),
                version=raw.get("version"),
            )

        return self._cache.get("cluster", load)

    def _create_template(self, name: str, data: dict[str, Any], nc: AWSNodeClass) -> None:
        tags = {**launch.cluster_tags(self.cluster_name), f"{wk.GROUP}/nodeclass": nc.name}
        try:
            self._ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": launch.tag_list(tags)}],
            )
            log.info("created launch template %s for node class %s", name, nc.name)
        except Exception as err:
            if errors.error_code(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
                return  # same name, same content (the name hashes the content): nothing to do
            raise errors.translate(err, operation="CreateLaunchTemplate", default=CreateError) from err

    # --- instances -------------------------------------------------------------------------------------

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
        out: builtins.list[dict[str, Any]] = []
        with self._translated("DescribeInstances"):
            for page in self._ec2.get_paginator("describe_instances").paginate(Filters=filters):
                for reservation in page.get("Reservations") or []:
                    out.extend(reservation.get("Instances") or [])
        return out

    def _instance(self, raw: dict[str, Any]) -> Instance:
        zone = raw.get("Placement", {}).get("AvailabilityZone", "")
        type_name = raw.get("InstanceType", "")
        capacity_type = (
            wk.CAPACITY_TYPE_SPOT if raw.get("InstanceLifecycle") == "spot" else wk.CAPACITY_TYPE_ON_DEMAND
        )
        tags = launch.tag_dict(raw.get("Tags"))
        return Instance(
            provider_id=provider_id_of(zone, raw["InstanceId"]),
            instance_type=type_name,
            zone=zone,
            capacity_type=capacity_type,
            price=self._instance_price(type_name, zone, capacity_type),
            state=raw.get("State", {}).get("Name", "unknown"),
            nodeclaim=tags.get(wk.NODECLAIM),
            nodepool=tags.get(wk.NODEPOOL),
            launched_at=raw.get("LaunchTime"),
            image_id=raw.get("ImageId"),
            tags=tags,
        )

    def _instance_price(self, instance_type: str, zone: str, capacity_type: str) -> float:
        try:
            return self._price(instance_type, zone, capacity_type) or 0.0
        except CloudProviderError:
            # A price is informative on get/list; failing the read for it would hide the instance.
            fallback = (
                pricing.fallback_spot(instance_type, self.region, zone)
                if capacity_type == wk.CAPACITY_TYPE_SPOT
                else pricing.fallback_on_demand(instance_type, self.region)
            )
            return fallback or 0.0

    # --- SDK plumbing ----------------------------------------------------------------------------------

    @property
    def _ec2(self) -> Any:
        return self._client("ec2")

    def _client(self, service: str, *, region: str | None = None, config: Config | None = None) -> Any:
        key = (service, region)
        if key not in self._clients:
            with self._translated(f"{service} client"):
                self._clients[key] = self._session.client(
                    service,
                    region_name=region or self.region,
                    endpoint_url=self._endpoint,
                    config=config or self._config,
                )
        return self._clients[key]

    def _call(
        self,
        operation: str,
        fn: Callable[..., dict[str, Any]],
        *,
        default: type[CloudProviderError] = CloudProviderError,
        not_found: bool = False,
        **params: Any,
    ) -> dict[str, Any]:
        with self._translated(operation, default=default, not_found=not_found):
            return fn(**params)
        raise AssertionError("unreachable: _translated re-raises")  # pragma: no cover

    @contextmanager
    def _translated(
        self,
        operation: str,
        *,
        default: type[CloudProviderError] = CloudProviderError,
        not_found: bool = False,
    ) -> Iterator[None]:
        """Translate any SDK error raised inside into the provider's errors (never leak botocore)."""
        try:
            yield
        except CloudProviderError:
            raise
        except Exception as err:
            raise self._translation(err, operation, default=default, not_found=not_found) from err

    @staticmethod
    def _translation(
        err: Exception,
        operation: str,
        *,
        default: type[CloudProviderError],
        not_found: bool,
    ) -> CloudProviderError:
        if not_found and errors.error_code(err) in errors.NOT_FOUND_CODES:
            return NotFound(f"{operation}: {errors.error_message(err)}")
        return errors.translate(err, operation=operation, default=default)


def _tag_filters(tags: dict[str, str] | None) -> builtins.list[dict[str, Any]]:
    """EC2 filters for a selector's tags: `*` means "has the tag, any value"."""
    out: builtins.list[dict[str, Any]] = []
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out
