"""Controller latency: `provisioner run --cloud fake` as a process against the Kubernetes API fixture over
HTTP (../shared/BENCHMARKS.md section 5).

The API server is the controller tests' fixture (testkit/controllers/kube_server.py: kmock, filled where the
controller relies on a real server), run in this process; the controller is a child process, as a user
starts it. One AWSNodeClass and one CPU pool (c6i/m6i 4xlarge, spot and on-demand). Then `--pods` pods
(1500m CPU, 2Gi each) are created at once from 4 client threads (of a child process: in this one they would
hold the interpreter the fixture needs), and each is marked Unschedulable
(PodScheduled=False, through its /status) as kube-scheduler marks a pod it cannot place: the API server
sets a new pod's status itself, as a real one does.

Measured, on the server's clock as requests arrive:
- the batch window's close: the last pod's mark plus the controller's idle window (`--batch-idle`;
  the max window is set long, so the idle window is the one that closes the batch; any delay in the
  controller's watch counts against it);
- for each pod, when the NodeClaim it was nominated to (its `Nominated` Event, read as it arrives) was
  written: p50 and p99 of that time after the close, and the first and last claim's; and the last
  Event's (Events go out after the claims, from a background writer);
- the controller's CPU seconds (user + system, from the batch's first pod to its last claim) and peak
  RSS (VmHWM), from /proc.

    python bench/controller.py [--sizes 1000,10000] [--runs 1] [--batch-idle 1] [--profile FILE]
    python bench/controller.py --fixture-only [--sizes 10000,100000] [--runs 3]

`--fixture-only` times the API fixture alone taking in the pods (creates and marks, with one watch of pods
reading every event): seconds from the first create to the last mark and to the watch's last event, and
the CPU seconds of the fixture's thread and of the clients' process.

`--profile FILE` runs the controller under cProfile in every thread and writes the summed stats to FILE.

Prints one JSON line per size (median of --runs by p99; each run has its own server and controller).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provisioner.api import labels as wk  # noqa: E402
from provisioner.clusterapi import NotFoundError  # noqa: E402
from provisioner.kube import client as kc  # noqa: E402
from testkit.controllers import kube_server  # noqa: E402

TYPES = ["c6i.4xlarge", "m6i.4xlarge"]
NOMINATED = re.compile(r"nodeclaim/(\S+)")
ARRIVALS: dict[str, list[tuple[float, str]]] = {"pods": [], "nodeclaims": [], "events": [], "marks": []}
"""Resource plural -> (monotonic time, name) of each create the server answered; "marks": each pod's
Unschedulable status write."""
NOMINATIONS: dict[str, str] = {}
"""Pod name -> the NodeClaim its `Nominated` Event names (read as the Events arrive: listing thousands of
Events every second would load the server the controller is measured against)."""


PROFILED = """
import cProfile, pstats, sys, threading
profiles = [cProfile.Profile()]
def _start(*_):
    sys.setprofile(None)
    profiles.append(cProfile.Profile())
    profiles[-1].enable()
threading.setprofile(_start)
sys.argv = ["provisioner", *sys.argv[1:]]
profiles[0].enable()
try:
    from provisioner.cli.main import main
    main()
finally:
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        stats.add(p)
    stats.dump_stats({path!r})
"""
"""`provisioner run` under cProfile in every thread (the manager, the informers), `--profile`: the stats
of all threads, summed, are written as it exits on SIGTERM."""


class TimedEmulator(kube_server.FilledEmulator):
    """The fixture's emulator, noting when each pod and NodeClaim create arrives."""

    async def _handle(self, request: Any) -> Any:
        response = await super()._handle(request)
        resource = request.resource
        if resource is not None and resource.plural == "pods" and request.subresource == "status":
            if response.status == 200:
                ARRIVALS["marks"].append((time.monotonic(), request.name or ""))
        elif resource is not None and resource.plural in ARRIVALS and response.status == 201:
            data = request.data or {}
            name = (data.get("metadata") or {}).get("name", "")
            ARRIVALS[resource.plural].append((time.monotonic(), name))
            found = NOMINATED.search(data.get("message", "")) if data.get("reason") == "Nominated" else None
            if found:
                NOMINATIONS[(data.get("involvedObject") or {}).get("name", "")] = found.group(1)
        return response


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cpu, peak


