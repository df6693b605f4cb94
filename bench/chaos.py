"""The reliability campaign (issue 15): kill `provisioner run` at every crash point, restart it, and count
what a crash can cost: leaked instances, double launches, stranded pods, pool limits and team quotas
exceeded, ledger rows lost or written twice. Then the fault tests and the hostile-input fuzzing, counted.

Each run: a fresh Kubernetes API (the kmock-based fixture of tests/controllers, over HTTP), a NodeClass, a
GPU NodePool with a GPU limit, a Team with a GPU quota on it (its pods gated by admission), and a seeded
workload of 1- and 2-GPU pods. `provisioner run` runs as a real process on one of two clouds
(bench/chaos_clouds.py: the fake cloud with `--fake-state FILE`, or the AWS provider through boto3 to
moto's server behind the tests' fault-and-price proxy), with a SQLite ledger, and with
`PROVISIONER_CRASH_AT=POINT:N` (provisioner.crashpoints): it SIGKILLs itself the N-th time it passes
POINT. The workload goes on while it runs: scale-up, then some pods end (their node empties:
consolidation, a ledger row) and a user deletes one claim (drain, terminate, finalizer). When the process
died, a new one (no crash point) starts on the same API, cloud and ledger and finishes the workload. After
garbage collection has had its grace period, the campaign checks:

- leaked: live instances of ours with no NodeClaim;
- double launches: launches beyond one per claim name (the fake cloud counts them; on AWS, instances
  tagged with the claim, terminated ones included);
- stranded: pods still pending that the pool (under its limit) and their team's quota could take;
- limit breaches: polls at which the pool's claims held more GPUs than its limit;
- quota breaches: polls at which the team's admitted pods asked more GPUs of the pool than its quota
  (the team may not borrow: `overQuota: false`);
- ledger: a node removed by disruption with no action row (lost), or with more than one (duplicate).

A crash point the workload never reached in a run (say the 3rd eviction when there was one) counts as a
run without a crash. A check that fails prints the run's cloud, seed and point; the controllers' logs are
in `--logs DIR`.

Beside the runs, unless `--no-suites` (bench/chaos_suites.py): the fault tests (API conflicts, 410 Gone, dropped watches, 429/5xx; cloud
capacity, throttling, 5xx, timeouts, slow answers, GCP stockouts and quota; the ledger's database going
away; crashes around the ledger write) run under pytest and count as `faults_survived` (each must pass),
and the hostile-input fuzzing (hypothesis, fixed seed) counts its examples as `inputs_tried`.

    python bench/chaos.py            # both clouds, every point x 10 seeds (--jobs 2: two runs at once)
    python bench/chaos.py --quick    # 8 points once on the fake cloud, 2 on AWS (what .ci/run runs)
    python bench/chaos.py --sharded  # sharded replicas killed and moved instead (bench/chaos_shards.py)
    python bench/chaos.py --sharded --quick --no-suites --kubeconfig ~/.kube/config  # on a real cluster

With `--kubeconfig` the sharded runs go one at a time to that cluster instead of a strict server each,
with the chart's CRDs installed (as for the controller tests: README "Running the controller tests
against a real cluster"); each keeps to a namespace and names of its own and deletes what it made.

A failing run prints its seed and the command that replays it.

Prints one JSON line: {"clouds", "crash_points", "seeds", "runs", "crashes", "leaked_instances",
"double_launches", "stranded_pods", "limit_breaches", "quota_breaches", "ledger_lost_rows",
"ledger_duplicate_rows", "failures", "faults_survived", "inputs_tried", "by_cloud", "seconds", "logs"}, and
with `--sharded` also "replicas_killed", "nominated_twice", "shards_unsettled" and "shard_settle_seconds".
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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import chaos_clouds, chaos_shards  # noqa: E402
from bench.chaos_suites import run_suites  # noqa: E402
from provisioner.api import labels as wk  # noqa: E402
from provisioner.clock import RealClock  # noqa: E402
from provisioner.crashpoints import POINTS  # noqa: E402
from provisioner.finops.ledger import Ledger  # noqa: E402
from provisioner.kube import client as kc  # noqa: E402
from testkit.controllers.backends import KubeBackend  # noqa: E402
from testkit.controllers.kube_server import KubeServer  # noqa: E402
from testkit.controllers.standins import TestBinder, cluster_controllers  # noqa: E402
from testkit.controllers.world import gpu_pod, node_pool  # noqa: E402

# How many times each point is worth crashing at: the first pass and a later one (a second claim, a
# second eviction) hit different moments of the workload.
COUNTS = {
    "claim-written": (1, 2, 3),
    "launch-called": (1, 2, 3),
    "status-written": (1, 3, 6),
    "node-registering": (1, 2),
    "node-registered": (1, 2),
    "node-patched": (1, 3),
    "drain-started": (1,),
    "instance-deleted": (1, 2),
    "claim-deleted": (1,),
    "finalizer-removed": (1, 2),
    "node-deleted": (1,),
    "ledger-pending": (1,),
    "ledger-written": (1,),
}
assert set(COUNTS) == set(POINTS), "every crash point is in the campaign"
REACHES = {"node-registering": {"fake"}, "node-registered": {"fake"}}
"""Points only some clouds pass: on AWS the kubelet (the campaign) registers Nodes, not the controller."""
QUICK = {
    "fake": [
        f"{p}:1"
        for p in (
            "claim-written",
            "launch-called",
            "status-written",
            "node-registered",
            "drain-started",
            "instance-deleted",
            "finalizer-removed",
            "ledger-pending",
        )
    ],
    "aws": ["launch-called:1", "ledger-pending:1"],
}
"""The short campaign (.ci/run): the points where a crash costs most, once each; two of them on AWS."""
SHARDED = "replicas-"
"""A sharded run's spec: `replicas-2` or `replicas-3` (bench/chaos_shards.py), on the fake cloud."""
SHARDED_QUICK = ["replicas-3"]
"""The short sharded campaign (.ci/run): one run of three replicas."""
POOL = "gpu"
TEAM = "vision"
SETTLE = 90.0
"""Seconds a phase may take before the run is counted as failed."""
RUN_FLAGS = ["--batch-idle", "0.2", "--batch-max", "1", "--interval", "0.1", "--metrics-port", "0"]
RUN_FLAGS += ["--gc-grace", "2", "--gc-interval", "1", "--disruption-validation-delay", "0.5"]
"""`provisioner run`'s pace in every run (the sharded ones too): short batches, passes and GC grace."""


