"""Group launches on EC2: every member of a gang in one CreateFleet, all of one offering, or none.

One CreateFleet `instant` per run of one capacity type (as for one claim), for `TotalTargetCapacity` =
the members to launch, with the capacity type's options `MinTargetCapacity` = the same count and
`SingleInstanceType`/`SingleAvailabilityZone` true: EC2 launches all of them in one type and zone or
none. A fleet that still comes back short (fewer instances than asked: an EC2 that does not honour the
minimum, a partial answer) has its instances terminated before the next attempt, and its offering is
counted as out of capacity. Reserved offerings go through the one-create-per-member fallback
(provisioner.cloudprovider.group), a reservation being aimed at by RunInstances.

Tags: a fleet tags all its instances alike, so they are launched with the cluster's, the NodeClass's,
the gang's (`provisioner.sh/gang`) and the attempt's `provisioner.sh/launch-group` token, then each is
tagged with its claim (`provisioner.sh/nodeclaim`, `Name`). A retried call finds the members by claim
tag, and adopts instances of its token that a crash left without one; garbage collection terminates
instances of ours without a claim after its grace, whatever happened in between.

Placement: the NodeClass's `placement` (an existing cluster placement group, or one created per gang,
tagged as ours and with the gang, deleted by `collect_placement` once no live instance is in it) goes
into every override's `Placement.GroupName`; `GangPlacement.group` overrides it.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from providers.aws import efa, errors, launch
from providers.aws.model import AWSNodeClass
from providers.aws.nodeclass import Resolver
from providers.aws.sdk import SDK, call
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import (
    CreateError,
    Instance,
    InstanceType,
    InsufficientCapacity,
    OfferingKey,
    PartialLaunch,
    TransientError,
)
from provisioner.cloudprovider.group import (
    check_claims,
    no_room,
    reserved_one_by_one,
    with_partial,
    with_skipped,
)
from provisioner.cloudprovider.protocol import GangPlacement


class GroupHost(Protocol):
    """What a group launch uses of the AWS provider (`providers.aws.provider.AWSProvider`), which calls
    into this module: named here so this module does not import the provider back."""

    cluster_name: str

    @property
    def sdk(self) -> SDK: ...

    @property
    def resolver(self) -> Resolver: ...

    def create(
        self, claim: NodeClaim, instance_types: builtins.list[InstanceType], node_class: NodeClass
    ) -> Instance: ...

    def delete(self, provider_id: str) -> None: ...

    def list(self) -> builtins.list[Instance]: ...

    def efa_interfaces(self, nc: AWSNodeClass) -> dict[str, int]: ...

    def find_claim_instances(self, claim_names: builtins.list[str]) -> dict[str, Instance]: ...

    def find_tagged(self, tags: dict[str, str | builtins.list[str]]) -> builtins.list[Instance]: ...

    def remember_launch(self, claim_name: str, instance: Instance) -> None: ...

    def terminate_ids(self, instance_ids: builtins.list[str]) -> None: ...


log = logging.getLogger("providers.aws")

LAUNCH_GROUP = f"{wk.GROUP}/launch-group"
"""Tag on the instances of one group fleet until each has its claim: the attempt's token."""
LT_MISSING_CODES = frozenset(
    {"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"}
)
CREATED_AT = f"{wk.GROUP}/created-at"
"""Tag on a placement group the provisioner created: when (ISO 8601), for garbage collection's grace."""


def token(claims: Sequence[NodeClaim]) -> str:
    """The group's launch token: the same for the same claims, whatever their order."""
    return hashlib.sha256("\n".join(sorted(c.name for c in claims)).encode()).hexdigest()[:32]


def placement_group_name(cluster_name: str, gang: str) -> str:
    """The cluster placement group created for a gang: readable, unique to cluster and gang, at most
    255 characters of what EC2 allows."""
    digest = hashlib.sha256(f"{cluster_name}\n{gang}".encode()).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9-]+", "-", f"{cluster_name}-{gang}").strip("-")[:200]
    return f"provisioner-{readable}-{digest}"


