"""Running a loaded scenario once, with no time passing: one scheduling solve over its pods, nodes and
pools, and the result as the JSON document `provisioner simulate --output json` prints.

The timeline (launches, interruptions, consolidation over virtual time) is a separate runner; this is
the static case the scheduling engine answers on its own.
"""

from __future__ import annotations

from typing import Any

from provisioner.scheduling import PoolVerdict, Results, SolveOptions, explain, solve
from provisioner.sim.scenario import LoadedScenario
from provisioner.state.objects import Pod


def run(loaded: LoadedScenario) -> Results:
    """Solve the scenario's pending pods against its nodes, pools and catalog."""
    snapshot = loaded.snapshot()
    return solve(
        loaded.pods,
        snapshot,
        pools=loaded.nodepools,
        instance_types=loaded.instance_types,
        daemonsets=loaded.daemonsets,
        options=SolveOptions(pool_defaults=loaded.pool_defaults),
    )


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


def to_json(results: Results) -> dict[str, Any]:
    """The documented output: nodeClaims, placements, unschedulable, costPerHour (claims in solve order,
    pods by name, so equal inputs print equal documents)."""
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
            ),
            key=lambda x: x["pod"],
        ),
        "costPerHour": round(results.cost_per_hour, 6),
    }