def _objects(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    setup = [
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": "KarpenterNodeRole-bench",
            },
        },
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "cpu"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "provisioner.sh",
                            "kind": "AWSNodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": TYPES},
                            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
                        ],
                    }
                },
                "disruption": {"consolidateAfter": "Never"},
            },
        },
    ]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"web-{i:05d}", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "web:1",
                        "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}},
                    }
                ]
            },
        }
        for i in range(n)
    ]
    return setup, pods


UNSCHEDULABLE = {
    "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
}
"""kube-scheduler's mark on a pod it found no node for."""


def _create_and_mark(client: kc.KubeClient, res: kc.Resource, doc: dict[str, Any]) -> None:
    client.create(res, doc, namespace="default")
    client.patch(res, doc["metadata"]["name"], UNSCHEDULABLE, namespace="default", sub="status")


def create_and_mark_all(url: str, docs: list[dict[str, Any]], *, threads: int = 4) -> float:
    """Create and mark the pods through the official client from `threads` threads of a child process,
    as clients apart from the API server (kube-scheduler, the workloads' controllers) are: threads of this
    process would share its interpreter lock with the fixture's thread, and the fixture would wait on them.
    The child's CPU seconds."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return float(pool.submit(_clients, url, docs, threads).result())


def _clients(url: str, docs: list[dict[str, Any]], threads: int) -> float:
    client = kc.KubeClient.connect(url=url)
    start = time.process_time()
    try:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda doc: _create_and_mark(client, kc.POD, doc), docs))
    finally:
        client.close()
    return time.process_time() - start


def _resource(doc: dict[str, Any]) -> kc.Resource:
    return next(r for r in (*kc.WATCHED, kc.EVENT) if r.kind == doc["kind"])


def run_once(n: int, *, batch_idle: float, timeout: float, profile: str | None) -> dict[str, Any]:
    for arrivals in ARRIVALS.values():
        arrivals.clear()
    NOMINATIONS.clear()
    server = kube_server.KubeServer()
    kube_server.FilledEmulator = TimedEmulator  # type: ignore[misc]  # the fixture builds it by name
    server.start()
    client = kc.KubeClient.connect(url=server.url)
    setup, pods = _objects(n)
    for doc in setup:
        client.create(_resource(doc), doc)
    workdir = tempfile.TemporaryDirectory()
    cmd = [
        sys.executable,
        *(["-c", PROFILED.format(path=profile)] if profile else ["-m", "provisioner.cli"]),
        "run",
        "--cloud",
        "fake",
        "--url",
        server.url,
        "--cluster-name",
        "bench",
        "--batch-idle",
        str(batch_idle),
        "--batch-max",
        "600",
        "--interval",
        "0.1",
        "--metrics-port",
        str(_free_port()),
        "--log-format",
        "json",
        "--ledger",
        str(Path(workdir.name) / "ledger.sqlite"),
    ]
    log = open(os.environ.get("BENCH_CONTROLLER_LOG", os.devnull), "w")  # noqa: SIM115  # closed below
    proc = subprocess.Popen(cmd, stderr=log, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        # The controller is up once it holds the lease.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                lease = client.get(kc.LEASE, "provisioner-leader", namespace="default")
                if lease.get("spec", {}).get("holderIdentity"):
                    break
            except (kc.ApiError, NotFoundError):
                pass
            time.sleep(0.2)
        time.sleep(1)  # its informers' first lists are done
        cpu_before, _ = _proc_stats(proc.pid)
        create_and_mark_all(server.url, pods)
        last_pod = max(t for t, _ in ARRIVALS["marks"])
        close = last_pod + batch_idle
        # Every pod nominated: one Event per pod (written after its claim).
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(NOMINATIONS) < n:
            time.sleep(0.2)
        nominated = dict(NOMINATIONS)
        claims_written = dict((name, t) for t, name in ARRIVALS["nodeclaims"])
        last_claim = max(claims_written.values(), default=close)
        cpu_after, peak = _proc_stats(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        client.close()
        server.stop()
        workdir.cleanup()
    if len(nominated) < n:
        raise SystemExit(f"only {len(nominated)} of {n} pods nominated within {timeout} s")
    latencies = sorted(claims_written[c] - close for c in nominated.values())
    events = [t for t, _ in ARRIVALS["events"]]
    return {
        "claims": len(claims_written),
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "last": last_claim - close,
        "first": min(claims_written.values(), default=close) - close,
        "lastEvent": max(events, default=close) - close,
        "podsCreateSeconds": last_pod - min(t for t, _ in ARRIVALS["pods"]),
        "cpuSeconds": cpu_after - cpu_before,
        "peakRssMiB": peak,
    }


def accept_once(n: int) -> dict[str, Any]:
    """The API fixture alone (`--fixture-only`): `n` pods created and marked as in `run_once` while one
    watch of pods, as the controller's informer holds, reads every event."""
    for arrivals in ARRIVALS.values():
        arrivals.clear()
    kube_server.FilledEmulator = TimedEmulator  # type: ignore[misc]  # the fixture builds it by name
    server = kube_server.KubeServer().start()
    client, watcher = kc.KubeClient.connect(url=server.url), kc.KubeClient.connect(url=server.url)
    setup, pods = _objects(n)
    for doc in setup:
        client.create(_resource(doc), doc)
    events: list[float] = []

    def watch() -> None:
        for _ in watcher.watch(kc.POD, resource_version=None, timeout_seconds=3600):
            events.append(time.monotonic())
            if len(events) >= 2 * n:  # each pod ADDED, then MODIFIED by its mark
                return

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not server.emulator.watches:
            if time.monotonic() > deadline:
                raise SystemExit("the watch of pods did not open within 60 s")
            time.sleep(0.05)
        server_cpu = server.cpu_seconds()
        client_cpu = create_and_mark_all(server.url, pods)
        reader.join(600)
        if reader.is_alive():
            raise SystemExit(f"the watch read {len(events)} of {2 * n} events within 600 s")
        server_cpu = server.cpu_seconds() - server_cpu
    finally:
        client.close()
        watcher.close()
        server.stop()
    first = min(t for t, _ in ARRIVALS["pods"])
    return {
        "seconds": max(t for t, _ in ARRIVALS["marks"]) - first,
        "watchSeconds": events[-1] - first,
        "serverCpuSeconds": server_cpu,
        "clientCpuSeconds": client_cpu,
    }


