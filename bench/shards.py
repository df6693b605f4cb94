"""Sharded replicas: 1, 2 and 4 `provisioner run --cloud fake --shards S` processes sharing 40 NodePools
against the Kubernetes API fixture over HTTP (../shared/BENCHMARKS.md section 6).

The API server is the controller tests' fixture (testkit/controllers/kube_server.py), in this process, as
in bench/controller.py; the replicas are child processes sharing one fake cloud (`--fake-state`). One
AWSNodeClass and `--pools` CPU pools alike (c6i/m6i 4xlarge, spot and on-demand); `--pods` pods (1500m
CPU, 2Gi), each naming one pool (round robin), are created at once, already Unschedulable, once every
shard is held and the replicas' informers have listed. Each pod carries its shard label
(`provisioner.sh/shard`) as the mutating webhook sets it at creation; with `--unlabelled` they come
without it, as with the webhook off, and the replica holding quota admission labels them.

Measured:
- each replica's CPU seconds (user + system, /proc) from the first pod to the last NodeClaim, and their
  spread: on a 2-core machine replicas share the cores, so CPU per replica, not wall time, is the
  figure that says what a replica costs and what adding one saves;
- time from the batch window's close (the last pod's arrival plus `--batch-idle`) to the last NodeClaim;
- pods nominated to two NodeClaims (a double launch): must be 0; and the claims written (the same
  for every replica count, give or take a claim where a batch closed between two pods of a pool).

    python bench/shards.py [--replicas 1,2,4] [--pods 100000] [--pools 40] [--shards 8] [--unlabelled]
        [--profile DIR]

`--profile DIR` runs each replica under cProfile (every thread, as bench/controller.py's `--profile`) and
writes its stats to DIR/replicas-<count>-<index>.prof as it exits. Its timer is each thread's CPU clock
(`time.thread_time`), but cProfile's own cost (several times the replica's, under that timer) weighs on
call-heavy code, and calls that block on a socket still showed large times here: read it for where the
product's own functions spend, and measure CPU seconds without it. py-spy `--gil` on the replica
processes is the lighter view, but it samples the wall clock: on a loaded machine a thread descheduled
while it holds the interpreter lock is still counted, so pure-Python loops (the passes) weigh far more
there than in CPU time, and the API calls, which let the lock go, far less. Check a share it shows
against CPU time (`time.thread_time` around the code in one process, or the replica's CPU with that
work taken out).

Each replica's watch takes only its shards' pods; the quota admission holder's (`admissionHolder`: its
index in `cpuSecondsPerReplica`) also takes the pods labelled for no shard and those of the namespaces
quota counts in (none here).

Prints one JSON line per replica count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import controller as single  # noqa: E402  # the timed API server, /proc figures
from provisioner.api import labels as wk  # noqa: E402
from provisioner.kube import client as kc  # noqa: E402
from provisioner.scheduling.shards import SHARD, shard_of  # noqa: E402
from testkit.controllers import kube_server  # noqa: E402

NOMINATED_TO: dict[str, set[str]] = {}
"""Pod name -> every NodeClaim a `Nominated` Event named for it."""


class Emulator(single.TimedEmulator):
    async def _handle(self, request: Any) -> Any:
        response = await super()._handle(request)
        data = request.data if isinstance(request.data, dict) else {}
        if data.get("reason") == "Nominated" and response.status == 201:
            found = single.NOMINATED.search(data.get("message", ""))
            if found:
                pod = (data.get("involvedObject") or {}).get("name", "")
                NOMINATED_TO.setdefault(pod, set()).add(found.group(1))
        return response


PROFILED = single.PROFILED.replace("import cProfile", "import time, cProfile").replace(
    "cProfile.Profile()", "cProfile.Profile(time.thread_time)"
)
"""bench/controller.py's cProfile wrapper, timed by each thread's CPU clock instead of the wall clock."""


def _objects(
    pods: int, pools: int, shards: int, *, labelled: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    setup, template = single._objects(1)
    node_class, pool = setup
    names = [f"pool-{i:02d}" for i in range(pools)]
    docs = [node_class]
    for name in names:
        docs.append({**pool, "metadata": {"name": name}})
    pod = template[0]
    out = []
    for i in range(pods):
        meta = {
            **pod["metadata"],
            "name": f"web-{i:06d}",
            "annotations": {wk.NODEPOOLS: names[i % pools]},
        }
        if labelled:  # what the webhook sets: the shard of the pod's first (here its only) pool
            meta["labels"] = {**meta.get("labels", {}), SHARD: str(shard_of(names[i % pools], shards))}
        out.append({**pod, "metadata": meta})
    return docs, out


PODS_PER_NODE = 10
"""1500m and 2Gi pods on 16-vCPU c6i/m6i 4xlarge nodes."""


def _done(pods: int, pools: int) -> bool:
    """Every pod nominated to a claim; or (pods placed on a claim already in flight get no `Nominated`
    Event) claims for every pod written, and none more for 5 s."""
    if len(NOMINATED_TO) >= pods:
        return True
    claims = single.ARRIVALS["nodeclaims"]
    needed = pools * -(-(pods // pools) // PODS_PER_NODE)
    return len(claims) >= needed and time.monotonic() - max(t for t, _ in claims) > 5


def _held(client: kc.KubeClient, shards: int) -> set[str]:
    """The replicas holding shards, once every shard is held (else empty)."""
    items = client.request("GET", kc.LEASE.path(namespace="default"))["items"]
    holders = {
        lease["metadata"]["name"]: (lease.get("spec") or {}).get("holderIdentity")
        for lease in items
        if lease["metadata"]["name"].startswith("provisioner-shard-")
    }
    if len(holders) < shards or not all(holders.values()):
        return set()
    return {h for h in holders.values() if h}


def _admission_holder(client: kc.KubeClient) -> int | None:
    """The index of the replica holding quota admission (each replica's identity starts `replica-<i>-`)."""
    lease = client.get(kc.LEASE, "provisioner-admission", namespace="default")
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    return int(holder.split("-")[1]) if holder.startswith("replica-") else None


def run_once(
    replicas: int,
    *,
    pods: int,
    pools: int,
    shards: int,
    batch_idle: float,
    timeout: float,
    labelled: bool = True,
    profile: str | None = None,
) -> dict[str, Any]:
    for arrivals in single.ARRIVALS.values():
        arrivals.clear()
    single.NOMINATIONS.clear()
    NOMINATED_TO.clear()
    kube_server.FilledEmulator = Emulator  # type: ignore[misc]  # the fixture builds it by name
    server = kube_server.KubeServer().start()
    client = kc.KubeClient.connect(url=server.url)
    setup, pod_docs = _objects(pods, pools, shards, labelled=labelled)
    for doc in setup:
        client.create(single._resource(doc), doc)
    workdir = tempfile.TemporaryDirectory()
    cmd = ["run", "--cloud", "fake", "--url", server.url]
    cmd += ["--cluster-name", "bench", "--batch-idle", str(batch_idle), "--batch-max", "600"]
    cmd += ["--interval", "0.1", "--metrics-port", "0", "--log-format", "json", "--ledger", "none"]
    cmd += ["--shards", str(shards), "--fake-state", str(Path(workdir.name) / "cloud.json")]
    logs = os.environ.get("BENCH_SHARDS_LOGS")  # a folder: each replica's log there

    def program(i: int) -> list[str]:
        if profile is None:
            return [sys.executable, "-m", "provisioner.cli"]
        path = str(Path(profile).resolve() / f"replicas-{replicas}-{i}.prof")
        return [sys.executable, "-c", PROFILED.format(path=path)]

    procs = [
        subprocess.Popen(
            [*program(i), *cmd],
            stderr=open(f"{logs}/replica-{i}.log", "w") if logs else subprocess.DEVNULL,  # noqa: SIM115
            env={**os.environ, "PYTHONPATH": str(ROOT), "HOSTNAME": f"replica-{i}"},
        )
        for i in range(replicas)
    ]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_held(client, shards)) < replicas:
            time.sleep(0.2)
        if len(_held(client, shards)) < replicas:
            raise SystemExit(f"the {replicas} replicas did not share the {shards} shards within 120 s")
        time.sleep(1)  # their informers' first lists are done
        before = [single._proc_stats(p.pid)[0] for p in procs]
        single.create_and_mark_all(server.url, pod_docs)
        last_pod = max(t for t, _ in single.ARRIVALS["marks"])
        close = last_pod + batch_idle
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not _done(pods, pools):
            time.sleep(0.2)
        claims = dict((name, t) for t, name in single.ARRIVALS["nodeclaims"])
        stats = [single._proc_stats(p.pid) for p in procs]
        admission = _admission_holder(client)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        client.close()
        server.stop()
        workdir.cleanup()
    if not claims:
        raise SystemExit(f"no NodeClaim within {timeout} s")
    cpu = [after - start for (after, _), start in zip(stats, before, strict=True)]
    return {
        "claims": len(claims),
        "lastClaim": max(claims.values()) - close,
        "cpuSeconds": cpu,
        "peakRssMiB": [peak for _, peak in stats],
        "admissionHolder": admission,
        "doubleNominated": sum(1 for claims_of in NOMINATED_TO.values() if len(claims_of) > 1),
        "podsCreateSeconds": last_pod - min(t for t, _ in single.ARRIVALS["marks"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--pools", type=int, default=40)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch-idle", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for every claim")
    parser.add_argument(
        "--unlabelled", action="store_true", help="pods without their shard label (the webhook off)"
    )
    parser.add_argument("--profile", metavar="DIR", help="each replica's cProfile stats into this folder")
    args = parser.parse_args()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    for replicas in [int(s) for s in args.replicas.split(",") if s.strip()]:
        r = run_once(
            replicas,
            pods=args.pods,
            pools=args.pools,
            shards=args.shards,
            batch_idle=args.batch_idle,
            timeout=args.timeout,
            labelled=not args.unlabelled,
            profile=args.profile,
        )
        print(
            json.dumps(
                {
                    "benchmark": "shards",
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load1": round(os.getloadavg()[0], 2),
                    "replicas": replicas,
                    "shards": args.shards,
                    "pools": args.pools,
                    "pods": args.pods,
                    "labelled": not args.unlabelled,
                    "admissionHolder": r["admissionHolder"],
                    "claims": r["claims"],
                    "doubleNominated": r["doubleNominated"],
                    "cpuSecondsPerReplica": [round(c, 2) for c in r["cpuSeconds"]],
                    "cpuSecondsMax": round(max(r["cpuSeconds"]), 2),
                    "cpuSecondsTotal": round(sum(r["cpuSeconds"]), 2),
                    "lastClaim": round(r["lastClaim"], 3),
                    "peakRssMiB": [round(m, 1) for m in r["peakRssMiB"]],
                    "podsCreateSeconds": round(r["podsCreateSeconds"], 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
