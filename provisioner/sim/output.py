"""The output of a run with time: the JSON document `provisioner simulate --output json` prints for a
timeline scenario, and the scale-down HTML report of the run.

The JSON keeps the static contract's keys (`nodeClaims`, `placements`, `unschedulable`, `costPerHour`),
read over the whole run: every NodeClaim launched, where each pod is at the end, the pods still pending
at the end, the $/h of the nodes alive at the end. It adds `cost` (the $ the run paid, from the ledger's
usage samples: the figure `provisioner report` gives for the run), `finops` (claimed and realized
savings, idle cost, evicted workload, churn), `reservations` (each reservation's utilization: paid, used,
idle, idle cost and idle GPU-hours, in all and per clock hour; null without reservations), `actions` (the ledger rows, one per node
removed or replaced), `nodes` (the nodes alive at the end, as `nodeClaims`), `timeline` (each step
with the $/h just before it) and `events` (what the controllers said: fallbacks, interruptions, failed
launches, abandoned disruptions), and, for a run with gangs, `gangs` (each gang at the end: members,
state, zone, nodes, placement group, reason). Lists are in a fixed order, so equal runs print equal documents.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from provisioner.api import durations
from provisioner.clock import isoformat
from provisioner.cloudprovider import CloudProviderError
from provisioner.finops.reports import reservations, scale_down, scale_down_formats
from provisioner.sim.cluster import ROUTINE_EVENTS
from provisioner.sim.gangs import timeline_gangs
from provisioner.sim.records import ClaimRecord, RunResult


def _gpu(result: RunResult, instance_type: str) -> dict[str, Any] | None:
    it = next((t for t in result.fake.catalog if t.name == instance_type), None)
    return it.gpu.to_dict() if it is not None and it.gpu is not None else None


def _claim(result: RunResult, rec: ClaimRecord, pods: list[str]) -> dict[str, Any]:
    return {
        "name": rec.name,
        "nodePool": rec.nodepool,
        "instanceType": rec.instance_type,
        "zone": rec.zone,
        "capacityType": rec.capacity_type,
        **({"capacityReservationId": rec.reservation_id} if rec.reservation_id else {}),
        "pricePerHour": round(rec.price, 6),
        "gpu": _gpu(result, rec.instance_type),
        "pods": sorted(pods),
        "instanceTypeOptions": list(rec.options),
        "launchedAt": isoformat(rec.launched) if rec.launched else None,
        "deletedAt": isoformat(rec.deleted) if rec.deleted else None,
    }


def _offset(result: RunResult, when: datetime) -> str:
    return durations.format_duration(when - result.start)


def scale_down_report(result: RunResult, *, totals_only: bool = False) -> scale_down.ScaleDownReport:
    """The scale-down report of the whole run, from its ledger's rows; with `totals_only`, only its totals
    (`scale_down.build`), and the ledger's blocker rows unread."""
    kept = result.ledger.blockers() if not totals_only and result.ledger is not None else []
    return scale_down.build(
        result.actions,
        kept,
        result.usage,
        since=result.start,
        now=result.end,
        reservations=result.reservations,
        best=result.best,
        totals_only=totals_only,
    )


