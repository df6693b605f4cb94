"""Launching a gang: the NodeClaims the scheduler wrote for one gang (annotation `provisioner.sh/gang`, their
number in `provisioner.sh/gang-size`) go to the cloud as one `CloudProvider.create_group` call, all of one
offering, or none.

What this owns, for the lifecycle controller (which hands `launch_gangs` the gang claims not launched
yet, with its launch step's back-off and bookkeeping, and `unregistered` to its liveness step; the rest
of their life is any claim's):
- Waiting for the whole group: claims written in one batch may reach the state one by one; a group that
  stays short of its size past a batch window (a claim failed to write, or was deleted) is deleted whole,
  and its pods are solved again.
- All or nothing: `InsufficientCapacity` leaves nothing running (the provider's contract; the caching
  wrapper marks the offerings it names unavailable). Every claim of the gang is then deleted with the
  reason, so the next solve places the gang elsewhere or tells each member why it cannot.
- A group that still ends partial (a provider answering fewer instances than claims) is terminated in
  this same reconcile, and what the attempt cost is a ledger row per instance; then as above.
- A group launched whole of which a member never registers (`unregistered`): past the registration
  timeout every claim of the group is deleted together, the registered ones too (the gang cannot start
  without the missing node, so none stays billed), each a ledger row; its pods are provisioned again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api.common import Operator
from provisioner.api.nodeclaim import LAUNCHED, REGISTERED
from provisioner.cloudprovider import (
    CloudProviderError,
    GangPlacement,
    Instance,
    InsufficientCapacity,
    NotFound,
    TransientError,
)
from provisioner.controllers.conditions import condition_status, condition_time, set_condition
from provisioner.controllers.lifecycle.launch import Launch
from provisioner.controllers.lifecycle.step import Step
from provisioner.controllers.provider_set import node_class_of
from provisioner.finops.rows import ActionRow
from provisioner.state import Snapshot

log = logging.getLogger(__name__)

PARTIAL = "GangLaunchPartial"
NO_CAPACITY = "InsufficientCapacity"
INCOMPLETE = "GangIncomplete"
UNREGISTERED = "GangUnregistered"


def gang_of(claim: NodeClaim) -> tuple[str, int] | None:
    """The claim's gang and the size of its group launch, or None for a claim launched alone."""
    name = claim.metadata.annotations.get(wk.GANG)
    if not name:
        return None
    try:
        size = int(claim.metadata.annotations.get(wk.GANG_SIZE, "0"))
    except ValueError:
        size = 0
    return name, size


def split(claims: Sequence[NodeClaim]) -> tuple[list[NodeClaim], dict[str, list[NodeClaim]]]:
    """(claims launched alone, gang -> its claims to launch together)."""
    alone: list[NodeClaim] = []
    groups: dict[str, list[NodeClaim]] = {}
    for claim in claims:
        gang = gang_of(claim) if not claim.status.provider_id else None
        if gang is None:
            alone.append(claim)
        else:
            groups.setdefault(gang[0], []).append(claim)
    return alone, groups


def launch_gangs(ctl: Launch, groups: dict[str, list[NodeClaim]], snap: Snapshot, now: datetime) -> None:
    for name, claims in sorted(groups.items()):
        claims.sort(key=lambda c: c.name)
        try:
            _launch_group(ctl, name, claims, snap, now)
        except CloudProviderError as err:  # a terminate that failed: the next pass sees what is left
            log.warning("gang %s: %s", name, err)