def group_request(
    attempt: launch.FleetAttempt,
    *,
    count: int,
    launch_templates: dict[str, str],
    tags: dict[str, str],
    placement_group: str | None,
) -> dict[str, Any]:
    """CreateFleet's parameters for `count` instances of one offering among the attempt's, or none."""
    request = launch.fleet_request(attempt, launch_templates=launch_templates, tags=tags)
    request["TargetCapacitySpecification"]["TotalTargetCapacity"] = count
    options = "SpotOptions" if attempt.capacity_type == launch.SPOT else "OnDemandOptions"
    request[options].update(MinTargetCapacity=count, SingleInstanceType=True, SingleAvailabilityZone=True)
    if placement_group:
        for config in request["LaunchTemplateConfigs"]:
            for override in config["Overrides"]:
                override["Placement"] = {"GroupName": placement_group}
    return request


def launch_group(
    provider: GroupHost,
    claims: Sequence[NodeClaim],
    instance_types: builtins.list[InstanceType],
    nc: AWSNodeClass,
    placement: GangPlacement | None,
) -> builtins.list[Instance]:
    """`create_group` on EC2 (see the module docstring)."""
    check_claims(claims)
    existing = provider.find_claim_instances([c.name for c in claims])
    adopted = _adopt(provider, claims, existing)
    existing.update(adopted)
    resolved = provider.resolver.resolve(nc)
    subnets = list(resolved.subnets)
    missing = [c for c in claims if c.name not in existing]
    if not missing:
        return [existing[c.name] for c in claims]
    running = next(iter(existing.values()), None)
    types = [t for t in instance_types if running is None or t.name == running.instance_type]
    capacity_types = frozenset({running.capacity_type}) if running else launch.LAUNCHABLE
    zone = running.zone if running else (placement.zone if placement else None)
    plan = launch.plan(
        missing[0],
        types,
        subnets=subnets,
        image_keys=set(resolved.images),
        group=missing,
        zone=zone,
        capacity_types=capacity_types,
        efa_interfaces=provider.efa_interfaces(nc),
    )
    if not plan.attempts:
        raise InsufficientCapacity(
            list(plan.unavailable),
            f"gang of {', '.join(c.name for c in claims)}: no available offering every member allows in the "
            f"zones of node class {nc.name}",
        )
    group_name = _placement_group(provider, nc, placement, running)
    templates = provider.resolver.templates(nc, resolved, plan.image_keys)
    tags = launch.instance_tags(missing[0], nc, cluster_name=provider.cluster_name)
    for key in (wk.NODECLAIM, "Name"):
        tags.pop(key, None)
    tags[LAUNCH_GROUP] = token(claims)
    if placement is not None:
        tags[wk.GANG] = placement.gang
    zone_of_subnet = {s.id: s.zone for s in subnets}
    tried: list[OfferingKey] = list(plan.unavailable)
    partial: list[PartialLaunch] = []
    others: list[str] = []
    pending = list(plan.attempts)
    while pending:
        attempt = pending.pop(0)
        if attempt.capacity_type == launch.RESERVED:
            done = reserved_one_by_one(
                claims,
                instance_types,
                nc,
                capacity_type=attempt.capacity_type,
                zone=attempt.candidates[0].zone,
                gang=placement.gang if placement else "",
                create=provider.create,
                delete=provider.delete,
                existing=existing,
                tried=tried,
                partial=partial,
            )
            if done is not None:
                return done
            continue
        request = group_request(
            attempt, count=len(missing), launch_templates=templates, tags=tags, placement_group=group_name
        )
        try:
            answer = provider.sdk.ec2.create_fleet(**request)
        except Exception as err:
            code = errors.error_code(err)
            if code in LT_MISSING_CODES:
                answer = {"Errors": [{"ErrorCode": code, "ErrorMessage": str(err)}]}
            elif not errors.is_capacity_code(code):
                raise errors.translate(err, operation="CreateFleet", default=CreateError) from err
            else:
                answer = {"Errors": [{"ErrorCode": code, "Lifecycle": attempt.capacity_type}]}
        outcome = launch.read_fleet(
            answer, attempt, zone_of_subnet=zone_of_subnet, capacity_codes=errors.CAPACITY_CODES
        )
        found_out = [k for k, _ in outcome.capacity_failures]
        chosen = outcome.launched or attempt.candidates[0]
        if len(outcome.instance_ids) == len(missing):
            launched = _tag_members(
                provider, missing, outcome.instance_ids, chosen, tags, resolved, group_name
            )
            existing.update(launched)
            skipped = tuple(
                dict.fromkeys(k for k in tried[len(plan.unavailable) :] + found_out if k != chosen.key)
            )
            return with_partial([with_skipped(existing[c.name], skipped) for c in claims], partial)
        if outcome.instance_ids:
            # Short of the group: nothing of it may stay billed.
            log.warning(
                "gang of %s: CreateFleet launched %d of %d in %s; terminating them",
                missing[0].name,
                len(outcome.instance_ids),
                len(missing),
                chosen.key,
            )
            provider.terminate_ids(outcome.instance_ids)
            partial.append(
                PartialLaunch(
                    chosen.key,
                    tuple(f"aws:///{chosen.zone}/{i}" for i in outcome.instance_ids),
                    chosen.price,
                )
            )
            found_out.append(chosen.key)
            # The request's other offerings were not tried: the same request without what ran short.
            rest = tuple(c for c in attempt.candidates if c.key not in found_out and c.key not in tried)
            if rest:
                pending.insert(0, launch.FleetAttempt(attempt.capacity_type, rest))
        elif any(e.split(":", 1)[0] in LT_MISSING_CODES for e in outcome.other_errors):
            # Someone deleted our template: forget it so the retry makes it again.
            provider.resolver.forget_templates(set(templates.values()))
            raise TransientError(f"CreateFleet: launch template missing for node class {nc.name}")
        elif outcome.other_errors and not outcome.capacity_failures:
            others.extend(outcome.other_errors)
            continue
        failed = found_out or [c.key for c in attempt.candidates]
        tried.extend(k for k in failed if k not in tried)
        others.extend(outcome.other_errors)
    if others and len(tried) == len(plan.unavailable):
        raise CreateError(f"CreateFleet for the gang of {missing[0].name}: {'; '.join(others)}")
    raise no_room(missing, tried, partial)


