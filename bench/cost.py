"""Cost quality: our $/h against an LP lower bound (../shared/BENCHMARKS.md section 2).

A fixed GPU workload suite (training jobs of 1, 2, 4 and 8 GPUs of named models, inference pods asking
for GPU memory, CPU-only pods) is solved by `provisioner.scheduling.solve` on the `aws` and `gcp`
catalogs (list prices, spot and on-demand, one tainted GPU pool and one CPU pool). The bound is an LP
(scipy, HiGHS) on the same input where nodes and pod assignments may be fractional:

    minimise   sum_t price_t * x_t
    subject to sum_t z[c,t] = n_c                         every pod of class c is placed
               sum_c r[c,k] * z[c,t] <= alloc[t,k] * x_t  per type t and resource k
               z[c,t] = 0 unless type t meets class c's requirements, taints and fits one pod
               x, z >= 0

Any real packing is a feasible point, so the LP optimum can only be below it; ratio = ours / bound.

    python bench/cost.py [--catalogs aws,gcp] [--integral-nodes] [--exact-limit 120] [--copies 1]

`--integral-nodes` adds a tighter bound where node counts are whole (pods may still split): it shows how
much of the gap is only the LP's fractional nodes (three single-H100 pods need a whole p5.48xlarge).

The exact optimum (`--exact-limit` seconds, 0 to skip) is the cheapest real packing: a MILP with whole
nodes and whole pods per node (`provisioner.scheduling.optimum.exact_optimum`, which `simulate` uses too); it is reported where HiGHS proves it in time
(`--copies N` runs the suite N times over, to find the sizes where it still does).

Prints one JSON line per catalog ({"catalog", "pods", "nodes", "costPerHour", "lowerBound", "ratio",
"exactOptimum", "ratioToExact"}) and a last line for the whole suite.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from scipy.optimize import LinearConstraint, linprog, milp
from scipy.sparse import lil_matrix

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.api.quantities import PODS
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import solve
from provisioner.scheduling.optimum import RESOURCES, exact_optimum, problem
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import Pod

GPU_TAINT = {"key": wk.GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}


def pool(name: str, requirements: list[dict[str, Any]], taints: list[dict[str, Any]]) -> NodePool:
    return NodePool.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                        "requirements": requirements,
                        "taints": taints,
                    }
                }
            },
        }
    )


def pools() -> list[NodePool]:
    both = {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}
    return [
        pool("gpu", [both, {"key": wk.GPU_COUNT, "operator": "Gt", "values": ["0"]}], [GPU_TAINT]),
        pool("cpu", [both, {"key": wk.GPU_COUNT, "operator": "DoesNotExist"}], []),
    ]


def _pod(
    name: str,
    *,
    cpu: str,
    memory: str,
    gpus: int = 0,
    selector: dict[str, str] | None = None,
    required: list[dict[str, Any]] | None = None,
) -> Pod:
    requests = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if gpus:
        requests[wk.GPU_RESOURCE] = str(gpus)
        spec["tolerations"] = [{"key": wk.GPU_RESOURCE, "operator": "Exists"}]
    if selector:
        spec["nodeSelector"] = selector
    if required:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": required}]
                }
            }
        }
    return Pod.from_dict({"metadata": {"name": name, "namespace": "bench"}, "spec": spec})


def suite(prefix: str = "") -> list[Pod]:
    """The workload: the same on both clouds (GPU models both offer: h100, a100, l4, t4)."""
    pods: list[Pod] = []

    def add(name: str, count: int, **kw: Any) -> None:
        pods.extend(_pod(f"{prefix}{name}-{i}", **kw) for i in range(count))

    # Training jobs of 8, 4, 2 and 1 GPUs of named models.
    add("train-h100x8", 3, cpu="64", memory="512Gi", gpus=8, selector={wk.GPU_NAME: "h100"})
    add("train-a100x4", 3, cpu="24", memory="160Gi", gpus=4, selector={wk.GPU_NAME: "a100"})
    add("train-a100x2", 5, cpu="12", memory="80Gi", gpus=2, selector={wk.GPU_NAME: "a100"})
    add("train-h100x1", 3, cpu="8", memory="64Gi", gpus=1, selector={wk.GPU_NAME: "h100"})
    add("train-l4x2", 4, cpu="8", memory="32Gi", gpus=2, selector={wk.GPU_NAME: "l4"})

    # Inference asking for GPU memory, not a model.
    def mem(op: str, v: int) -> list[dict[str, Any]]:
        return [{"key": wk.GPU_MEMORY, "operator": op, "values": [str(v)]}]

    add("infer-20g", 10, cpu="4", memory="16Gi", gpus=1, required=mem("Gt", 20000))
    add("infer-40g", 4, cpu="8", memory="48Gi", gpus=1, required=mem("Gt", 40000))
    add("infer-t4", 8, cpu="2", memory="8Gi", gpus=1, selector={wk.GPU_NAME: "t4"})
    # CPU-only services and batch.
    add("web", 30, cpu="500m", memory="1Gi")
    add("api", 12, cpu="2", memory="4Gi")
    add("etl", 6, cpu="8", memory="32Gi")
    add("cache", 4, cpu="2", memory="24Gi")
    return pods


def lower_bound(
    pods: list[Pod], node_pools: list[NodePool], types: list[InstanceType], *, integral_nodes: bool = False
) -> float:
    """The LP optimum (fractional nodes and assignments). With `integral_nodes`, node counts must be whole
    (pods may still split across nodes): a tighter bound, still below any real packing."""
    found = problem(pods, node_pools, types)
    class_list, columns, pairs = found.classes, found.columns, found.pairs
    n_x, n_z = len(columns), len(pairs)
    cost = np.concatenate([np.array([c[2] for c in columns]), np.zeros(n_z)])
    a_eq = lil_matrix((len(class_list), n_x + n_z))
    b_eq = np.array([float(n) for _, n in class_list])
    for j, (ci, _) in enumerate(pairs):
        a_eq[ci, n_x + j] = 1.0
    rows = n_x * len(RESOURCES)
    a_ub = lil_matrix((rows, n_x + n_z))
    for ti, (_, it, _) in enumerate(columns):
        alloc = it.allocatable
        alloc.setdefault(PODS, it.max_pods)
        for k, r in enumerate(RESOURCES):
            # Scale each row to units of this type's allocatable so HiGHS sees well-conditioned numbers.
            scale = float(max(alloc.get(r, 0), 1))
            a_ub[ti * len(RESOURCES) + k, ti] = -alloc.get(r, 0) / scale
    for j, (ci, ti) in enumerate(pairs):
        p = class_list[ci][0]
        it = columns[ti][1]
        alloc = it.allocatable
        alloc.setdefault(PODS, it.max_pods)
        for k, r in enumerate(RESOURCES):
            amount = p.requests.get(r, 0)
            if amount:
                a_ub[ti * len(RESOURCES) + k, n_x + j] = amount / float(max(alloc.get(r, 0), 1))
    if integral_nodes:
        integrality = np.concatenate([np.ones(n_x), np.zeros(n_z)])
        constraints = [
            LinearConstraint(a_ub.tocsr(), -np.inf, np.zeros(rows)),
            LinearConstraint(a_eq.tocsr(), b_eq, b_eq),
        ]
        found = milp(cost, constraints=constraints, integrality=integrality, options={"time_limit": 60})
        if found.x is None:
            raise SystemExit(f"MILP failed: {found.message}")
        # A time-limited MILP reports its best proven bound, which is still a lower bound.
        return float(getattr(found, "mip_dual_bound", None) or found.fun)
    result = linprog(
        cost,
        A_ub=a_ub.tocsr(),
        b_ub=np.zeros(rows),
        A_eq=a_eq.tocsr(),
        b_eq=b_eq,
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:
        raise SystemExit(f"LP failed: {result.message}")
    return float(result.fun)


def run(name: str, *, integral: bool = False, exact_limit: float = 0.0, copies: int = 1) -> dict[str, Any]:
    types = catalog.load(name)
    pods = [p for i in range(copies) for p in suite(prefix=f"x{i}-" if i else "")]
    node_pools = pools()
    results = solve(pods, Snapshot(), pools=node_pools, instance_types={p.name: types for p in node_pools})
    if results.unschedulable:
        u = results.unschedulable[0]
        raise SystemExit(
            f"{name}: {len(results.unschedulable)} pods unschedulable, e.g. {u.pod.key}: {u.reasons}"
        )
    bound = lower_bound(pods, node_pools, types)
    ours = results.cost_per_hour
    line = {
        "catalog": name,
        "pods": len(pods),
        "nodes": len(results.new_claims),
        "costPerHour": round(ours, 4),
        "lowerBound": round(bound, 4),
        "ratio": round(ours / bound, 4),
    }
    if exact_limit:
        optimum, status = exact_optimum(pods, node_pools, types, ceiling=ours, time_limit=exact_limit)
        line["exactOptimum"] = round(optimum, 4) if optimum is not None else None
        line["ratioToExact"] = round(ours / optimum, 4) if optimum else None
        if optimum is None:
            line["exactStatus"] = status
    if integral:
        whole = lower_bound(pods, node_pools, types, integral_nodes=True)
        line["integralNodesBound"] = round(whole, 4)
        line["ratioToIntegralNodesBound"] = round(ours / whole, 4)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalogs", default="aws,gcp")
    parser.add_argument(
        "--integral-nodes",
        action="store_true",
        help="also report the bound with whole nodes (MILP, HiGHS, 60 s limit per catalog)",
    )
    parser.add_argument(
        "--exact-limit",
        type=float,
        default=120.0,
        help="seconds for HiGHS to find the exact optimum with whole nodes per catalog (0: skip)",
    )
    parser.add_argument("--copies", type=int, default=1, help="the suite this many times over (the size)")
    args = parser.parse_args()
    total_ours = total_bound = 0.0
    for name in [c for c in args.catalogs.split(",") if c]:
        line = run(name, integral=args.integral_nodes, exact_limit=args.exact_limit, copies=args.copies)
        total_ours += line["costPerHour"]
        total_bound += line["lowerBound"]
        print(json.dumps(line), flush=True)
    print(
        json.dumps(
            {
                "catalog": "all",
                "costPerHour": round(total_ours, 4),
                "lowerBound": round(total_bound, 4),
                "ratio": round(total_ours / total_bound, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