@dataclass
class RunResult:
    cloud: str
    seed: int
    point: str
    crashed: bool = False
    leaked: int = 0
    double_launches: int = 0
    stranded: int = 0
    limit_breaches: int = 0
    quota_breaches: int = 0
    ledger_lost: int = 0
    ledger_duplicates: int = 0
    kills: int = 0
    """Sharded runs: replicas SIGKILLed (by the campaign or at their crash point)."""
    nominated_twice: int = 0
    """Sharded runs: pods whose `Nominated` Events name two NodeClaims."""
    shards_unsettled: int = 0
    """Sharded runs: 1 when the settled replicas' shard Leases never matched the assignment."""
    shard_settle_seconds: float = 0.0
    """Sharded runs: the longest wait from a change of members to the shards held as assigned."""
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    """What a check found, in words (sharded runs: the pods nominated twice, the first limit breach)."""

    @property
    def bad(self) -> bool:
        return bool(
            self.leaked
            or self.double_launches
            or self.stranded
            or self.limit_breaches
            or self.quota_breaches
            or self.ledger_lost
            or self.ledger_duplicates
            or self.nominated_twice
            or self.shards_unsettled
            or self.problems
        )

    def replay(self) -> str:
        """The command that runs this run again."""
        mode = "--sharded " if self.point.startswith(SHARDED) else f"--clouds {self.cloud} "
        return f"python bench/chaos.py {mode}--first-seed {self.seed} --seeds 1 --points {self.point} --no-suites"


