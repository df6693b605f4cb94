"""Simulated scale: `provisioner simulate` of a large cluster over a few virtual hours
(../shared/BENCHMARKS.md section 4).

The scenario (written to a temporary file, then run by the real CLI in a child process): the `aws`
catalog (us-east-1), one CPU pool limited to c6i.4xlarge and m6i.4xlarge (spot and on-demand), and
`--pods` pods in Deployments of `--replicas` pods each, every pod asking for 1500m CPU and 2Gi, so about
ten fit a node and the cluster grows to about pods / 10 nodes. Timeline:
  00:00  every Deployment applied: the scale-up;
  01:00  c6i.4xlarge spot runs out in every zone and the cloud takes those spot nodes back: the
         replacements fall back (m6i spot, then on-demand);
  02:00  half of the Deployments are deleted: emptiness and consolidation;
  03:00  the run ends (`--hours`).

Timed: the child's wall time and peak RSS (`os.wait4`), and its CPU seconds (user + system), since the
machine is shared: wall time is the figure, CPU time the one to compare runs by.

    python bench/scale.py [--pods 100000] [--replicas 1000] [--hours 3] [--runs 1] [--profile FILE]

Prints one JSON line: the machine's facts, sizes, and the median wall time of --runs with its CPU seconds
and peak RSS (MiB), plus the nodes at the end and the run's ticks and ledger actions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TYPES = ["c6i.4xlarge", "m6i.4xlarge"]


def scenario(*, pods: int, replicas: int, hours: int) -> list[dict[str, Any]]:
    """The scenario's documents (see the module docstring)."""
    deployments = max(1, pods // replicas)
    sizes = [replicas] * deployments
    sizes[-1] += pods - replicas * deployments

    def deployment(i: int, size: int) -> dict[str, Any]:
        name = f"svc-{i:04d}"
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "web"},
            "spec": {
                "replicas": size,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "app:1",
                                "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}},
                            }
                        ]
                    },
                },
            },
        }

    timeline = [
        {"at": "0s", "apply": [deployment(i, s) for i, s in enumerate(sizes)]},
        {
            "at": "1h",
            "unavailable": [{"instanceType": "c6i.4xlarge", "capacityType": "spot"}],
            "interrupt": [{"nodePool": "cpu", "capacityType": "spot"}],
        },
        {
            "at": "2h",
            "delete": [
                {"kind": "Deployment", "namespace": "web", "name": f"svc-{i:04d}"}
                for i in range(0, deployments, 2)
            ],
        },
    ]
    return [
        {
            "apiVersion": "provisioner.sh/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "scale"},
            "spec": {"catalog": "aws", "region": "us-east-1", "duration": f"{hours}h", "timeline": timeline},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "cpu"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                        "requirements": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": TYPES},
                            {
                                "key": "provisioner.sh/capacity-type",
                                "operator": "In",
                                "values": ["spot", "on-demand"],
                            },
                        ],
                    }
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "5m",
                    "budgets": [{"nodes": "10%"}],
                },
            },
        },
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": "provisioner-node",
                "subnetSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
                "securityGroupSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
            },
        },
    ]


def run_once(path: Path, profile: str | None) -> dict[str, Any]:
    code = "import sys; from provisioner.cli import main; sys.argv = ['provisioner', *sys.argv[1:]]; main()"
    if profile:
        code = f"import cProfile; cProfile.run({code!r}, {profile!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", code, "simulate", str(path), "-o", "json"], stdout=out, env=env
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"simulate exited {child.returncode}")
        out.seek(0)
        doc = json.loads(out.read())
    return {
        "seconds": wall,
        "cpuSeconds": usage.ru_utime + usage.ru_stime,
        "peakRssMiB": usage.ru_maxrss / 1024,
        "nodesAtEnd": len(doc.get("nodes", [])),
        "claims": len(doc.get("nodeClaims", [])),
        "actions": len(doc.get("actions", [])),
        "unschedulable": len(doc.get("unschedulable", [])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=1000, help="pods per Deployment")
    parser.add_argument("--hours", type=int, default=3, help="virtual hours simulated (at least 3)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--profile", metavar="FILE", help="cProfile the (single) run into FILE")
    parser.add_argument("--keep", metavar="FILE", help="also write the scenario to FILE")
    args = parser.parse_args()
    docs = scenario(pods=args.pods, replicas=args.replicas, hours=max(3, args.hours))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "scale.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        runs = [run_once(path, args.profile) for _ in range(1 if args.profile else max(1, args.runs))]
    median = statistics.median(r["seconds"] for r in runs)
    chosen = min(runs, key=lambda r: abs(r["seconds"] - median))
    print(
        json.dumps(
            {
                "benchmark": "scale",
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "machine": platform.machine(),
                "load1": round(os.getloadavg()[0], 2),
                "pods": args.pods,
                "replicas": args.replicas,
                "hours": max(3, args.hours),
                "seconds": round(median, 2),
                "runs": [round(r["seconds"], 2) for r in runs],
                "cpuSeconds": round(chosen["cpuSeconds"], 2),
                "peakRssMiB": round(max(r["peakRssMiB"] for r in runs), 1),
                "nodesAtEnd": chosen["nodesAtEnd"],
                "claims": chosen["claims"],
                "actions": chosen["actions"],
                "unschedulable": chosen["unschedulable"],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