def fixture_main(n: int, runs: int) -> None:
    results = [accept_once(n) for _ in range(runs)]
    chosen = sorted(results, key=lambda r: r["seconds"])[len(results) // 2]
    print(
        json.dumps(
            {
                "benchmark": "controller-fixture",
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load1": round(os.getloadavg()[0], 2),
                "pods": n,
                **{key: round(value, 2) for key, value in chosen.items()},
                "secondsRuns": [round(r["seconds"], 2) for r in results],
                "serverCpuSecondsRuns": [round(r["serverCpuSeconds"], 2) for r in results],
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--batch-idle", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every claim")
    parser.add_argument("--profile", help="write the controller's cProfile stats to this file")
    parser.add_argument(
        "--fixture-only",
        action="store_true",
        help="time the API fixture alone taking in the pods (no controller)",
    )
    args = parser.parse_args()
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        if args.fixture_only:
            fixture_main(n, max(1, args.runs))
            continue
        runs = [
            run_once(n, batch_idle=args.batch_idle, timeout=args.timeout, profile=args.profile)
            for _ in range(max(1, args.runs))
        ]
        p99s = [r["p99"] for r in runs]
        chosen = min(runs, key=lambda r: abs(r["p99"] - statistics.median(p99s)))
        print(
            json.dumps(
                {
                    "benchmark": "controller",
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load1": round(os.getloadavg()[0], 2),
                    "pods": n,
                    "claims": chosen["claims"],
                    "batchIdle": args.batch_idle,
                    "p50": round(chosen["p50"], 3),
                    "p99": round(chosen["p99"], 3),
                    "firstClaim": round(chosen["first"], 3),
                    "lastClaim": round(chosen["last"], 3),
                    "lastEvent": round(chosen["lastEvent"], 3),
                    "p99Runs": [round(p, 3) for p in p99s],
                    "podsCreateSeconds": round(chosen["podsCreateSeconds"], 2),
                    "cpuSeconds": round(chosen["cpuSeconds"], 2),
                    "peakRssMiB": round(chosen["peakRssMiB"], 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
