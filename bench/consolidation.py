"""Consolidation evaluation on a 1,000-node (or 10,000-node: `--nodes 10000`) cluster (../shared/BENCHMARKS.md section 3).

The cluster: the `aws` catalog (us-east-1) and four pools: `cpu-default` (on-demand), `cpu-spot` (spot),
`gpu-training` (A100/H100, tainted) and `gpu-inference` (L4/A10G/T4, spot and on-demand, tainted). Nodes
are built as Kubernetes JSON (Node + NodeClaim + Pods, PDBs, Namespaces) and fed through ClusterState, so
the snapshot is the one the controller would read. With a fixed seed: 30% of the nodes under-used
(10-35% of their CPU requested), 5% empty, the rest 65-95% full; 3% carry a do-not-disrupt pod; services
spread over many nodes, 40% of them under a PDB; a few GPU nodes run only CPU pods.

Timed: one `provisioner.disruption.plan(...)` over the whole snapshot (candidates, budgets, PDBs,
emptiness, multi-node and single-node consolidation with real re-solves, return to the preferred tier),
with budgets at 100% so every candidate is really evaluated rather than stopped by a budget. Also runs the
default 10% budgets once, for reference.

    python bench/consolidation.py [--nodes 1000] [--runs 3] [--seed 7] [--nodes-per-pod 16] [--profile]

`--nodes-per-pod 0` shows every re-solve the whole cluster instead of the best-fitting nodes per pod
(slower, a few % more savings found).

Prints one JSON line: {"nodes", "candidates", "seconds" (median of --runs), "runs", "cpuSeconds" (median),
"commands", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.api import labels as wk
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import PlannerSettings, plan
from provisioner.state.cluster import ClusterState, Snapshot

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CPU_SECONDS: list[float] = []
"""CPU seconds of each timed plan (the machine is shared: wall time is the figure, CPU time the one to
compare runs by)."""
CREATED = NOW - timedelta(days=3)
GPU_TAINT = {"key": wk.GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": wk.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}

POOLS: dict[str, dict[str, Any]] = {
    "cpu-default": {
        "share": 0.55,
        "capacity": ["on-demand"],
        "types": ["m5.2xlarge", "m5.4xlarge", "m6i.4xlarge", "c5.4xlarge", "m6i.8xlarge"],
        "requirements": [{"key": wk.GPU_COUNT, "operator": "DoesNotExist"}],
        "taints": [],
    },
    "cpu-spot": {
        "share": 0.20,
        "capacity": ["spot"],
        "types": ["m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "m6i.4xlarge"],
        "requirements": [{"key": wk.GPU_COUNT, "operator": "DoesNotExist"}],
        "taints": [],
    },
    "gpu-training": {
        "share": 0.10,
        "capacity": ["on-demand"],
        "types": ["p4d.24xlarge", "p5.48xlarge"],
        "requirements": [{"key": wk.GPU_NAME, "operator": "In", "values": ["a100", "h100"]}],
        "taints": [GPU_TAINT],
    },
    "gpu-inference": {
        "share": 0.15,
        "capacity": ["spot", "on-demand"],
        "types": ["g6.xlarge", "g6.2xlarge", "g5.xlarge", "g5.2xlarge", "g4dn.xlarge", "g6.12xlarge"],
        "requirements": [{"key": wk.GPU_NAME, "operator": "In", "values": ["l4", "a10g", "t4"]}],
        "taints": [GPU_TAINT],
    },
}


def nodepool_doc(name: str, spec: dict[str, Any], budget: str) -> dict[str, Any]:
    requirements = [
        *spec["requirements"],
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": spec["capacity"]},
    ]
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                    "requirements": requirements,
                    "taints": spec["taints"],
                }
            },
            "disruption": {"consolidateAfter": "30s", "budgets": [{"nodes": budget}]},
        },
    }


def quantity(kind: str, amount: int) -> str:
    return f"{amount}m" if kind == "cpu" else f"{amount // 2**20}Mi"


def build(nodes: int, seed: int, budget: str) -> tuple[Snapshot, dict[str, list[InstanceType]]]:
    rng = random.Random(seed)
    types = {t.name: t for t in catalog.load("aws", "us-east-1")}
    state = ClusterState()
    for team in ("research", "vision", "platform", "search"):
        state.upsert("Namespace", {"metadata": {"name": team, "labels": {wk.TEAM: team}}})
    for name, spec in POOLS.items():
        state.upsert("NodePool", nodepool_doc(name, spec, budget))
    services = [f"svc-{i}" for i in range(120)]
    for i, svc in enumerate(services):
        if i % 5 < 2:  # 40% of services have a PDB
            budget_spec = {"maxUnavailable": "20%"} if i % 2 else {"minAvailable": "60%"}
            state.upsert(
                "PodDisruptionBudget",
                {
                    "metadata": {
                        "name": svc,
                        "namespace": ("research", "vision", "platform", "search")[i % 4],
                    },
                    "spec": {"selector": {"matchLabels": {"app": svc}}, **budget_spec},
                },
            )
    pool_names = list(POOLS)
    weights = [POOLS[p]["share"] for p in pool_names]
    pod_index = 0
    for n in range(nodes):
        pool = rng.choices(pool_names, weights)[0]
        spec = POOLS[pool]
        it = types[rng.choice(spec["types"])]
        capacity_type = rng.choice(spec["capacity"])
        zone = rng.choice(["us-east-1a", "us-east-1b", "us-east-1c"])
        offering = next(o for o in it.offerings if o.capacity_type == capacity_type and o.zone == zone)
        name = f"{pool}-{n:04d}"
        pid = f"aws:///{zone}/i-{n:08x}"
        alloc = {k: quantity(k, v) if k in ("cpu", "memory") else str(v) for k, v in it.allocatable.items()}
        labels = {
            **it.labels,
            wk.NODEPOOL: pool,
            wk.CAPACITY_TYPE: capacity_type,
            wk.ZONE: zone,
            wk.HOSTNAME: name,
        }
        state.upsert(
            "Node",
            {
                "metadata": {"name": name, "labels": labels, "creationTimestamp": CREATED.isoformat()},
                "spec": {"providerID": pid, "taints": spec["taints"]},
                "status": {
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )
        state.upsert(
            "NodeClaim",
            {
                "apiVersion": "provisioner.sh/v1",
                "kind": "NodeClaim",
                "metadata": {
                    "name": name,
                    "labels": {wk.NODEPOOL: pool},
                    "creationTimestamp": CREATED.isoformat(),
                },
                "spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "default"}},
                "status": {
                    "providerID": pid,
                    "nodeName": name,
                    "instanceType": it.name,
                    "zone": zone,
                    "capacityType": capacity_type,
                    "pricePerHour": offering.price,
                    "allocatable": alloc,
                    "lastPodEventTime": (NOW - timedelta(hours=2)).isoformat(),
                    "conditions": [
                        {"type": t, "status": "True", "lastTransitionTime": CREATED.isoformat()}
                        for t in ("Launched", "Registered", "Initialized")
                    ],
                },
            },
        )
        roll = rng.random()
        if roll < 0.05:
            target = 0.0  # empty
        elif roll < 0.35:
            target = rng.uniform(0.10, 0.35)  # under-used
        else:
            target = rng.uniform(0.65, 0.95)
        cpu_cap = it.allocatable["cpu"]
        mem_cap = it.allocatable["memory"]
        gpus = it.gpu.count if it.gpu else 0
        cpu_only_on_gpu = gpus and rng.random() < 0.15
        used_cpu = 0
        gpus_left = gpus
        guarded = target > 0 and rng.random() < 0.03
        while used_cpu < target * cpu_cap:
            cpu = rng.choice([250, 500, 1000, 2000]) if not gpus else rng.choice([1000, 2000, 4000])
            if used_cpu + cpu > cpu_cap * 0.97:
                break
            memory = int(cpu / 1000 * rng.choice([1, 2, 3]) * 2**30)
            if memory > mem_cap * 0.9:
                memory = mem_cap // 4
            requests: dict[str, str] = {"cpu": f"{cpu}m", "memory": f"{memory // 2**20}Mi"}
            if gpus and not cpu_only_on_gpu:
                if gpus_left <= 0:
                    break
                share = max(1, min(gpus_left, round(gpus * target) or 1))
                requests[wk.GPU_RESOURCE] = str(share)
                gpus_left -= share
            svc = rng.choice(services)
            team = ("research", "vision", "platform", "search")[services.index(svc) % 4]
            annotations = {}
            if guarded:
                annotations[wk.DO_NOT_DISRUPT] = "true"
                guarded = False
            pod_spec: dict[str, Any] = {
                "nodeName": name,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            }
            if spec["taints"]:
                pod_spec["tolerations"] = [GPU_TOLERATION]
            state.upsert(
                "Pod",
                {
                    "metadata": {
                        "name": f"p{pod_index:06d}",
                        "namespace": team,
                        "labels": {"app": svc},
                        "annotations": annotations,
                        "ownerReferences": [{"kind": "ReplicaSet", "name": svc, "controller": True}],
                    },
                    "spec": pod_spec,
                    "status": {"phase": "Running"},
                },
            )
            pod_index += 1
            used_cpu += cpu
    snapshot = state.snapshot()
    per_pool = {name: list(types.values()) for name in POOLS}
    return snapshot, per_pool


def run_once(
    snapshot: Snapshot, types: dict[str, list[InstanceType]], settings: PlannerSettings = PlannerSettings()
) -> tuple[float, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    result = plan(snapshot, instance_types=types, now=NOW, settings=settings)
    CPU_SECONDS.append(time.process_time() - cpu)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--nodes-per-pod",
        type=int,
        default=PlannerSettings().nodes_per_pod,
        help="PlannerSettings.nodes_per_pod (0: show every re-solve the whole cluster).",
    )
    args = parser.parse_args()
    settings = PlannerSettings(nodes_per_pod=args.nodes_per_pod or None)
    snapshot, types = build(args.nodes, args.seed, "100%")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        run_once(snapshot, types, settings)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return
    times = []
    CPU_SECONDS.clear()
    result = None
    for _ in range(args.runs):
        seconds, result = run_once(snapshot, types, settings)
        times.append(seconds)
    assert result is not None
    kinds: dict[str, int] = {}
    for b in result.blockers:
        kinds[b.kind.value] = kinds.get(b.kind.value, 0) + 1
    methods: dict[str, int] = {}
    for c in result.commands:
        methods[c.method] = methods.get(c.method, 0) + len(c.nodes)
    default_snapshot, _ = build(args.nodes, args.seed, "10%")
    default_seconds, default_result = run_once(default_snapshot, types, settings)
    print(
        json.dumps(
            {
                "benchmark": "consolidation",
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "nodes": len(snapshot.nodes),
                "pods": sum(len(n.pods) for n in snapshot.nodes),
                "candidates": result.evaluated,
                "nodesPerPod": settings.nodes_per_pod,
                "seconds": round(statistics.median(times), 3),
                "runs": [round(t, 3) for t in times],
                "cpuSeconds": round(statistics.median(CPU_SECONDS[: len(times)]), 3),
                "commands": len(result.commands),
                "nodesDisrupted": len(result.disrupted),
                "byMethod": methods,
                "solves": result.solves,
                "blockers": kinds,
                "savingsPerHour": round(result.savings_per_hour, 2),
                "clusterPerHour": round(sum(n.price for n in snapshot.nodes), 2),
                "defaultBudgets": {
                    "seconds": round(default_seconds, 3),
                    "nodesDisrupted": len(default_result.disrupted),
                    "solves": default_result.solves,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
