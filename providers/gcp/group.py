"""Group launches on Compute Engine: every member of a gang in one zonal `instances.bulkInsert`, all of
one offering, or none.

One bulkInsert per offering tried (in the group launch order, at most `max_launch_attempts`), with
`count` = `minCount` = the members to launch and each instance named after its claim in
`perInstanceProperties`: Compute Engine creates all of them or none. A bulkInsert shares its
properties, so the claims are told apart by a metadata map {instance name: claim name} every member
carries (`provisioner-gang-members`; providers.gcp.instances reads it). When fewer instances than asked
exist after the operation (a cloud that ignores minCount), they are deleted before the next offering is
tried. Reserved offerings go through the one-insert-per-member fallback (provisioner.cloudprovider.group).

Placement: the NodeClass's `placement` names an existing compact placement policy, or asks for one per
gang (`<cluster>-gang-<hash>`, a resource policy with `groupPlacementPolicy.collocation: COLLOCATED`),
created before the launch and deleted by `collect_placement` once no instance uses it.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from providers.gcp import errors, instances, launch, machines, naming
from providers.gcp.model import GCPNodeClass
from providers.gcp.sdk import SDK, failure
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.errors import (
    CreateError,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    PartialLaunch,
    TransientError,
)
from provisioner.cloudprovider.group import (
    check_claims,
    no_room,
    pinned_order,
    reserved_one_by_one,
    terminate,
    with_partial,
    with_skipped,
)
from provisioner.cloudprovider.launch_order import Attempt
from provisioner.cloudprovider.protocol import GangPlacement, Instance
from provisioner.cloudprovider.types import InstanceType


class GroupHost(Protocol):
    """What a group launch uses of the GCP provider (`providers.gcp.provider.GCPProvider`), which calls
    into this module: named here so this module does not import the provider back."""

    project: str
    region: str
    cluster_name: str
    max_launch_attempts: int

    @property
    def sdk(self) -> SDK: ...

    def create(
        self, claim: NodeClaim, instance_types: builtins.list[InstanceType], node_class: NodeClass
    ) -> Instance: ...

    def delete(self, provider_id: str) -> None: ...

    def get(self, provider_id: str) -> Instance: ...

    def list(self) -> builtins.list[Instance]: ...

    def launch_of(self, instance_type: str) -> machines.MachineLaunch: ...

    def recently_out(self) -> set[OfferingKey]: ...

    def mark_out(self, keys: Iterable[OfferingKey]) -> None: ...


log = logging.getLogger(__name__)


def properties(
    body: compute_v1.Instance, *, members: dict[str, str], gang: str | None, policy: str | None
) -> compute_v1.InstanceProperties:
    """The bulkInsert's shared instance properties from an insert body: bare names where insert takes
    zonal URLs, no claim of its own, the members map, the gang and the placement policy."""
    raw = compute_v1.Instance.to_dict(body)
    for key in ("name", "zone", "self_link", "id"):
        raw.pop(key, None)
    raw["machine_type"] = naming.last(raw["machine_type"])
    for disk in raw.get("disks") or []:
        init = disk.get("initialize_params") or {}
        if init.get("disk_type"):
            init["disk_type"] = naming.last(init["disk_type"])
        (init.get("labels") or {}).pop(naming.LABEL_NODECLAIM, None)
    for acc in raw.get("guest_accelerators") or []:
        acc["accelerator_type"] = naming.last(acc["accelerator_type"])
    labels = raw.get("labels") or {}
    labels.pop(naming.LABEL_NODECLAIM, None)
    items = [i for i in (raw.get("metadata") or {}).get("items") or [] if i["key"] != naming.META_NODECLAIM]
    items.append({"key": naming.META_GANG_MEMBERS, "value": json.dumps(members, sort_keys=True)})
    if gang:
        labels[naming.LABEL_GANG] = naming.label_value(gang)
        items.append({"key": naming.META_GANG, "value": gang})
    raw["labels"] = labels
    raw["metadata"] = {"items": sorted(items, key=lambda i: i["key"])}
    raw["description"] = f"provisioner gang of {', '.join(sorted(members.values()))}"[:2048]
    if policy:
        raw["resource_policies"] = [policy]
    return compute_v1.InstanceProperties(raw)


def launch_group(
    provider: GroupHost,
    claims: Sequence[NodeClaim],
    instance_types: builtins.list[InstanceType],
    nc: GCPNodeClass,
    placement: GangPlacement | None,
) -> builtins.list[Instance]:
    """`create_group` on Compute Engine (see the module docstring)."""
    check_claims(claims)
    names = {c.name: naming.instance_name(provider.cluster_name, c.name) for c in claims}
    live = {
        naming.last(i.provider_id): i for i in provider.list() if i.state not in ("stopping", "terminated")
    }
    existing = {c.name: live[names[c.name]] for c in claims if names[c.name] in live}
    zones = {
        o.zone for it in instance_types for o in it.offerings if naming.region_of(o.zone) == provider.region
    }
    if nc.spec.zones:
        zones &= set(nc.spec.zones)
    missing, attempts, unavailable = pinned_order(
        claims,
        instance_types,
        existing,
        placement,
        zones=zones,
        capacity_types=launch.LAUNCHABLE,
        unavailable=provider.recently_out(),
    )
    if not missing:
        return [existing[c.name] for c in claims]
    if not attempts:
        raise InsufficientCapacity(
            list(unavailable),
            f"gang of {', '.join(c.name for c in claims)}: no available offering every member allows in the "
            "node class zones",
        )
    running = next(iter(existing.values()), None)
    policy = _policy(provider, nc, placement, running)
    members = {names[c.name]: c.name for c in missing}
    tried: list[OfferingKey] = []
    partial: list[PartialLaunch] = []
    for attempt in attempts[: provider.max_launch_attempts]:
        if attempt.capacity_type == wk.CAPACITY_TYPE_RESERVED:
            done = reserved_one_by_one(
                claims,
                instance_types,
                nc,
                capacity_type=attempt.capacity_type,
                zone=attempt.zone,
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
        try:
            launched = _bulk_insert(provider, missing, names, attempt, nc, members, placement, policy)
        except InsufficientCapacity as err:
            log.info("gcp: gang of %s: %s; trying the next offering", missing[0].name, err)
            tried.append(attempt.key)
            partial.extend(err.partial)
            provider.mark_out([attempt.key] if err.kind != "quota" else launch.quota_scope(attempt))
            continue
        existing.update(launched)
        return with_partial([with_skipped(existing[c.name], tuple(tried)) for c in claims], partial)
    raise no_room(missing, tried, partial)


def _bulk_insert(
    provider: GroupHost,
    missing: Sequence[NodeClaim],
    names: dict[str, str],
    attempt: Attempt,
    nc: GCPNodeClass,
    members: dict[str, str],
    placement: GangPlacement | None,
    policy: str | None,
) -> dict[str, Instance]:
    """One bulkInsert of every missing member into the attempt's offering: their instances, or
    InsufficientCapacity with nothing left of it."""
    zone = attempt.zone
    body = launch.instance_body(
        names[missing[0].name],
        claim=missing[0],
        attempt=attempt,
        node_class=nc,
        machine=provider.launch_of(attempt.instance_type.name),
        cluster_name=provider.cluster_name,
        region=provider.region,
    )
    request = compute_v1.BulkInsertInstanceResource(
        count=len(missing),
        min_count=len(missing),
        instance_properties=properties(
            body, members=members, gang=placement.gang if placement else None, policy=policy
        ),
        per_instance_properties={
            names[c.name]: compute_v1.BulkInsertInstanceResourcePerInstanceProperties(name=names[c.name])
            for c in missing
        },
    )
    what = f"bulkInsert {len(missing)} instances ({attempt.key})"
    sdk = provider.sdk
    try:
        op = sdk.clients().instances.bulk_insert_unary(
            project=provider.project,
            zone=zone,
            bulk_insert_instance_resource_resource=request,
            retry=None,
            timeout=sdk.request_timeout,
        )
    except gexc.Conflict:
        # Some already exist: an earlier call got this far (a listing lagging behind hid them).
        op = None
    except Exception as err:
        raise errors.translate(err, what=what, offering=attempt.key) from err
    failed = failure(sdk.wait(provider.project, zone, op, what=what)) if op is not None else None
    if failed is not None and failed.kind in ("capacity", "quota"):
        raise InsufficientCapacity([attempt.key], f"{what}: {failed.message}", kind=failed.kind)
    if failed is not None and failed.kind == "transient":
        raise TransientError(f"{what}: {failed.message}")
    if failed is not None and failed.kind != "exists":
        raise CreateError(f"{what}: {failed.message}")
    found: dict[str, Instance] = {}
    for claim in missing:
        try:
            found[claim.name] = provider.get(naming.provider_id(provider.project, zone, names[claim.name]))
        except NotFound:
            continue
    if len(found) < len(missing):
        log.warning(
            "gcp: %s made %d of %d instances; deleting them so no part of the gang stays billed",
            what,
            len(found),
            len(missing),
        )
        terminate(list(found.values()), provider.delete)
        raise InsufficientCapacity(
            [attempt.key],
            f"{what}: only {len(found)} of {len(missing)} were created",
            partial=(
                PartialLaunch(attempt.key, tuple(i.provider_id for i in found.values()), attempt.price),
            ),
        )
    log.info(
        "gcp: launched a gang of %d (%s in %s, %s)",
        len(found),
        attempt.instance_type.name,
        zone,
        attempt.capacity_type,
    )
    return found


def _policy(
    provider: GroupHost, nc: GCPNodeClass, placement: GangPlacement | None, running: Instance | None
) -> str | None:
    """The compact placement policy the members launch with: the one asked for, the running members',
    the NodeClass's, or one made for the gang."""
    region = f"projects/{provider.project}/regions/{provider.region}/resourcePolicies"
    if placement is not None and placement.group:
        return f"{region}/{placement.group}"
    if running is not None and running.placement_group:
        return f"{region}/{running.placement_group}"
    spec = nc.spec.placement
    if spec is None:
        return None
    if spec.policy:
        return f"{region}/{spec.policy}"
    if not spec.compact_per_gang or placement is None:
        return None
    name = naming.policy_name(provider.cluster_name, placement.gang)
    group = compute_v1.ResourcePolicyGroupPlacementPolicy(collocation="COLLOCATED")
    policy = compute_v1.ResourcePolicy(
        name=name,
        description=f"provisioner {provider.cluster_name} gang {placement.gang}",
        group_placement_policy=group,
    )
    what = f"insert resource policy {name}"
    c = provider.sdk.clients()
    try:
        op = c.resource_policies.insert_unary(
            project=provider.project,
            region=provider.region,
            resource_policy_resource=policy,
            retry=None,
            timeout=provider.sdk.request_timeout,
        )
    except gexc.Conflict:
        return f"{region}/{name}"
    except Exception as err:
        raise errors.translate(err, what=what) from err
    _wait_region(provider, op, what)
    log.info("gcp: created compact placement policy %s for gang %s", name, placement.gang)
    return f"{region}/{name}"


