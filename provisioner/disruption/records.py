"""What a command carries besides its nodes: the record of every node it removes (where each pod goes,
which teams are touched, $/h before and after) and its replacements pinned to what the plan assumed.

Pure functions over the re-solve's results; which nodes make a command is decided by the method modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from provisioner.api import labels as wk
from provisioner.api.common import Operator, Requirement
from provisioner.api.nodepool import DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption.model import Command, NodeRecord, PodMove
from provisioner.scheduling.results import NewClaim, Results
from provisioner.state.cluster import StateNode, team_of

CENT = 1e-9
"""Prices closer than this are equal (float $/h): a replacement must be cheaper by more to count."""


def node_records(
    nodes: Sequence[StateNode],
    results: Results | None,
    *,
    reason: DisruptionReason,
    teams: Mapping[str, str],
    detail: str = "",
) -> tuple[NodeRecord, ...]:
    """One record per removed node; the replacements' $/h is shared in proportion to the nodes' prices."""
    where: dict[str, str] = {}
    claims = list(results.new_claims) if results is not None else []
    if results is not None:
        for placement in results.placements:
            where[placement.pod.key] = placement.node
        for claim in claims:
            for pod in claim.pods:
                where[pod.key] = f"new:{claim.instance_type.name}"
    before = sum(n.price for n in nodes)
    after = sum(c.price for c in claims)
    replacement = "+".join(c.instance_type.name for c in claims) or None
    replacement_ct = claims[0].offering.capacity_type if claims else None
    out = []
    for node in nodes:
        pods = cand.reschedulable(node)
        moves = tuple(
            PodMove(
                pod=p.key,
                destination=where.get(p.key, "unknown"),
                team=team_of(p, teams),
            )
            for p in pods
        )
        share = after * (node.price / before) if before > 0 else after / max(1, len(nodes))
        out.append(
            NodeRecord(
                node=node.name,
                nodepool=node.nodepool or "",
                reason=reason,
                instance_type=cand.instance_type(node),
                capacity_type=cand.capacity_type(node),
                zone=cand.zone(node),
                price_per_hour=node.price,
                pods=moves,
                teams=tuple(sorted({m.team for m in moves if m.team})),
                replacement_type=replacement,
                replacement_capacity_type=replacement_ct,
                replacement_price_per_hour=share,
                detail=detail,
            )
        )
    return tuple(out)


def relabel(command: Command, reason: DisruptionReason, detail: str) -> Command:
    """The command under another reason, its records saying why."""
    command.reason = reason
    command.records = tuple(
        dataclasses.replace(r, reason=reason, detail="; ".join(x for x in (r.detail, detail) if x))
        for r in command.records
    )
    return command


def pin(claim: NewClaim, *, capacity_type: str, below: float | None) -> NewClaim:
    """The replacement as it must launch for the plan to hold: on the planned capacity type and, for a
    consolidation, only on instance types cheaper than what it replaces. Without this a stockout met at
    launch falls back to a dearer offering (on-demand for spot) and the saving, or the return to spot,
    is lost; the next plan would then replace the same node again."""
    options = []
    for it in claim.instance_types:
        offering = it.cheapest(capacity_types={capacity_type})
        if offering is None or (below is not None and offering.price >= below - CENT):
            continue
        options.append(it)
    if not options:
        options = [claim.instance_type]
    requirements = [r for r in claim.requirements if r.key not in (wk.INSTANCE_TYPE, wk.CAPACITY_TYPE)]
    requirements.append(Requirement(key=wk.CAPACITY_TYPE, operator=Operator.IN, values=[capacity_type]))
    requirements.append(
        Requirement(key=wk.INSTANCE_TYPE, operator=Operator.IN, values=[t.name for t in options])
    )
    return dataclasses.replace(claim, requirements=requirements, instance_types=options)