class Controller:
    """One `provisioner run` process at a time, over the same API, cloud and ledger."""

    def __init__(self, url: str, cloud: chaos_clouds.Cloud, ledger: str, logs: Path) -> None:
        self.url = url
        self.cloud = cloud
        self.ledger = ledger
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, crash_at: str | None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.cloud.env()}
        env.pop("PROVISIONER_CRASH_AT", None)
        if crash_at:
            env["PROVISIONER_CRASH_AT"] = crash_at
        self.starts += 1
        log = open(self.logs.with_suffix(f".{self.starts}.log"), "wb")  # noqa: SIM115 - closed by the child
        cmd = [sys.executable, "-m", "provisioner.cli", "run", *self.cloud.flags(), "--url", self.url]
        cmd += ["--cluster-name", self.cloud.cluster, "--ledger", self.ledger, *RUN_FLAGS]
        # A killed leader's lease would hold its successor off for the lease duration; one process at a
        # time needs no election.
        cmd += ["--no-leader-elect"]
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


def _gpus(requests: Any) -> int:
    return int(requests.get(wk.GPU_RESOURCE, 0) if requests else 0)


def _pool_gpus(backend: KubeBackend) -> int:
    return sum(_gpus(c.status.capacity) for c in list(backend.state.claims.values()) if c.nodepool == POOL)


def _team_admitted(backend: KubeBackend) -> int:
    """GPUs the team's admitted (ungated) pods ask of the pool."""
    return sum(
        _gpus(p.requests)
        for p in list(backend.state.pods.values())
        if p.namespace == TEAM and not p.gated and not p.is_terminal
    )


def _stranded(backend: KubeBackend, quota: int) -> list[str]:
    """Pending pods a node could take: every unbound pod but the team's gated ones its quota holds back."""
    admitted = _team_admitted(backend)
    out = []
    for p in list(backend.state.pods.values()):
        if p.node_name or p.deleting or p.is_terminal:
            continue
        if p.gated and p.namespace == TEAM and admitted + _gpus(p.requests) > quota:
            continue
        out.append(p.key)
    return sorted(out)


def _team(quota: int) -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Team",
        "metadata": {"name": TEAM},
        "spec": {
            "namespaces": [TEAM],
            "quotas": [{"nodePool": POOL, "resources": {wk.GPU_RESOURCE: str(quota)}, "overQuota": False}],
        },
    }


def _team_pod(name: str) -> dict[str, Any]:
    """As the admission webhook lets a team's pod in: behind the admission gate."""
    doc = gpu_pod(name, gpus=1, namespace=TEAM, owner="Job")
    doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    return doc


def run_safely(
    cloud_name: str, seed: int, spec: str, *, logs: Path, kubeconfig: str | None = None
) -> RunResult:
    """One run; a harness error (a stand-in that would not start) fails that run, not the campaign.
    `kubeconfig`: a sharded run's cluster (else a strict server of its own)."""
    try:
        if spec.startswith(SHARDED):
            result = RunResult(cloud=cloud_name, seed=seed, point=spec)
            replicas = int(spec.removeprefix(SHARDED))
            chaos_shards.run_sharded(result, replicas=replicas, logs=logs, kubeconfig=kubeconfig)
            return result
        return run_one(cloud_name, seed, spec, logs=logs)
    except Exception as err:
        return RunResult(cloud=cloud_name, seed=seed, point=spec, problems=[f"harness error: {err!r}"])