def _wait_region(provider: GroupHost, op: compute_v1.Operation, what: str) -> None:
    c = provider.sdk.clients()
    for _ in range(60):
        if op.status == compute_v1.Operation.Status.DONE:
            break
        op = provider.sdk.call(
            what,
            c.region_operations.wait,
            project=provider.project,
            region=provider.region,
            operation=op.name,
        )
    failed = failure(op)
    if failed is not None and failed.kind not in ("exists", "not-found"):
        raise CreateError(f"{what}: {failed.message}")


def collect_placement(provider: GroupHost, *, older_than: datetime) -> builtins.list[str]:
    """Delete the compact placement policies made for this cluster's gangs that no instance uses,
    created before `older_than`; their names."""
    c = provider.sdk.clients()
    prefix = f"{naming.cluster_slug(provider.cluster_name)}-gang-"
    policies = provider.sdk.listed(
        "list resource policies",
        c.resource_policies.list,
        request={"project": provider.project, "region": provider.region},
    )
    in_use = {i.placement_group for i in provider.list() if i.placement_group}
    deleted = []
    for policy in policies:
        if not policy.name.startswith(prefix) or policy.name in in_use:
            continue
        created = instances.parse_time(policy.creation_timestamp)
        if created is not None and created > older_than:
            continue
        what = f"delete resource policy {policy.name}"
        try:
            op = c.resource_policies.delete_unary(
                project=provider.project,
                region=provider.region,
                resource_policy=policy.name,
                retry=None,
                timeout=provider.sdk.request_timeout,
            )
        except (gexc.BadRequest, gexc.NotFound):
            continue  # in use after all, or gone
        except Exception as err:
            raise errors.translate(err, what=what) from err
        _wait_region(provider, op, what)
        log.info("gcp: deleted compact placement policy %s: no instance uses it", policy.name)
        deleted.append(policy.name)
    return deleted