def to_json(result: RunResult) -> dict[str, Any]:
    state = result.state
    # The document carries the totals only: blocker counts stay in the ledger, breakdowns in the report.
    built = scale_down_report(result, totals_only=True)
    launched = sorted(
        (r for r in result.claims.values() if r.launched is not None), key=lambda r: (r.launched, r.name)
    )
    all_pods = list(state.pods.values())
    # Each node's workload pods, in one pass over the pods (not one pass per node).
    on_node: dict[str, list[str]] = {}
    for p in all_pods:
        if p.node_name and not p.is_daemonset_pod:
            on_node.setdefault(p.node_name, []).append(p.key)
    alive: list[dict[str, Any]] = []
    for rec in launched:
        claim = state.claims.get(rec.name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            continue
        node = claim.status.node_name or rec.name
        alive.append(_claim(result, rec, on_node.get(node, [])))
    unschedulable_reasons: dict[str, list[dict[str, str]]] = {}
    last = result.last_results
    for u in getattr(last, "unschedulable", ()) or ():
        unschedulable_reasons[u.pod.key] = [{"nodePool": r.nodepool, "reason": r.reason} for r in u.reasons]
    for key, reasons in result.held.items():
        unschedulable_reasons[key] = [{"nodePool": pool, "reason": why} for pool, why in reasons]
    pending = sorted(p.key for p in all_pods if not p.node_name and not p.is_terminal and not p.deleting)
    # Only when the run has gangs: documents of runs without stay as they were.
    gangs = timeline_gangs(state, last, _placements(result), result.avoided)
    requests = [
        {
            "name": r.key,
            "provisioningClassName": r.spec.provisioning_class_name,
            "pods": r.total,
            "conditions": [
                {
                    "type": c.type,
                    "status": c.status.value,
                    "reason": c.reason,
                    "message": c.message,
                    "at": _offset(result, c.last_transition_time) if c.last_transition_time else None,
                }
                for c in r.status.conditions
            ],
        }
        for r in sorted(state.provisioning_requests.values(), key=lambda r: r.key)
    ]
    return {
        "start": isoformat(result.start),
        "end": isoformat(result.end),
        "duration": _offset(result, result.end),
        "nodeClaims": [_claim(result, r, sorted(r.pods)) for r in launched],
        "placements": sorted(
            ({"pod": p.key, "node": p.node_name} for p in all_pods if p.node_name and not p.is_daemonset_pod),
            key=lambda x: x["pod"],
        ),
        "unschedulable": [{"pod": key, "reasons": unschedulable_reasons.get(key, [])} for key in pending],
        "costPerHour": round(sum(n["pricePerHour"] for n in alive), 6),
        # What the run paid, from the ledger's usage samples: the figure `provisioner report` gives.
        "cost": round(built.total.cost, 2),
        "finops": {
            "savingsPerHour": round(built.total.savings_per_hour, 6),
            "realizedSavings": round(built.total.realized_savings, 4),
            "idleCost": round(built.total.idle_cost, 4),
            "evictedPerHour": round(built.total.evicted_per_hour, 6),
            "churnCost": round(built.churn.cost, 4),
            # What all-or-nothing did not bill: a one-at-a-time launch's nodes waiting for their gang.
            **({"gangAvoidedCost": round(sum(a.cost for a in result.avoided.values()), 4)} if gangs else {}),
        },
        "reservations": reservations.to_dict(built.reservations) if built.reservations else None,
        **({"bestPossible": built.best.to_dict()} if built.best is not None else {}),
        "actions": [
            {
                "time": isoformat(a.time),
                "at": _offset(result, a.time),
                "action": a.action,
                "method": a.method,
                "node": a.node,
                "nodePool": a.nodepool,
                "reason": a.reason,
                "instanceType": a.instance_type,
                "capacityType": a.capacity_type,
                "pricePerHour": round(a.price_per_hour, 6),
                "replacement": a.replacement_type,
                "replacementCapacityType": a.replacement_capacity_type,
                "replacementNodes": list(a.replacement_nodes),
                "savingsPerHour": round(a.savings_per_hour, 6),
                "pods": list(a.pods),
            }
            for a in result.actions
        ],
        "nodes": alive,
        "maxDisruptingPerPool": dict(result.max_disrupting),
        "teams": teams_json(state.teams.values()),
        "completedPods": list(result.pods_completed),
        "events": [
            {
                "time": isoformat(e.time),
                "at": _offset(result, e.time),
                "kind": e.kind,
                **({"namespace": e.namespace} if e.namespace else {}),
                "name": e.name,
                "reason": e.reason,
                "type": e.type,
                "message": e.message,
            }
            for e in result.events
            if e.reason not in ROUTINE_EVENTS
        ],
        **({"gangs": gangs} if gangs else {}),
        **({"provisioningRequests": requests} if requests else {}),
        "timeline": [
            {
                "at": durations.format_duration(s.step.at),
                "time": isoformat(s.time),
                "do": s.step.describe(),
                "costPerHourBefore": round(s.cost_before, 6),
                "nodesBefore": s.nodes_before,
            }
            for s in result.steps
        ],
    }


def _placements(result: RunResult) -> dict[str, str]:
    """Node name -> the placement group its instance launched in (where the cloud reported one)."""
    out: dict[str, str] = {}
    for claim in result.state.claims.values():
        pid = claim.status.provider_id
        if not pid or not claim.status.node_name:
            continue
        with contextlib.suppress(CloudProviderError):
            group = result.fake.get(pid).placement_group
            if group:
                out[claim.status.node_name] = group
    return out


def teams_json(teams: Any) -> dict[str, Any]:
    """Team -> its department, pods waiting, and per pool `quota`, `allocated`, `overQuota` (and the
    non-preemptible and pending parts), as the admission controller last wrote them to its status."""
    out: dict[str, Any] = {}
    for team in sorted(teams, key=lambda t: t.name):
        status = team.status
        out[team.name] = {
            "department": team.spec.department,
            "waiting": status.waiting if status else 0,
            "pools": {
                p.node_pool: {
                    "quota": p.quota,
                    "allocated": p.allocated,
                    "overQuota": p.over_quota,
                    "allocatedNonPreemptible": p.allocated_non_preemptible,
                    "pending": p.pending,
                }
                for p in (status.pools if status else ())
            },
        }
    return out


def report(result: RunResult, *, fmt: str) -> str:
    """The FinOps scale-down report over the whole run, as html, csv or json."""
    return scale_down_formats.RENDERERS[fmt](scale_down_report(result))
