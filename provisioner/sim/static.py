"""Running a loaded scenario once, with no time passing: one scheduling solve over its pods, nodes and
pools, and the result as the JSON document `provisioner simulate --output json` prints.

The timeline (launches, interruptions, consolidation over virtual time) is a separate runner; this is
the static case the scheduling engine answers on its own. The scenario's `spec.reservations` are offered
here as the timeline's fake cloud offers them (a zero-priced `reserved` offering per reservation, its
free count less the scenario's nodes already in it), so a reservation fills first in both. With Teams,
the pending pods of teams go through admission first, as the webhook and the admission controller would take them: the admitted ones
are solved pinned to their pool, the others are unschedulable with their quota reasons.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering, Reservation, gpu_summary
from provisioner.finops.reports.text import camel, csv_text, dump
from provisioner.quota import admission, decisions, status
from provisioner.quota.book import QuotaBook
from provisioner.quota.usage import count
from provisioner.scheduling import PoolVerdict, Results, SolveOptions, explain, solve
from provisioner.scheduling.results import PoolReason, Unschedulable
from provisioner.sim import gangs as sim_gangs
from provisioner.sim.loaded import LoadedScenario
from provisioner.state import Snapshot
from provisioner.state.objects import Pod
from provisioner.state.provisioning_requests import is_booking_pod


def run(loaded: LoadedScenario) -> Results:
    """Solve the scenario's pending pods (those quota admits) against its nodes, pools and catalog."""
    snapshot = loaded.snapshot()
    pods, held = admit(loaded, snapshot)
    pods += sim_gangs.booked_pods(loaded)
    results = _solve(loaded, pods, snapshot)
    results.unschedulable.extend(held)
    return results


def _solve(loaded: LoadedScenario, pods: list[Pod], snapshot: Snapshot) -> Results:
    """The solver over the scenario's pools, catalog (with its reservations) and capacity."""
    return solve(
        pods,
        snapshot,
        pools=loaded.nodepools,
        instance_types=with_reservations(loaded),
        daemonsets=loaded.daemonsets,
        options=SolveOptions(pool_defaults=loaded.pool_defaults, capacity=loaded.capacity),
    )


def with_reservations(loaded: LoadedScenario) -> dict[str, list[InstanceType]]:
    """Each pool's types, a type held by a reservation of `spec.reservations` with one `reserved`
    offering per reservation in front (price 0: paid either way; free: its count less the scenario's
    nodes labelled with its id). With no time passing, a Capacity Block's end plays no part."""
    specs = loaded.scenario.spec.reservations
    if not specs:
        return loaded.instance_types
    in_use: dict[str, int] = {}
    for node in loaded.nodes:
        rid = node.labels.get(wk.CAPACITY_RESERVATION_ID)
        if rid:
            in_use[rid] = in_use.get(rid, 0) + 1
    out: dict[str, list[InstanceType]] = {}
    for pool, types in loaded.instance_types.items():
        out[pool] = []
        for it in types:
            held = [r for r in specs if r.instance_type == it.name]
            if not held:
                out[pool].append(it)
                continue
            reserved = []
            for r in held:
                on_demand = it.cheapest(zones={r.zone}, capacity_types={wk.CAPACITY_TYPE_ON_DEMAND})
                free = max(r.count - in_use.get(r.id, 0), 0)
                kind = wk.RESERVATION_TYPE_CAPACITY_BLOCK if r.ends_at else wk.RESERVATION_TYPE_DEFAULT
                reservation = Reservation(
                    id=r.id,
                    kind=kind,
                    free=free,
                    total=r.count,
                    hourly_price=on_demand.price if on_demand else 0.0,
                )
                reserved.append(
                    Offering(r.zone, wk.CAPACITY_TYPE_RESERVED, 0.0, free > 0, reservation=reservation)
                )
            out[pool].append(it.with_offerings((*reserved, *it.offerings)))
    return out


def admit(loaded: LoadedScenario, snapshot: Snapshot) -> tuple[list[Pod], list[Unschedulable]]:
    """The pods to solve (team pods admitted, pinned to their pool; pods of no team as they are) and the
    team pods quota holds, with the reason per pool."""
    if not loaded.teams:
        return list(loaded.pods), []
    book = QuotaBook.of(snapshot, loaded.pool_defaults)
    waiting = [p for p in loaded.pods if book.team_of(p.namespace) is not None]
    plan = admission.decide(snapshot, book, gated=waiting)
    pools = {a.pod.key: a.pool for a in plan.admitted}
    pods = []
    for pod in loaded.pods:
        if pod.key not in pools and book.team_of(pod.namespace) is not None:
            continue
        pool = pools.get(pod.key)
        pods.append(
            pod
            if pool is None
            else dataclasses.replace(pod, node_selector={**pod.node_selector, wk.NODEPOOL: pool})
        )
    held = [
        Unschedulable(
            pod=h.pod,
            reasons=[PoolReason(nodepool=pool, reason=f"{h.head}: {why}") for pool, why in h.reasons],
        )
        for h in plan.held
    ]
    return pods, held