def _tag_members(
    provider: GroupHost,
    claims: Sequence[NodeClaim],
    instance_ids: Sequence[str],
    chosen: launch.Candidate,
    tags: dict[str, str],
    resolved: Any,
    group_name: str | None,
) -> dict[str, Instance]:
    out: dict[str, Instance] = {}
    for claim, instance_id in zip(claims, sorted(instance_ids), strict=True):
        own = {wk.NODECLAIM: claim.name, "Name": claim.name}
        call("CreateTags", provider.sdk.ec2.create_tags, Resources=[instance_id], Tags=launch.tag_list(own))
        instance = Instance(
            provider_id=f"aws:///{chosen.zone}/{instance_id}",
            instance_type=chosen.instance_type,
            zone=chosen.zone,
            capacity_type=chosen.capacity_type,
            price=chosen.price,
            state="pending",
            nodeclaim=claim.name,
            nodepool=claim.nodepool,
            image_id=resolved.images.get(efa.split(chosen.image_key)[0]),
            tags={**tags, **own},
            placement_group=group_name,
        )
        provider.remember_launch(claim.name, instance)
        out[claim.name] = instance
    log.info(
        "launched a gang of %d (%s in %s, %s, $%.4f/h each): %s",
        len(out),
        chosen.instance_type,
        chosen.zone,
        chosen.capacity_type,
        chosen.price,
        ", ".join(out),
    )
    return out