def run_one(cloud_name: str, seed: int, spec: str, *, logs: Path) -> RunResult:
    rng = random.Random(f"{cloud_name}:{seed}:{spec}")
    result = RunResult(cloud=cloud_name, seed=seed, point=spec)
    server = KubeServer().start()
    client = kc.KubeClient.connect(url=server.url)
    backend = KubeBackend(client, RealClock())  # type: ignore[arg-type]
    binder = TestBinder(backend)
    tmp = tempfile.mkdtemp(prefix="chaos-")
    cloud = chaos_clouds.make(cloud_name, backend=backend, tmp=tmp)
    ledger_url = f"sqlite:///{tmp}/ledger.sqlite"
    ctl = Controller(server.url, cloud, ledger_url, logs / f"{cloud_name}-seed{seed}-{spec}")
    pods = [gpu_pod(f"job-{i}", gpus=rng.choice((1, 1, 2))) for i in range(rng.randint(2, 4))]
    pods += [_team_pod(f"{TEAM}-{i}") for i in range(rng.randint(2, 3))]
    quota = rng.choice((1, 2))
    # Room for every pod even on nodes bigger than needed (a 2-GPU pod takes a 4-GPU g5.12xlarge): a pod
    # held back by the limit is no stranded pod. The limit is still checked at every poll.
    limit = 4 * sum(_gpus(p["spec"]["containers"][0]["resources"]["limits"]) for p in pods)
    pool = node_pool(POOL, limits={wk.GPU_RESOURCE: str(limit)}, zones=cloud.zones())
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    carried: dict[str, str] = {}
    """Claim -> node, for every claim seen carrying its ledger rows (disruption deleted it)."""
    try:
        for obj in (cloud.node_class(), pool, _team(quota), *pods):
            backend.create(obj)
        ctl.start(spec)

        def poll() -> None:
            cloud.sync()
            cluster_controllers(backend)  # the not-ready taint off Ready Nodes, Terminating pods finished
            binder.sync()
            if _pool_gpus(backend) > limit:
                result.limit_breaches += 1
            if _team_admitted(backend) > quota:
                result.quota_breaches += 1
            for c in list(backend.state.claims.values()):
                if wk.LEDGER_ACTIONS in c.metadata.annotations and c.status.node_name:
                    carried[c.name] = c.status.node_name

        def wait(what: str, done: Any) -> bool:
            """Poll until done(), restarting the controller (no crash point) once it has died."""
            deadline = time.monotonic() + SETTLE
            while time.monotonic() < deadline:
                if ctl.died():
                    result.crashed = True
                    ctl.start(None)
                poll()
                if done():
                    return True
                time.sleep(0.1)
            result.problems.append(
                f"timed out waiting for {what} (stranded: {_stranded(backend, quota)}; {describe(backend)}; "
                f"team quota {quota})"
            )
            return False

        def settled() -> bool:
            nodes = list(backend.state.nodes.values())
            return not _stranded(backend, quota) and all(
                n.labels.get(wk.INITIALIZED) == "true" for n in nodes
            )

        wait("pods bound on initialized nodes", settled)
        gone, emptied = user_deletes(backend, rng)

        def done() -> bool:
            return quiet(backend) and settled() and deletions_done(backend, gone, emptied)

        wait("the deleted and the emptied claims gone", done)
        # Garbage collection's grace period and one more pass, then the books are checked.
        wait("garbage collection", lambda: sorted(cloud.live()) == sorted(backend.state.claims))
        claims = set(backend.state.claims)
        result.leaked = sum(1 for name in cloud.live() if name not in claims)
        result.double_launches = sum(max(0, n - 1) for n in cloud.launches().values())
        result.stranded = len(_stranded(backend, quota))
        poll()
        ctl.stop()
        result.ledger_lost, result.ledger_duplicates = ledger_books(ledger_url, carried, emptied, claims)
    finally:
        ctl.stop()
        cloud.close()
        backend.close()
        client.close()
        server.stop()
    return result


def quiet(backend: KubeBackend) -> bool:
    """No claim is being deleted and every claim has its node."""
    claims = list(backend.state.claims.values())
    return all(c.metadata.deletion_timestamp is None and c.status.node_name for c in claims)


def describe(backend: KubeBackend) -> str:
    """The pods, nodes and claims, for a run that timed out."""
    nodes = sorted(
        f"{n.name}({n.labels.get(wk.INSTANCE_TYPE)},ready={n.ready},taints={[t.key for t in n.taints]})"
        for n in list(backend.state.nodes.values())
    )
    pods = sorted(
        f"{p.key}({'gated' if p.gated else p.node_name or 'pending'})"
        for p in list(backend.state.pods.values())
    )
    claims = sorted(
        f"{c.name}(node={c.status.node_name},deleting={c.metadata.deletion_timestamp is not None})"
        for c in list(backend.state.claims.values())
    )
    return f"pods: {pods}; nodes: {nodes}; claims: {claims}"