def explain_pod(loaded: LoadedScenario, pod: Pod) -> list[PoolVerdict]:
    """Each pool's verdict for the pod: on its own, or the full solve's reasons when that solve leaves
    it unschedulable."""
    return explain(
        pod,
        loaded.snapshot(),
        pools=loaded.nodepools,
        instance_types=with_reservations(loaded),
        daemonsets=loaded.daemonsets,
        defaults=loaded.pool_defaults,
        pods=loaded.pods,
    )


CLAIM_COLUMNS = (
    "name",
    "node_pool",
    "instance_type",
    "zone",
    "capacity_type",
    "price_per_hour",
    "gpu",
    "gpus",
    "pods",
    "launched_at",
    "deleted_at",
)
"""The CSV of `simulate -o csv`: one row per NodeClaim (launched over a timeline, or planned)."""


def document_text(doc: dict[str, Any], fmt: str) -> str:
    """`simulate`'s result document as `json`, `yaml`, or `csv` (its NodeClaims, one row each)."""
    if fmt != "csv":
        return dump(doc, fmt)
    rows = []
    for c in doc["nodeClaims"]:
        gpu = c.get("gpu") or {}
        record = {**c, "gpu": gpu.get("name"), "gpus": gpu.get("count", 0), "pods": " ".join(c["pods"])}
        rows.append([record.get(camel(k)) for k in CLAIM_COLUMNS])
    return csv_text(CLAIM_COLUMNS, rows)


def requests_of(loaded: LoadedScenario, results: Results) -> list[dict[str, Any]]:
    """The scenario's ProvisioningRequests and the condition each would get (`sim.gangs`)."""
    snapshot = loaded.snapshot()
    return sim_gangs.static_requests(loaded, results, lambda pods: _solve(loaded, pods, snapshot))


def to_json(results: Results, loaded: LoadedScenario | None = None) -> dict[str, Any]:
    """The documented output: nodeClaims, placements, unschedulable, costPerHour (claims in solve order,
    pods by name, so equal inputs print equal documents); with gangs, `gangs`; with ProvisioningRequests
    (`loaded` given), `provisioningRequests`. The pods of requests are no pods of the cluster: their
    reasons are the request's, not `unschedulable` rows."""
    requests = requests_of(loaded, results) if loaded is not None and loaded.provisioning_requests else []
    claims = []
    for claim in results.new_claims:
        it = claim.instance_type
        claims.append(
            {
                "name": claim.hostname,
                "nodePool": claim.nodepool.name,
                "instanceType": it.name,
                "zone": claim.offering.zone,
                "capacityType": claim.offering.capacity_type,
                "pricePerHour": round(claim.offering.price, 6),
                "gpu": gpu_summary(it),
                "pods": sorted(p.key for p in claim.pods),
                "instanceTypeOptions": [t.name for t in claim.instance_types],
            }
        )
    return {
        "nodeClaims": claims,
        "placements": sorted(
            ({"pod": p.pod.key, "node": p.node} for p in results.placements), key=lambda x: x["pod"]
        ),
        "unschedulable": sorted(
            (
                {
                    "pod": u.pod.key,
                    "reasons": [{"nodePool": r.nodepool, "reason": r.reason} for r in u.reasons],
                }
                for u in results.unschedulable
                if not is_booking_pod(u.pod)
            ),
            key=lambda x: x["pod"],
        ),
        "costPerHour": round(results.cost_per_hour, 6),
        # Only when the scenario has gangs: documents of scenarios without stay as they were.
        **({"gangs": sim_gangs.static_gangs(results)} if results.gangs else {}),
        **({"provisioningRequests": requests} if requests else {}),
    }


def team_status(loaded: LoadedScenario) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, status) of every Team and Department as this static run leaves them: allocated is
    what the pods admitted *and placed* hold (bound pods, and admitted pods the solve gives a node);
    admitted pods the solve cannot place wait, with what they ask as pending, like the pods quota holds."""
    snapshot = loaded.snapshot()
    book = QuotaBook.of(snapshot, loaded.pool_defaults)
    results = run(loaded)
    pool_of = {n.name: n.nodepool for n in snapshot.nodes}
    placed: dict[str, tuple[Pod, str]] = {}
    for claim in results.new_claims:
        for pod in claim.pods:
            placed[pod.key] = (pod, claim.nodepool.name)
    for placement in results.placements:
        pool = pool_of.get(placement.node) or placement.pod.node_selector.get(wk.NODEPOOL)
        if pool is not None:
            placed[placement.pod.key] = (placement.pod, pool)
    usage = count(dataclasses.replace(snapshot, pending_pods=()), book)
    held: list[decisions.Hold] = []
    for pod in snapshot.pending_pods:
        team = book.team_of(pod.namespace)
        if team is None:
            continue
        if pod.key in placed:
            found, pool = placed[pod.key]
            usage.add(found, pool=pool, team=team.name, department=team.spec.department)
            continue
        order = [p for p in book.pool_order(pod, team) if p in book.pools]
        held.append(
            decisions.Hold(pod=pod, team=team.name, reasons=(), first_pool=order[0] if order else None)
        )
    return status.documents(book, decisions.AdmissionPlan(held=held, usage=usage))
