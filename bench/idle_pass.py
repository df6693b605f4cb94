"""An idle pass: one Manager pass over a large, settled cluster in which nothing changed
(../shared/BENCHMARKS.md section 5, "a controller pass with nothing changed").

The cluster is the one `bench/scale.py` grows (the `aws` catalog, one CPU pool of c6i/m6i 4xlarge, `--pods`
pods of 1500m CPU and 2Gi in Deployments of `--replicas`, about ten to a node), grown by the real
controllers in this process (`provisioner.sim.runner.Runner`: the embedded cluster, the fake cloud, a
virtual clock) until nothing has moved for several ticks and nothing is in flight. Then the virtual clock
moves `--every` seconds at a time (1 s: `provisioner run`'s pass interval) and each `Manager.step` is timed
alone, in CPU time of this thread (`time.thread_time`): the simulator's stand-ins (kubelets, binder) do not
run between the timed passes, so nothing changes but the clock.

Some work comes with time, not change, and is in the figures as it falls: garbage collection lists the
cloud's instances every `gc_interval` (30 s), disruption evaluates at least every minute, and the usage
meter writes every node's row every 5 minutes. The median is a pass without them; the mean over
`--passes` (120 by default: two minutes) spreads them as they fall; the largest is the dearest of them.

    python bench/idle_pass.py [--pods 100000] [--replicas 1000] [--passes 120] [--every 1] [--profile FILE]

Prints one JSON line: the machine's facts, the sizes held (nodes, claims, pods), the median, mean and
largest CPU milliseconds of a pass, and the median and mean per controller.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402

from provisioner.finops.ledger import Ledger  # noqa: E402
from provisioner.sim import scenario as scenario_  # noqa: E402
from provisioner.sim import timeline as timeline_  # noqa: E402
from provisioner.sim.runner import START, Runner  # noqa: E402

SETTLED_TICKS = 8
"""Ticks in a row with no write to the state and nothing in flight: the cluster is settled."""


def grown(pods: int, replicas: int) -> Runner:
    """A Runner whose cluster holds `pods` pods bound to the nodes the controllers launched for them."""
    docs = scale.scenario(pods=pods, replicas=replicas, hours=3)
    spec = docs[0]["spec"]
    spec["timeline"] = spec["timeline"][:1]  # only the scale-up
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "idle.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        loaded = scenario_.load(path)
    timeline = timeline_.load(loaded)
    assert timeline is not None
    runner = Runner(loaded, timeline, ledger=Ledger("sqlite://"))
    runner._build()
    steps = list(timeline.steps)
    quiet = 0
    last = -1
    while quiet < SETTLED_TICKS:
        now = runner.clock.now()
        while steps and runner.clock.now() >= START + steps[0].at:
            runner._apply(steps.pop(0))
        runner._tick(now)
        generation = runner.state.generation - runner.cluster.pool_status_writes
        quiet = 0 if generation != last or runner._in_flight() or steps else quiet + 1
        last = generation
        runner.clock.advance(runner.tick)
    return runner


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=1000, help="pods per Deployment")
    parser.add_argument("--passes", type=int, default=120, help="idle passes timed")
    parser.add_argument("--every", type=float, default=1.0, help="virtual seconds between passes")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the timed passes into FILE")
    args = parser.parse_args()
    started = time.perf_counter()
    runner = grown(args.pods, args.replicas)
    grow_seconds = time.perf_counter() - started
    manager = runner.manager
    generation = runner.state.generation
    per_controller: dict[str, list[float]] = {name: [] for name, _ in manager.controllers}
    timed = {name: _timed(controller, per_controller[name]) for name, controller in manager.controllers}
    manager.controllers = [(name, timed[name]) for name, _ in manager.controllers]
    profile = cProfile.Profile() if args.profile else None
    passes: list[float] = []
    for _ in range(max(1, args.passes)):
        runner.clock.advance(timedelta(seconds=args.every))
        now = runner.clock.now()
        if profile is not None:
            profile.enable()
        before = time.thread_time()
        manager.step(now)
        passes.append((time.thread_time() - before) * 1000)
        if profile is not None:
            profile.disable()
    if profile is not None:
        profile.dump_stats(args.profile)
    state = runner.state
    print(
        json.dumps(
            {
                "benchmark": "idle_pass",
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "machine": platform.machine(),
                "load1": round(os.getloadavg()[0], 2),
                "pods": len(state.pods),
                "nodes": len(state.nodes),
                "claims": len(state.claims),
                "growSeconds": round(grow_seconds, 1),
                "writesDuringPasses": state.generation - generation,
                "passes": len(passes),
                "everySeconds": args.every,
                "passCpuMs": round(statistics.median(passes), 3),
                "meanPassCpuMs": round(statistics.mean(passes), 3),
                "maxPassCpuMs": round(max(passes), 2),
                "controllerCpuMs": {
                    name: round(statistics.median(times), 3) for name, times in per_controller.items()
                },
                "controllerMeanCpuMs": {
                    name: round(statistics.mean(times), 3) for name, times in per_controller.items()
                },
            }
        )
    )


class _timed:
    """A controller whose every `reconcile` adds its CPU milliseconds (this thread's) to a list."""

    def __init__(self, controller: object, into: list[float]) -> None:
        self.controller = controller
        self.into = into

    def reconcile(self, now: object) -> object:
        before = time.thread_time()
        try:
            return self.controller.reconcile(now)  # type: ignore[attr-defined]
        finally:
            self.into.append((time.thread_time() - before) * 1000)


if __name__ == "__main__":
    main()