def user_deletes(backend: KubeBackend, rng: random.Random) -> tuple[set[str], dict[str, str]]:
    """A user deletes one node's claim (drain, terminate, finalizer) and, when there is another node, its
    jobs end (it empties out: consolidation deletes its claim and writes a ledger row). The claims gone
    and, of them, the emptied ones (claim -> node)."""
    by_node: dict[str, list[Any]] = {}
    for p in list(backend.state.pods.values()):
        if p.node_name:
            by_node.setdefault(p.node_name, []).append(p)
    nodes = sorted(by_node)
    rng.shuffle(nodes)
    gone: set[str] = set()
    emptied: dict[str, str] = {}
    # With one node, half the seeds empty it rather than delete its claim: the ledger's points are
    # passed only when disruption removes a node.
    first = 0 if len(nodes) > 1 or rng.random() < 0.5 else 1
    for i, name in enumerate(nodes[:2], start=first):
        claim = next((c for c in backend.state.claims.values() if c.status.node_name == name), None)
        if claim is None:
            continue
        gone.add(claim.name)
        if i == 0:
            backend.delete("NodeClaim", claim.name)
        else:
            emptied[claim.name] = name
            for p in by_node[name]:
                backend.delete("Pod", p.name, namespace=p.namespace)
    return gone, emptied


def deletions_done(backend: KubeBackend, gone: set[str], emptied: dict[str, str]) -> bool:
    """The deleted claim gone; the emptied one gone too, unless a pod landed on it since (a team pod
    admitted once the quota freed up)."""
    held = {p.node_name for p in list(backend.state.pods.values()) if p.node_name}
    claims = set(backend.state.claims)
    return not (gone - set(emptied)) & claims and all(
        name not in claims or node in held for name, node in emptied.items()
    )


def ledger_books(
    url: str, carried: dict[str, str], emptied: dict[str, str], claims: set[str]
) -> tuple[int, int]:
    """(nodes removed by disruption with no action row, rows written twice): `carried` and `emptied` map
    claims to their nodes, `claims` are the claims still there."""
    with Ledger(url) as ledger:
        rows = Counter(r.node for r in ledger.actions())
    removed = {node for claim, node in {**carried, **emptied}.items() if claim not in claims}
    return len(removed - set(rows)), sum(n - 1 for n in rows.values() if n > 1)


