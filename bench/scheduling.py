"""Scheduling throughput in Karpenter's benchmark shape (../shared/BENCHMARKS.md section 1).

One NodePool (no limits, taints or weight), an empty cluster, the 400 synthetic types of the
`karpenter-benchmark` catalog, and n pods in five equal groups (remainder generic): generic pods with a
random label; zone topology spread (maxSkew 1, DoNotSchedule) over a randomly chosen label; the same over
hostname; zonal pod self-affinity on a label drawn from 7 values; hostname anti-affinity, all mutually
anti-affine. Requests are drawn uniformly with a fixed seed. Only `solve` is timed; every pod must be
placed or the run fails.

    python bench/scheduling.py [--sizes 1,100,1000,5000] [--runs 1] [--profile]

Prints one JSON line per size: {"pods", "nodes", "seconds", "podsPerSecond", "cpuSeconds"} (medians of
--runs) and the process's peak RSS so far ("peakRssMiB", pods and answer included).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider import catalog
from provisioner.scheduling import Results, solve
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import Pod

CPUS = ("100m", "250m", "500m", "1000m", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
SPREAD_LABELS = 10
AFFINITY_VALUES = 7


def _pod(
    rng: random.Random,
    name: str,
    labels: dict[str, str],
    affinity: dict[str, Any] | None = None,
    spread: list[dict[str, Any]] | None = None,
) -> Pod:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}},
            }
        ]
    }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec})


def make_pods(n: int, seed: int = 42) -> list[Pod]:
    rng = random.Random(seed)
    group = n // 5
    pods: list[Pod] = []

    def generic(count: int, prefix: str) -> None:
        for i in range(count):
            pods.append(_pod(rng, f"{prefix}-{i}", {"my-label": f"v{rng.randrange(1000)}"}))

    def spread(count: int, key: str, prefix: str) -> None:
        for i in range(count):
            value = f"s{rng.randrange(SPREAD_LABELS)}"
            labels = {prefix: value}
            constraint = {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
            pods.append(_pod(rng, f"{prefix}-{i}", labels, spread=[constraint]))

    generic(group, "generic")
    spread(group, wk.ZONE, "zone-spread")
    spread(group, wk.HOSTNAME, "host-spread")
    for i in range(group):
        labels = {"affinity": f"a{rng.randrange(AFFINITY_VALUES)}"}
        term = {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": labels}}
        aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        pods.append(_pod(rng, f"affinity-{i}", labels, affinity=aff))
    for i in range(group):
        labels = {"app": "nginx"}
        term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": labels}}
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        pods.append(_pod(rng, f"anti-{i}", labels, affinity=anti))
    generic(n - len(pods), "rest")
    return pods


def pool() -> NodePool:
    return NodePool.model_validate(
        {
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "default"}}}},
        }
    )


def run(n: int) -> dict[str, Any]:
    types = catalog.load("karpenter-benchmark")
    pods = make_pods(n)
    pools = [pool()]
    start, cpu = time.perf_counter(), time.process_time()
    results = solve(pods, Snapshot(), pools=pools, instance_types={"default": types})
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu
    if results.unschedulable:
        first = results.unschedulable[0]
        raise SystemExit(
            f"{len(results.unschedulable)} pods unschedulable at n={n}, e.g. {first.pod.key}: {first.reasons}"
        )
    placed = sum(len(c.pods) for c in results.new_claims) + len(results.placements)
    if placed != n:
        raise SystemExit(f"placed {placed} of {n} pods")
    verify(results)
    return {"pods": n, "nodes": len(results.new_claims), "seconds": seconds, "cpuSeconds": cpu_seconds}


def verify(results: Results) -> None:
    """Outside the timing: the constraints of every group hold in the answer (a fast wrong answer is
    worth nothing)."""
    from collections import Counter, defaultdict

    zone_spread: dict[str, Counter[str]] = defaultdict(Counter)
    affinity_zones: dict[str, set[str]] = defaultdict(set)
    for claim in results.new_claims:
        zone = claim.offering.zone
        host_spread: Counter[str] = Counter()
        anti = 0
        for p in claim.pods:
            if p.name.startswith("zone-spread"):
                zone_spread[p.labels["zone-spread"]][zone] += 1
            elif p.name.startswith("host-spread"):
                host_spread[p.labels["host-spread"]] += 1
            elif p.name.startswith("affinity"):
                affinity_zones[p.labels["affinity"]].add(zone)
            elif p.name.startswith("anti"):
                anti += 1
        total = tuple(sum(p.requests.get(r, 0) for p in claim.pods) for r in ("cpu", "memory", "pods"))
        alloc = claim.instance_type.allocatable
        if any(t > alloc.get(r, 0) for t, r in zip(total, ("cpu", "memory", "pods"), strict=True)):
            raise SystemExit(f"{claim.hostname} is over-committed")
        if anti > 1 or any(c > 1 for c in host_spread.values()):
            raise SystemExit(f"{claim.hostname} breaks hostname anti-affinity or spread")
    for label, counts in zone_spread.items():
        values = [counts.get(z, 0) for z in ("zone-1", "zone-2", "zone-3")]
        if max(values) - min(values) > 1:
            raise SystemExit(f"zone spread {label} skewed: {values}")
    for label, zones in affinity_zones.items():
        if len(zones) > 1:
            raise SystemExit(f"affinity group {label} spans zones {sorted(zones)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,100,1000,5000", help="comma-separated pod counts")
    parser.add_argument("--runs", type=int, default=1, help="runs per size; the median is printed")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size, top 25 by tottime")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        run(max(sizes))
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
        return
    for n in sizes:
        runs = [run(n) for _ in range(max(1, args.runs))]
        seconds = statistics.median(r["seconds"] for r in runs)
        print(
            json.dumps(
                {
                    "pods": n,
                    "nodes": runs[0]["nodes"],
                    "seconds": round(seconds, 4),
                    "podsPerSecond": round(n / seconds, 1) if seconds > 0 else None,
                    # The machine is shared: CPU seconds of the solve (median) compare runs better.
                    "cpuSeconds": round(statistics.median(r["cpuSeconds"] for r in runs), 4),
                    "peakRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
