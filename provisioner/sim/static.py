"""Running a loaded scenario once, with no time passing: one scheduling solve over its pods, nodes and
pools, and the result as the JSON document `provisioner simulate --output json` prints.

The timeline (launches, interruptions, consolidation over virtual time) is a separate runner; this is
the static case the scheduling engine answers on its own. With Teams, the pending pods of teams go
through admission first, as the webhook and the admission controller would take them: the admitted ones
are solved pinned to their pool, the others are unschedulable with their quota reasons.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from provisioner.api import labels as wk
from provisioner.quota import admission
from provisioner.quota.book import QuotaBook
from provisioner.scheduling import PoolVerdict, Results, SolveOptions, explain, solve
from provisioner.scheduling.results import PoolReason, Unschedulable
from provisioner.sim import gangs as sim_gangs
from provisioner.sim.scenario import LoadedScenario
from provisioner.state import Snapshot
from provisioner.state.objects import Pod
from provisioner.state.provisioning_requests import is_booking_pod


def run(loaded: LoadedScenario) -> Results:
    """Solve the scenario's pending pods (those quota admits) against its nodes, pools and catalog."""
    snapshot = loaded.snapshot()
    pods, held = admit(loaded, snapshot)
    pods += sim_gangs.booked_pods(loaded)
    results = solve(
        pods,
        snapshot,
        pools=loaded.nodepools,
        instance_types=loaded.instance_types,
        daemonsets=loaded.daemonsets,
        options=SolveOptions(pool_defaults=loaded.pool_defaults, capacity=loaded.capacity),
    )
    results.unschedulable.extend(held)
    return results


def admit(loaded: LoadedScenario, snapshot: Snapshot) -> tuple[list[Pod], list[Unschedulable]]:
    """The pods to solve (team pods admitted, pinned to their pool; pods of no team as they are) and the
    team pods quota holds, with the reason per pool."""
    if not loaded.teams:
        return list(loaded.pods), []
    book = QuotaBook(
        teams=snapshot.teams,
        departments=snapshot.departments,
        nodepools=snapshot.nodepools,
        namespaces=snapshot.namespaces,
        defaults=loaded.pool_defaults,
    )
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
        instance_types=loaded.instance_types,
        daemonsets=loaded.daemonsets,
        defaults=loaded.pool_defaults,
        pods=loaded.pods,
    )


def requests_of(loaded: LoadedScenario, results: Results) -> list[dict[str, Any]]:
    """The scenario's ProvisioningRequests and the condition each would get (`sim.gangs`)."""
    snapshot = loaded.snapshot()

    def check(pods: list[Pod]) -> Results:
        return solve(
            pods,
            snapshot,
            pools=loaded.nodepools,
            instance_types=loaded.instance_types,
            daemonsets=loaded.daemonsets,
            options=SolveOptions(pool_defaults=loaded.pool_defaults, capacity=loaded.capacity),
        )

    return sim_gangs.static_requests(loaded, results, check)


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
                "gpu": it.gpu.to_dict() if it.gpu is not None else None,
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