def campaign_runs(
    clouds: list[str], *, quick: bool, seeds: int, first_seed: int = 0, sharded: bool = False
) -> list[tuple[str, int, str]]:
    count = 1 if quick else seeds
    if sharded:
        specs = SHARDED_QUICK if quick else [f"{SHARDED}{n}" for n in (2, 3)]
        return [("fake", seed, spec) for seed in range(first_seed, first_seed + count) for spec in specs]
    runs = []
    for cloud in clouds:
        if quick:
            specs = QUICK[cloud]
        else:
            specs = [f"{p}:{n}" for p, ns in COUNTS.items() if cloud in REACHES.get(p, {cloud}) for n in ns]
        runs += [(cloud, seed, spec) for seed in range(first_seed, first_seed + count) for spec in specs]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 points once on the fake cloud, 2 on AWS")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds FIRST..FIRST+SEEDS-1")
    parser.add_argument("--clouds", default=",".join(chaos_clouds.CLOUDS), help="fake, aws or fake,aws")
    parser.add_argument("--points", default="", help="only these specs (POINT:N, comma-separated)")
    parser.add_argument("--no-suites", action="store_true", help="skip the fault tests and the fuzzing")
    parser.add_argument("--logs", default=None, help="directory for the controllers' logs")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each its own API and process)")
    parser.add_argument(
        "--sharded",
        action="store_true",
        help="sharded replicas instead of crash points: 2 and 3 replicas per seed (--quick: one run of 3)",
    )
    parser.add_argument(
        "--kubeconfig", default=None, help="with --sharded: run against this cluster, one run at a time"
    )
    args = parser.parse_args()
    if args.kubeconfig and not args.sharded:
        parser.error("--kubeconfig: only the sharded runs take a cluster; add --sharded")
    if args.kubeconfig and args.jobs > 1:
        parser.error(
            "--kubeconfig: runs on one cluster go one at a time (each deletes what appeared meanwhile)"
        )
    clouds = [c.strip() for c in args.clouds.split(",") if c.strip()]
    for c in clouds:
        if c not in chaos_clouds.CLOUDS:
            parser.error(f"--clouds: {c!r} is not known; allowed: {', '.join(chaos_clouds.CLOUDS)}")
    if args.sharded:
        clouds = ["fake"]
    runs = campaign_runs(
        clouds, quick=args.quick, seeds=args.seeds, first_seed=args.first_seed, sharded=args.sharded
    )
    if args.points:
        wanted = set(args.points.split(","))
        runs = [r for r in runs if r[2] in wanted]
    logs = Path(args.logs or tempfile.mkdtemp(prefix="chaos-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[RunResult] = []
    # The suites wait on servers and sleeps more than they compute: they run beside the crash runs.
    suites = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    suites_done = None if args.no_suites else suites.submit(run_suites, logs, quick=args.quick)
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        futures = [
            pool.submit(run_safely, cloud, seed, spec, logs=logs, kubeconfig=args.kubeconfig)
            for cloud, seed, spec in runs
        ]
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            results.append(r)
            verdict = f"FAILED: {r}; replay: {r.replay()}" if r.bad else "not reached"
            if not r.bad and r.crashed:
                verdict = f"{r.kills} kills, recovered" if r.kills else "crashed, recovered"
            print(f"cloud={r.cloud} seed={r.seed} point={r.point}: {verdict}", file=sys.stderr, flush=True)
    with open(logs / "runs.jsonl", "w") as f:
        for r in results:
            f.write(json.dumps(asdict(r)) + "\n")
    faults, tried, suite_problems = (0, 0, []) if suites_done is None else suites_done.result()
    suites.shutdown()
    for problem in suite_problems:
        print(problem, file=sys.stderr)
    keys = ("leaked", "double_launches", "stranded", "limit_breaches", "quota_breaches")
    figures: dict[str, Any] = {
        "clouds": clouds,
        "crash_points": len({spec for _, _, spec in runs}),
        "seeds": 1 if args.quick else args.seeds,
        "runs": len(results),
        "crashes": sum(r.crashed for r in results),
        "leaked_instances": sum(r.leaked for r in results),
        "double_launches": sum(r.double_launches for r in results),
        "stranded_pods": sum(r.stranded for r in results),
        "limit_breaches": sum(r.limit_breaches for r in results),
        "quota_breaches": sum(r.quota_breaches for r in results),
        "ledger_lost_rows": sum(r.ledger_lost for r in results),
        "ledger_duplicate_rows": sum(r.ledger_duplicates for r in results),
        "failures": sum(bool(r.problems) for r in results) + len(suite_problems),
        "faults_survived": faults,
        "inputs_tried": tried,
        "by_cloud": {
            c: {
                "runs": sum(r.cloud == c for r in results),
                "crashes": sum(r.crashed for r in results if r.cloud == c),
                "bad_runs": sum(r.bad for r in results if r.cloud == c),
                **{k: sum(getattr(r, k) for r in results if r.cloud == c) for k in keys},
            }
            for c in clouds
        },
        "seconds": round(time.monotonic() - started, 1),
        "logs": str(logs),
    }
    if args.sharded:
        figures.update(
            replicas_killed=sum(r.kills for r in results),
            nominated_twice=sum(r.nominated_twice for r in results),
            shards_unsettled=sum(r.shards_unsettled for r in results),
            shard_settle_seconds=max((r.shard_settle_seconds for r in results), default=0.0),
        )
    print(json.dumps(figures))
    if any(r.bad for r in results) or suite_problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