def _launch_group(ctl: Launch, name: str, claims: list[NodeClaim], snap: Snapshot, now: datetime) -> None:
    size = max(gang_of(c)[1] for c in claims if gang_of(c) is not None)  # type: ignore[index]
    first_seen = min((condition_time(c, LAUNCHED) or now) for c in claims)
    for claim in claims:
        if condition_time(claim, LAUNCHED) is None:
            conditions = set_condition(
                claim.status.conditions, LAUNCHED, None, reason="Launching", message=f"gang {name}", now=now
            )
            ctl.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
    # Members of the group launched already (a restart between the launch and the last status write)
    # count: create_group gives them back, by their names, and the others join their offering.
    launched = sum(
        1
        for n in snap.nodes
        if n.claim is not None
        and n.claim.status.provider_id
        and n.claim.metadata.annotations.get(wk.GANG) == name
        and n.claim.metadata.annotations.get(wk.GANG_SIZE) == str(size)
    )
    if len(claims) + launched < size:
        if now - first_seen >= ctl.settings.batch_max:
            _give_up(
                ctl,
                claims,
                reason=INCOMPLETE,
                message=(
                    f"gang {name}: {len(claims)} of its {size} NodeClaims exist after {ctl.settings.batch_max}; "
                    "a gang launches whole, so its pods will be provisioned again"
                ),
            )
        return
    not_before = max(ctl.not_before(c.name, now) for c in claims)
    if now < not_before:
        return
    ref = claims[0].spec.node_class_ref
    provider = ctl.providers.for_claim(claims[0])
    node_class = node_class_of(snap, ref.kind, ref.name)
    if provider is None or node_class is None:
        what = f"no cloud serves {ref.kind}" if provider is None else f"{ref.kind} {ref.name} not found"
        for claim in claims:
            ctl.failed(claim, "NodeClassNotFound", what, now)
        return
    by_name = {t.name: t for t in provider.instance_types(node_class)}
    allowed = [set(c.instance_type_options()) for c in claims]
    options = [
        by_name[n] for n in claims[0].instance_type_options() if n in by_name and all(n in a for a in allowed)
    ]
    placement = GangPlacement(gang=name, zone=_zone(claims))
    try:
        instances = provider.create_group(claims, options, node_class, placement=placement)
    except InsufficientCapacity as err:
        ctl.metrics.launch_failures.labels(reason="InsufficientCapacity").inc(max(1, len(err.offerings)))
        tried = ", ".join(sorted(str(k) for k in err.offerings)[:6]) or "every option"
        _give_up(
            ctl,
            claims,
            reason=NO_CAPACITY,
            message=(
                f"gang {name}: no offering could launch all {len(claims)} of its nodes at once (tried {tried}); "
                "nothing was launched, and its pods will be provisioned again"
            ),
        )
        return
    except TransientError as err:
        ctl.metrics.launch_failures.labels(reason="TransientError").inc()
        log.warning("gang %s: launch will be retried: %s", name, err)
        for claim in claims:
            ctl.back_off(claim.name, now)
        return
    except CloudProviderError as err:
        ctl.metrics.launch_failures.labels(reason=type(err).__name__).inc()
        for claim in claims:
            ctl.failed(claim, type(err).__name__, str(err), now)
        return
    by_claim = {i.nodeclaim: i for i in instances if i.nodeclaim}
    if len(instances) != len(claims) or (by_claim and set(by_claim) != {c.name for c in claims}):
        _terminate_partial(ctl, name, claims, instances, now)
        return
    for claim, instance in zip(claims, instances, strict=True):
        ctl.launched(claim, instance, by_name.get(instance.instance_type), set(), now)
    log.info("gang %s: launched %d nodes as one group", name, len(instances))


def _zone(claims: Sequence[NodeClaim]) -> str | None:
    """The zone the scheduler pinned the gang to (every claim requires the one zone), if it did."""
    zones: set[str] = set()
    for claim in claims:
        for r in claim.spec.requirements:
            if r.key == wk.ZONE and r.operator == Operator.IN and len(r.values) == 1:
                zones.add(r.values[0])
    return zones.pop() if len(zones) == 1 else None


def _terminate_partial(
    ctl: Launch,
    name: str,
    claims: Sequence[NodeClaim],
    instances: Sequence[Instance],
    now: datetime,
) -> None:
    """The group came back short: terminate what did launch, now, and book what the attempt cost."""
    rows: list[ActionRow] = []
    for instance in instances:
        with contextlib.suppress(NotFound):
            ctl.providers.for_claim(claims[0]).delete(instance.provider_id)  # type: ignore[union-attr]
        rows.append(
            _row(
                name,
                claims[0],
                now=now,
                node=instance.nodeclaim or instance.provider_id,
                offering=(instance.instance_type, instance.capacity_type, instance.zone),
                price=instance.price,
                reason=PARTIAL,
                detail=f"gang {name}: {len(instances)} of {len(claims)} nodes launched; terminated at once",
            )
        )
    if ctl.recorder is not None and rows:
        ctl.recorder.actions(rows)
    ctl.metrics.launch_failures.labels(reason=PARTIAL).inc()
    _give_up(
        ctl,
        claims,
        reason=PARTIAL,
        message=(
            f"gang {name}: the cloud launched {len(instances)} of its {len(claims)} nodes; they were "
            "terminated, and its pods will be provisioned again"
        ),
    )


