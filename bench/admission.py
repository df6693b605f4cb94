"""Admission decision time: one `provisioner.quota.admission.decide` over a cluster of teams.

The input: `--pools` pools each limited to `--pool-gpus` GPUs, `--teams` teams with a quota of
`--quota` GPUs on every pool (weights 1-3), `--running` admitted 1-GPU pods spread over the pools and
teams (half of them preemptible), and `--gated` 1-GPU pods waiting behind the gate (a third of them
preemptible). Two shapes are timed: `full` (the pools at their limits: every waiting pod is held, and
fair-share reclaim is tried) and `room` (limits 10x: every waiting pod is admitted, most by borrowing in
turns). The admission controller runs this once per reconcile pass while pods wait.

    python bench/admission.py [--running 2000] [--gated 500] [--teams 10] [--pools 4] [--runs 5]

Prints one JSON line: {"shape": {"seconds" (median of --runs), "admitted", "held"}, ...}.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.api import Department, NodePool, Team
from provisioner.api import labels as wk
from provisioner.quota import admission
from provisioner.quota.book import QuotaBook
from provisioner.state import Snapshot
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Node, Pod

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _pool(name: str, gpus: int) -> NodePool:
    return NodePool.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "limits": {wk.GPU_RESOURCE: str(gpus)},
                "template": {"spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "default"}}},
            },
        }
    )


def _team(name: str, pools: list[str], quota: int, weight: int) -> Team:
    entries = [
        {"nodePool": p, "resources": {wk.GPU_RESOURCE: str(quota)}, "overQuotaWeight": weight} for p in pools
    ]
    return Team.model_validate(
        {"metadata": {"name": name}, "spec": {"namespaces": [name], "quotas": entries}}
    )


def _pod(name: str, team: str, *, minute: int, preemptible: bool, gated: bool, pool: str | None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": {wk.GPU_RESOURCE: "1"}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    if pool:
        spec["nodeSelector"] = {wk.NODEPOOL: pool}
    meta = {
        "name": name,
        "namespace": team,
        "labels": {wk.PREEMPTIBLE: "true"} if preemptible else {},
        "creationTimestamp": (T0 + timedelta(minutes=minute)).isoformat(),
    }
    return Pod.from_dict({"metadata": meta, "spec": spec})


def build(args: argparse.Namespace, *, pool_gpus: int) -> tuple[Snapshot, QuotaBook]:
    pool_names = [f"pool-{i}" for i in range(args.pools)]
    pools = [_pool(p, pool_gpus) for p in pool_names]
    teams = [_team(f"team-{i}", pool_names, args.quota, 1 + i % 3) for i in range(args.teams)]
    bound: dict[str, list[Pod]] = {p: [] for p in pool_names}
    for k in range(args.running):
        pool = pool_names[k % args.pools]
        bound[pool].append(
            _pod(f"r{k}", f"team-{k % args.teams}", minute=k, preemptible=k % 2 == 0, gated=False, pool=pool)
        )
    pending = [
        _pod(
            f"g{k}",
            f"team-{k % args.teams}",
            minute=args.running + k,
            preemptible=k % 3 == 0,
            gated=True,
            pool=None,
        )
        for k in range(args.gated)
    ]
    nodes = tuple(
        StateNode(name=f"node-{p}", node=Node(name=f"node-{p}", labels={wk.NODEPOOL: p}), pods=tuple(pods))
        for p, pods in bound.items()
    )
    snap = Snapshot(nodes=nodes, pending_pods=tuple(pending), nodepools=tuple(pools), teams=tuple(teams))
    departments: list[Department] = []
    return snap, QuotaBook(teams=teams, departments=departments, nodepools=pools, namespaces={})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--running", type=int, default=2000)
    parser.add_argument("--gated", type=int, default=500)
    parser.add_argument("--teams", type=int, default=10)
    parser.add_argument("--pools", type=int, default=4)
    parser.add_argument("--quota", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    full = args.running // args.pools
    out: dict[str, Any] = {
        "running": args.running,
        "gated": args.gated,
        "teams": args.teams,
        "pools": args.pools,
        "python": platform.python_version(),
    }
    for shape, pool_gpus in (("full", full), ("room", full * 10)):
        snap, book = build(args, pool_gpus=pool_gpus)
        times = []
        plan = None
        for _ in range(args.runs):
            started = time.perf_counter()
            plan = admission.decide(snap, book)
            times.append(time.perf_counter() - started)
        assert plan is not None
        out[shape] = {
            "seconds": round(statistics.median(times), 4),
            "admitted": len(plan.admitted),
            "held": len(plan.held),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