def _adopt(
    provider: GroupHost, claims: Sequence[NodeClaim], existing: dict[str, Instance]
) -> dict[str, Instance]:
    """Instances of this group's token that a crash left without their claim tag: tag them now."""
    orphans = provider.find_tagged({LAUNCH_GROUP: token(claims)})
    orphans = [i for i in orphans if not i.nodeclaim]
    if not orphans:
        return {}
    missing = [c for c in claims if c.name not in existing]
    out: dict[str, Instance] = {}
    for claim, instance in zip(missing, sorted(orphans, key=lambda i: i.provider_id), strict=False):
        own = {wk.NODECLAIM: claim.name, "Name": claim.name}
        instance_id = instance.provider_id.rsplit("/", 1)[-1]
        call("CreateTags", provider.sdk.ec2.create_tags, Resources=[instance_id], Tags=launch.tag_list(own))
        out[claim.name] = replace(instance, nodeclaim=claim.name, tags={**instance.tags, **own})
    extra = sorted(orphans, key=lambda i: i.provider_id)[len(missing) :]
    if extra:
        provider.terminate_ids([i.provider_id.rsplit("/", 1)[-1] for i in extra])
    return out


def _placement_group(
    provider: GroupHost, nc: AWSNodeClass, placement: GangPlacement | None, running: Instance | None
) -> str | None:
    """The cluster placement group the members launch into: the one asked for, the one the running
    members are in, the NodeClass's, or one made for the gang."""
    if placement is not None and placement.group:
        return placement.group
    if running is not None and running.placement_group:
        return running.placement_group
    spec = nc.spec.placement
    if spec is None:
        return None
    if spec.group_name:
        return spec.group_name
    if not spec.group_per_gang or placement is None:
        return None
    name = placement_group_name(provider.cluster_name, placement.gang)
    tags = {
        **launch.cluster_tags(provider.cluster_name),
        wk.GANG: placement.gang,
        CREATED_AT: datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        provider.sdk.ec2.create_placement_group(
            GroupName=name,
            Strategy="cluster",
            TagSpecifications=[{"ResourceType": "placement-group", "Tags": launch.tag_list(tags)}],
        )
        log.info("created cluster placement group %s for gang %s", name, placement.gang)
    except Exception as err:
        if errors.error_code(err) != "InvalidPlacementGroup.Duplicate":
            raise errors.translate(err, operation="CreatePlacementGroup", default=CreateError) from err
    return name


def collect_placement(provider: GroupHost, *, older_than: datetime) -> builtins.list[str]:
    """Delete the placement groups this cluster created (per gang) that no live instance of ours is in,
    created before `older_than`; their names."""
    answer = call(
        "DescribePlacementGroups",
        provider.sdk.ec2.describe_placement_groups,
        Filters=[{"Name": f"tag:{wk.CLUSTER}", "Values": [provider.cluster_name]}],
    )
    in_use = {i.placement_group for i in provider.list() if i.placement_group}
    deleted = []
    for group in answer.get("PlacementGroups") or []:
        name = group.get("GroupName", "")
        tags = launch.tag_dict(group.get("Tags"))
        if not name or name in in_use or wk.GANG not in tags:
            continue
        try:
            created = datetime.fromisoformat(tags.get(CREATED_AT, ""))
        except ValueError:
            created = None
        if created is not None and created > older_than:
            continue
        try:
            provider.sdk.ec2.delete_placement_group(GroupName=name)
        except Exception as err:
            code = errors.error_code(err)
            if code in ("InvalidPlacementGroup.InUse", "InvalidPlacementGroup.Unknown"):
                continue
            raise errors.translate(err, operation="DeletePlacementGroup") from err
        log.info("deleted placement group %s: no instance of gang %s is left", name, tags.get(wk.GANG))
        deleted.append(name)
    return deleted