def _row(
    gang: str,
    claim: NodeClaim,
    *,
    now: datetime,
    node: str,
    offering: tuple[str, str, str],
    price: float,
    reason: str,
    detail: str,
) -> ActionRow:
    """The ledger row of one member a gang launch paid for and gave up: no replacement, its whole price
    stops."""
    instance_type, capacity_type, zone = offering
    return ActionRow(
        time=now,
        command_id=f"gang-{gang}",
        action="delete",
        nodepool=claim.nodepool or "",
        teams=(),
        node=node,
        instance_type=instance_type,
        capacity_type=capacity_type,
        zone=zone,
        reason=reason,
        method="gang",
        price_per_hour=price,
        replacement_type=None,
        replacement_capacity_type=None,
        replacement_price_per_hour=0.0,
        savings_per_hour=price,
        pods_moved=0,
        detail=detail,
    )


def unregistered(ctl: Step, todo: Sequence[NodeClaim], snap: Snapshot, now: datetime) -> set[str]:
    """Give up every launch group of which a member in `todo` was launched but has not registered within
    the registration timeout: all the group's claims (same gang, same group size) are deleted together,
    each a ledger row for what it was billed. Returns the names of the claims deleted."""
    timeout = ctl.settings.registration_timeout
    late: dict[tuple[str, int], NodeClaim] = {}
    for claim in todo:
        gang = gang_of(claim)
        launched_at = condition_time(claim, LAUNCHED)
        if (
            gang is None
            or not claim.status.provider_id
            or condition_status(claim, LAUNCHED) != "True"
            or condition_status(claim, REGISTERED) == "True"
            or launched_at is None
            or now - launched_at < timeout
        ):
            continue
        late.setdefault(gang, claim)
    gone: set[str] = set()
    for (name, size), stuck in sorted(late.items()):
        members = sorted(
            (
                n.claim
                for n in snap.nodes
                if n.claim is not None
                and n.claim.metadata.deletion_timestamp is None
                and gang_of(n.claim) == (name, size)
            ),
            key=lambda c: c.name,
        )
        launched_at = condition_time(stuck, LAUNCHED) or now
        detail = (
            f"gang {name}: {stuck.name} ({stuck.status.provider_id}) never registered within {timeout}; "
            f"the whole group of {len(members)} is replaced"
        )
        rows = [
            _row(
                name,
                c,
                now=now,
                node=c.name,
                offering=(c.status.instance_type or "", c.status.capacity_type or "", c.status.zone or ""),
                price=c.status.price_per_hour or 0.0,
                reason=UNREGISTERED,
                detail=f"{detail}; billed since {(condition_time(c, LAUNCHED) or launched_at).isoformat()}",
            )
            for c in members
        ]
        if ctl.recorder is not None and rows:
            ctl.recorder.actions(rows)
        for claim in members:
            ctl.cluster.record_event(
                kind="NodeClaim", name=claim.name, reason=UNREGISTERED, message=detail, type="Warning"
            )
        _give_up(
            ctl, members, reason=UNREGISTERED, message=f"{detail}, so its pods will be provisioned again"
        )
        gone.update(c.name for c in members)
    return gone


def _give_up(ctl: Step, claims: Sequence[NodeClaim], *, reason: str, message: str) -> None:
    """Delete every claim of the group (their pods are solved again), saying why once, on the pool: one
    Event per failed group, not one per member."""
    log.warning("deleting the %d NodeClaims of a gang: %s", len(claims), message)
    names = ", ".join(c.name for c in claims)
    pool = claims[0].nodepool
    if pool:
        ctl.cluster.record_event(
            kind="NodePool",
            name=pool,
            reason=reason,
            message=f"{message} (NodeClaims {names})",
            type="Warning",
        )
    for claim in claims:
        ctl.metrics.nodeclaims_replaced.labels(reason=reason).inc()
        ctl.cluster.patch_nodeclaim(claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: reason}}})
        ctl.cluster.delete_nodeclaim(claim.name)
