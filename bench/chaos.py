"""The reliability campaign (issue 15): kill `provisioner run` at every crash point, restart it, and count
what a crash can cost: leaked instances, double launches, stranded pods, pool limits exceeded.

Each run: a fresh Kubernetes API (the kmock-based fixture of tests/controllers, over HTTP), a NodeClass, a
GPU NodePool with a GPU limit, and a seeded workload of 1- and 2-GPU pods. `provisioner run --cloud fake
--fake-state FILE` runs as a real process with `PROVISIONER_CRASH_AT=POINT:N` (provisioner.crashpoints):
it SIGKILLs itself the N-th time it passes POINT. The workload goes on while it runs: scale-up, then some
pods end (their nodes empty: consolidation) and a user deletes one claim (drain, terminate, finalizer).
When the process died, a new one (no crash point) starts on the same API and the same fake cloud file and
finishes the workload. After garbage collection has had its grace period, the campaign checks:

- leaked: instances in the fake cloud with no NodeClaim;
- double launches: launches beyond one per claim name (the fake cloud counts them in its file);
- stranded: pods still pending that the pool (under its limit) could take;
- limit breaches: polls at which the pool's claims held more GPUs than its limit.

A crash point the workload never reached in a run (say the 3rd eviction when there was one) counts as a
run without a crash. A check that fails prints the run's seed and point, and its controller logs go to
`--logs DIR`.

    python bench/chaos.py            # every point x 10 seeds (--jobs 4: four runs at once)
    python bench/chaos.py --quick    # one seed, each point once (what .ci/run runs)

Prints one JSON line: {"crash_points", "seeds", "runs", "crashes", "leaked_instances",
"double_launches", "stranded_pods", "limit_breaches", "failures", "seconds"}.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provisioner.api import labels as wk  # noqa: E402
from provisioner.clock import RealClock  # noqa: E402
from provisioner.crashpoints import POINTS  # noqa: E402
from provisioner.kube import client as kc  # noqa: E402
from tests.controllers.kube_server import KubeServer  # noqa: E402
from tests.controllers.world import KubeBackend, TestBinder, gpu_pod, node_class, node_pool  # noqa: E402

# How many times each point is worth crashing at: the first pass and a later one (a second claim, a
# second eviction) hit different moments of the workload.
COUNTS = {
    "claim-written": (1, 2, 3),
    "launch-called": (1, 2, 3),
    "status-written": (1, 3, 6),
    "node-registered": (1, 2),
    "node-patched": (1, 3),
    "drain-started": (1,),
    "instance-deleted": (1, 2),
    "claim-deleted": (1,),
    "finalizer-removed": (1, 2),
    "node-deleted": (1,),
}
assert set(COUNTS) == set(POINTS), "every crash point is in the campaign"
POOL = "gpu"
SETTLE = 90.0
"""Seconds a phase may take before the run is counted as failed."""


@dataclass
class RunResult:
    seed: int
    point: str
    crashed: bool = False
    leaked: int = 0
    double_launches: int = 0
    stranded: int = 0
    limit_breaches: int = 0
    problems: list[str] = field(default_factory=list)


class Controller:
    """One `provisioner run --cloud fake` process at a time, over the same API and fake cloud file."""

    def __init__(self, url: str, fake_state: str, logs: Path) -> None:
        self.url = url
        self.fake_state = fake_state
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, crash_at: str | None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("PROVISIONER_CRASH_AT", None)
        if crash_at:
            env["PROVISIONER_CRASH_AT"] = crash_at
        self.starts += 1
        log = open(self.logs.with_suffix(f".{self.starts}.log"), "wb")  # noqa: SIM115 - closed by the child
        cmd = [
            sys.executable,
            "-m",
            "provisioner.cli",
            "run",
            "--cloud",
            "fake",
            "--fake-state",
            self.fake_state,
            "--url",
            self.url,
            "--cluster-name",
            "chaos",
            "--batch-idle",
            "0.2",
            "--batch-max",
            "1",
            "--interval",
            "0.1",
            "--gc-grace",
            "2",
            "--gc-interval",
            "1",
            "--metrics-port",
            "0",
            # A killed leader's lease would hold its successor off for the lease duration; one process at a
            # time needs no election.
            "--no-leader-elect",
            "--disruption-validation-delay",
            "0.5",
        ]
        self.proc = subprocess.Popen(cmd, stderr=log, stdout=log, env=env)
        log.close()

    def died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _fake_cloud(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"instances": [], "launchesByClaim": {}}


def _pool_gpus(backend: KubeBackend) -> int:
    return sum(
        int(c.status.capacity.get(wk.GPU_RESOURCE, 0) if c.status.capacity else 0)
        for c in list(backend.state.claims.values())
        if c.nodepool == POOL
    )


def run_one(seed: int, spec: str, *, logs: Path) -> RunResult:
    rng = random.Random(f"{seed}:{spec}")
    result = RunResult(seed=seed, point=spec)
    server = KubeServer().start()
    client = kc.KubeClient.connect(url=server.url)
    backend = KubeBackend(client, RealClock())  # type: ignore[arg-type]
    binder = TestBinder(backend)
    tmp = tempfile.mkdtemp(prefix="chaos-")
    ctl = Controller(server.url, os.path.join(tmp, "fake-cloud.json"), logs / f"seed{seed}-{spec}")
    pods = [gpu_pod(f"job-{i}", gpus=rng.choice((1, 1, 2))) for i in range(rng.randint(3, 5))]
    # Room for every pod even on nodes bigger than needed (a 2-GPU pod takes a 4-GPU g5.12xlarge): a pod
    # held back by the limit is no stranded pod. The limit is still checked at every poll.
    limit = 4 * sum(int(p["spec"]["containers"][0]["resources"]["limits"][wk.GPU_RESOURCE]) for p in pods)
    pool = node_pool(POOL, limits={wk.GPU_RESOURCE: str(limit)})
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    try:
        for obj in (node_class(), pool, *pods):
            backend.create(obj)
        ctl.start(spec)

        def wait(what: str, done: Any) -> bool:
            """Poll until done(), restarting the controller (no crash point) once it has died."""
            deadline = time.monotonic() + SETTLE
            while time.monotonic() < deadline:
                if ctl.died():
                    result.crashed = True
                    ctl.start(None)
                binder.sync()
                if _pool_gpus(backend) > limit:
                    result.limit_breaches += 1
                if done():
                    return True
                time.sleep(0.1)
            pending = sorted(p.name for p in backend.state.pods.values() if not p.node_name)
            nodes = sorted(
                f"{n.name}({n.labels.get(wk.INSTANCE_TYPE)},ready={n.ready},taints={[t.key for t in n.taints]})"
                for n in backend.state.nodes.values()
            )
            result.problems.append(f"timed out waiting for {what} (pending pods: {pending}; nodes: {nodes})")
            return False

        def settled() -> bool:
            nodes = list(backend.state.nodes.values())
            return all(p.node_name for p in backend.state.pods.values()) and all(
                n.labels.get(wk.INITIALIZED) == "true" for n in nodes
            )

        wait("pods bound on initialized nodes", settled)
        # A user deletes one node's claim (drain, terminate, finalizer) and, when there is another node,
        # its jobs end (it empties out: consolidation deletes its claim).
        by_node: dict[str, list[Any]] = {}
        for p in list(backend.state.pods.values()):
            if p.node_name:
                by_node.setdefault(p.node_name, []).append(p)
        nodes = sorted(by_node)
        rng.shuffle(nodes)
        gone: set[str] = set()
        for i, name in enumerate(nodes[:2]):
            claim = next((c for c in backend.state.claims.values() if c.status.node_name == name), None)
            if claim is None:
                continue
            gone.add(claim.name)
            if i == 0:
                backend.delete("NodeClaim", claim.name)
            else:
                for p in by_node[name]:
                    backend.delete("Pod", p.name, namespace=p.namespace)
        wait(
            "the deleted and the emptied claims gone",
            lambda: _quiet(backend) and settled() and not gone & set(backend.state.claims),
        )
        # Garbage collection's grace period and one more pass, then the books are checked.
        wait("garbage collection", lambda: _books_balance(backend, ctl.fake_state))
        cloud = _fake_cloud(ctl.fake_state)
        claims = {c.name for c in backend.state.claims.values()}
        result.leaked = sum(1 for i in cloud["instances"] if i["nodeclaim"] not in claims)
        result.double_launches = sum(max(0, n - 1) for n in cloud["launchesByClaim"].values())
        result.stranded = sum(
            1 for p in backend.state.pods.values() if not p.node_name and not p.deleting and not p.is_terminal
        )
        if _pool_gpus(backend) > limit:
            result.limit_breaches += 1
    finally:
        ctl.stop()
        backend.close()
        client.close()
        server.stop()
    return result


def _quiet(backend: KubeBackend) -> bool:
    """No claim is being deleted and every claim has its node."""
    claims = list(backend.state.claims.values())
    return all(c.metadata.deletion_timestamp is None and c.status.node_name for c in claims)


def _books_balance(backend: KubeBackend, fake_state: str) -> bool:
    claims = {c.name for c in backend.state.claims.values()}
    instances = {i["nodeclaim"] for i in _fake_cloud(fake_state)["instances"]}
    return instances == claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one seed, each point once")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--logs", default=None, help="directory for the controllers' logs")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each its own API and process)")
    args = parser.parse_args()
    specs = [f"{p}:1" for p in POINTS] if args.quick else [f"{p}:{n}" for p, ns in COUNTS.items() for n in ns]
    seeds = 1 if args.quick else args.seeds
    logs = Path(args.logs or tempfile.mkdtemp(prefix="chaos-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[RunResult] = []
    runs = [(seed, spec) for seed in range(seeds) for spec in specs]
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        futures = [pool.submit(run_one, seed, spec, logs=logs) for seed, spec in runs]
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            results.append(r)
            bad = r.leaked or r.double_launches or r.stranded or r.limit_breaches or r.problems
            verdict = f"FAILED: {r}" if bad else ("crashed, recovered" if r.crashed else "not reached")
            print(f"seed={r.seed} point={r.point}: {verdict}", file=sys.stderr, flush=True)
    figures = {
        "crash_points": len(specs),
        "seeds": seeds,
        "runs": len(results),
        "crashes": sum(r.crashed for r in results),
        "leaked_instances": sum(r.leaked for r in results),
        "double_launches": sum(r.double_launches for r in results),
        "stranded_pods": sum(r.stranded for r in results),
        "limit_breaches": sum(r.limit_breaches for r in results),
        "failures": sum(bool(r.problems) for r in results),
        "seconds": round(time.monotonic() - started, 1),
        "logs": str(logs),
    }
    print(json.dumps(figures))
    if any(figures[k] for k in ("leaked_instances", "double_launches", "stranded_pods", "limit_breaches")):
        sys.exit(1)
    if figures["failures"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
