"""The sharded runs of the reliability campaign (`bench/chaos.py --sharded`, issue 29): two or three
`provisioner run --cloud fake --shards 4` processes (bench/chaos_fleet.py) share the NodePools through shard
Leases, one fake cloud (`--fake-state`) and one SQLite ledger, against the strict Kubernetes API fixture
over HTTP. Chaos kills
them and moves their pools while pods arrive; then the campaign checks what the crash runs check and what
sharding adds.

The cluster: one GPU pool on each of the 4 shards, 1-GPU pods on 1-GPU nodes (g5.xlarge), every pool with
a GPU limit. `first` (limit 2) and `next` take pods whose list names both, in that order: the first pool's
limit passes some on to the second pool's replica. The two others take pods pinned to them and a Team's
pods, gated by admission and listed across both, with a quota of 1 GPU on each (`overQuota: false`).

The chaos, drawn from the seed: one replica starts with a crash point (`launch-called`, `claim-written`,
`status-written` or `node-registering`: it SIGKILLs itself mid-launch and is started again); then 3 to 5 events while two waves
of pods arrive: `kill` (SIGKILL a random replica, started again 0-4 s later), `leave` (SIGTERM: it gives its
Leases up; back 0-4 s later as a new member) and `join` (one replica more). Once every pod is bound a user
deletes one claim and empties another node (consolidation, a ledger row), and half the seeds kill a replica
meanwhile.

Checked, beside what bench/chaos.py checks (double launches, stranded, limits and the quota at every
poll, ledger rows lost or written twice; leaked here is stricter: a live instance whose provider ID no
NodeClaim holds, once garbage collection has had its grace period):
- nominated twice: pods whose `Nominated` Events name two NodeClaims (a pod provisioned twice);
- shards unsettled: once the replicas settle, each shard's Lease must be held, and renewed, by the live
  replica the assignment gives it (`provisioner.scheduling.shards.assign` over the live members' Leases),
  and by no one else. The seconds from the last change of members (a start, a kill, a leave) to that
  state are `shard_settle_seconds` (the Lease lasts 3 s).

The campaign plays kube-scheduler with `NominatedBinder` (a nominated pod goes to its claim's node), so
alike pods swapping nodes is not taken for a pod provisioned twice. The same seed replays the same
workload, events and crash point; not the same interleaving, which is the machine's.
"""

from __future__ import annotations

import os
import random
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bench import chaos_clouds
from bench.chaos_fleet import SHARDS, Fleet, Members
from providers.fake import saved
from provisioner.api import labels as wk
from provisioner.clock import RealClock, isoformat
from provisioner.clusterapi import ConflictError
from provisioner.kube import client as kc
from provisioner.scheduling import shards as model
from provisioner.state.objects import Pod
from testkit.controllers.backends import KubeBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.space import Space, Sweep
from testkit.controllers.standins import TestBinder, cluster_controllers
from testkit.controllers.standins import _fits as fits  # the kit binder's own rule: what fits where
from testkit.controllers.world import gpu_pod, node_pool

if TYPE_CHECKING:
    from bench.chaos import RunResult

TEAM = "vision"
QUOTA = 1
"""The Team's GPUs on each of its two pools."""
FIRST_LIMIT = 2
"""GPUs of the first pool of the spanning pods: the others are passed on."""
CRASH_POINTS = (
    "launch-called:1",
    "launch-called:2",
    "claim-written:1",
    "status-written:1",
    "node-registering:1",
)
SETTLE = 120.0
"""Seconds a phase may take before the run is counted as failed."""
NOMINATED = re.compile(r"nodeclaim/(\S+)")


@dataclass(frozen=True)
class Event:
    at: float
    """Seconds after the first wave of pods."""
    kind: str
    """kill, leave or join."""
    back_after: float
    """kill and leave: seconds until that replica starts again."""


@dataclass(frozen=True)
class Plan:
    """What a seed draws: the replicas, the crash point, the events and the workload."""

    replicas: int
    crash_at: str
    crash_slot: int
    events: tuple[Event, ...]
    second_wave_at: float
    pinned: tuple[int, int]
    """Pods pinned to each of the team's pools, per wave."""
    spanning: tuple[int, int]
    team: int
    kill_while_deleting: float | None
    """Seconds into the users' deletions at which a random replica is killed (None: none)."""


def plan(seed: int, replicas: int) -> Plan:
    rng = random.Random(f"sharded:{seed}:{replicas}")
    times = sorted(round(rng.uniform(0.5, 10.0), 2) for _ in range(rng.randint(3, 5)))
    events = tuple(
        Event(
            at=t, kind=rng.choice(("kill", "kill", "leave", "join")), back_after=round(rng.uniform(0, 4), 2)
        )
        for t in times
    )
    return Plan(
        replicas=replicas,
        crash_at=rng.choice(CRASH_POINTS),
        crash_slot=rng.randrange(replicas),
        events=events,
        second_wave_at=round(rng.uniform(1.0, times[-1]), 2),
        pinned=(rng.randint(1, 2), rng.randint(0, 2)),
        spanning=(rng.randint(2, 3), rng.randint(1, 2)),
        team=rng.randint(2, 3),
        kill_while_deleting=round(rng.uniform(0, 3), 2) if rng.random() < 0.5 else None,
    )


@dataclass(frozen=True)
class Where:
    """Where a run's objects live: on its own strict server, under the plain names; on a cluster
    (`--kubeconfig`), in a Space's namespaces and under names with its suffix."""

    namespace: str = "default"
    """Of the pods that are not the team's, and of the replicas' Leases."""
    team: str = TEAM
    """The Team and its namespace."""
    suffix: str = ""
    """Of the pools' and the NodeClass's names."""
    pools: set[str] = field(default_factory=set, compare=False)
    """Each pool name given out (a Space deletes their claims and Nodes)."""

    @classmethod
    def of(cls, space: Space) -> Where:
        return cls(space.namespace, space.own(space.name(TEAM)), space.token, space.pools)

    def name(self, base: str) -> str:
        return f"{base}-{self.suffix}" if self.suffix else base

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset({self.namespace, self.team})


def pools(where: Where | None = None) -> tuple[str, str, str, str]:
    """One pool name on each shard: the spanning pods' first and next, then the team's two."""
    where = where or Where()
    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < SHARDS:
        by_shard.setdefault(model.shard_of(where.name(f"pool-{i}"), SHARDS), where.name(f"pool-{i}"))
        i += 1
    where.pools.update(by_shard.values())
    first, second, third, fourth = (by_shard[s] for s in range(SHARDS))
    return first, second, third, fourth


def _gpus(requests: Any) -> int:
    return int(requests.get(wk.GPU_RESOURCE, 0) if requests else 0)


def _pinned_to(pod: Any) -> str:
    """The pool admission pinned a team pod to (its node selector), or empty."""
    return str((pod.raw.get("spec") or {}).get("nodeSelector", {}).get(wk.NODEPOOL, ""))


def workload(p: Plan, where: Where | None = None) -> tuple[list[list[dict[str, Any]]], dict[str, int]]:
    """The two waves of pods, and each pool's GPU limit."""
    where = where or Where()
    first, second, third, fourth = pools(where)
    ns = where.namespace
    waves: list[list[dict[str, Any]]] = [[], []]
    either = [{"key": wk.NODEPOOL, "operator": "In", "values": [first, second]}]
    for w in (0, 1):
        for pool in (third, fourth):
            waves[w] += [
                gpu_pod(f"{pool}-w{w}-{i}", namespace=ns, node_selector={wk.NODEPOOL: pool})
                for i in range(p.pinned[w])
            ]
        waves[w] += [
            gpu_pod(f"span-w{w}-{i}", namespace=ns, pools=(first, second), required=[either])
            for i in range(p.spanning[w])
        ]
    for i in range(p.team):
        doc = gpu_pod(f"{TEAM}-{i}", namespace=where.team, owner="Job", pools=(third, fourth))
        doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
        waves[i % 2].append(doc)
    spanning, pinned = sum(p.spanning), sum(p.pinned) + p.team
    # Room for every pod twice over, but in the first pool: the limits are checked at every poll.
    limits = {first: FIRST_LIMIT, second: 2 * spanning + 2, third: 2 * pinned + 2, fourth: 2 * pinned + 2}
    return waves, limits


def run_sharded(result: RunResult, *, replicas: int, logs: Path, kubeconfig: str | None = None) -> None:
    """One sharded run (seed `result.seed`), its findings into `result`: against a strict server of its
    own, or the cluster of `kubeconfig` (in a Space of its own, everything it made deleted at the end)."""
    from bench import chaos  # chaos.py imports this module

    tmp = tempfile.mkdtemp(prefix="chaos-shards-")
    server = None if kubeconfig else KubeServer().start()
    client = kc.KubeClient.connect(kubeconfig=kubeconfig, url=server.url if server else None)
    sweep = Sweep(client) if kubeconfig else None
    space = Space(client, accounts=True) if kubeconfig else None
    where = Where.of(space) if space else Where()
    backend = KubeBackend(client, RealClock(), cleanup=bool(kubeconfig))  # type: ignore[arg-type]
    cloud = chaos_clouds.FakeCloud(os.path.join(tmp, "fake-cloud.json"))
    ledger = f"sqlite:///{tmp}/ledger.sqlite"
    name = logs / f"sharded-seed{result.seed}-{replicas}"
    fleet = Fleet(server.url if server else "", cloud, ledger, name, chaos.RUN_FLAGS)
    fleet.kubeconfig, fleet.lease_namespace = kubeconfig, where.namespace
    try:
        ShardedRun(result, plan(result.seed, replicas), backend, fleet, where).run()
    finally:
        fleet.stop()
        result.kills = fleet.crashes + fleet.kills
        result.crashed = result.kills > 0
        result.problems += fleet.problems
        backend.close()
        for cleanup in (space.close if space else None, sweep.sweep if sweep else None):
            if cleanup is not None:
                cleanup()
        client.close()
        if server is not None:
            server.stop()


class ShardedRun:
    """The phases of one run: the replicas join, pods arrive while the chaos acts, users delete, garbage
    collection, the books. Every poll samples the limits, the quota and the shard Leases."""

    def __init__(
        self, result: RunResult, p: Plan, backend: KubeBackend, fleet: Fleet, where: Where | None = None
    ) -> None:
        self.result = result
        self.plan = p
        self.rng = random.Random(f"sharded-targets:{result.seed}:{p.replicas}")
        """Which running replica each event takes."""
        self.where = where or Where()
        self.backend = backend
        self.binder = NominatedBinder(backend, namespaces=self.where.namespaces)
        self.fleet = fleet
        self.cloud = fleet.cloud
        self.waves, self.limits = workload(p, self.where)
        self.team_pools = pools(self.where)[2:]
        self.members = Members(backend.client, fleet, self.where.namespace)
        self.unsettled = "not polled yet"
        """What kept the shards from being settled at the last poll (empty: settled)."""
        self.carried: dict[str, str] = {}
        """Claim -> node, for every claim seen carrying its ledger rows (disruption deleted it)."""
        self.events = list(p.events)
        self.started = 0.0

    def run(self) -> None:
        from bench import chaos

        self.create_cluster()
        if not self.wait("every replica a member", lambda: not self.unsettled):
            return
        for doc in self.waves.pop(0):
            self.backend.create(doc)
        self.started = time.monotonic()
        # A phase that times out is a problem; the run goes on, so the books say what it cost.
        self.wait("every pod bound on an initialized node", self.all_bound, self.chaos)
        self.fleet.bring_back()
        gone, emptied = chaos.user_deletes(self.backend, self.rng)
        kill_at = self.plan.kill_while_deleting
        deleting = time.monotonic()

        def kill_once() -> None:
            nonlocal kill_at
            running = self.fleet.running()
            if kill_at is not None and time.monotonic() - deleting >= kill_at and running:
                self.fleet.kill(self.rng.choice(running), 0.0)
                kill_at = None

        def deleted() -> bool:
            return (
                kill_at is None
                and chaos.deletions_done(self.backend, gone, emptied)
                and chaos.quiet(self.backend)
                and not self.stranded()
            )

        self.wait("the deleted and the emptied claims gone", deleted, kill_once)
        self.wait("garbage collection", self.collected, detail=self.instances)
        self.books()
        if not self.wait(
            "every shard held by its assigned replica",
            lambda: not self.unsettled,
            detail=lambda: self.unsettled,
        ):
            self.result.shards_unsettled = 1
        self.result.shard_settle_seconds = round(max(self.members.settle_times, default=0.0), 2)
        claims = {c.name for c in self.claims()}
        self.fleet.stop()
        self.result.ledger_lost, self.result.ledger_duplicates = chaos.ledger_books(
            self.fleet.ledger, self.carried, emptied, claims
        )

    def pods(self) -> list[Pod]:
        """The run's pods (a real cluster runs others)."""
        return [q for q in list(self.backend.state.pods.values()) if q.namespace in self.where.namespaces]

    def claims(self) -> list[Any]:
        """The NodeClaims of the run's pools."""
        return [c for c in list(self.backend.state.claims.values()) if c.nodepool in self.limits]

    def create_cluster(self) -> None:
        klass = self.cloud.node_class()
        klass["metadata"]["name"] = self.where.name(klass["metadata"]["name"])
        self.backend.create(klass)
        for pool, limit in self.limits.items():
            doc = node_pool(
                pool,
                instance_types=("g5.xlarge",),
                limits={wk.GPU_RESOURCE: str(limit)},
                node_class_name=klass["metadata"]["name"],
            )
            doc["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
            self.backend.create(doc)
        quotas = [
            {"nodePool": t, "resources": {wk.GPU_RESOURCE: str(QUOTA)}, "overQuota": False}
            for t in self.team_pools
        ]
        team = {"apiVersion": "provisioner.sh/v1", "kind": "Team", "metadata": {"name": self.where.team}}
        self.backend.create({**team, "spec": {"namespaces": [self.where.team], "quotas": quotas}})
        for slot in range(self.plan.replicas):
            self.fleet.add(self.plan.crash_at if slot == self.plan.crash_slot else None)

    def chaos(self) -> None:
        """The second wave and the events whose time has come."""
        now = time.monotonic() - self.started
        if self.waves and now >= self.plan.second_wave_at:
            for doc in self.waves.pop(0):
                self.backend.create(doc)
        while self.events and self.events[0].at <= now:
            event = self.events.pop(0)
            running = self.fleet.running()
            if event.kind == "join" or not running:
                self.fleet.add()
            elif event.kind == "kill":
                self.fleet.kill(self.rng.choice(running), event.back_after)
            else:
                self.fleet.leave(self.rng.choice(running), event.back_after)

    def poll(self) -> None:
        self.fleet.tick()
        # The not-ready taint off Ready Nodes, the run's Terminating pods finished.
        cluster_controllers(self.backend, self.where.namespaces)
        self.binder.sync()
        claims = self.claims()
        for pool, limit in self.limits.items():
            held = {c.name: _gpus(c.status.capacity) for c in claims if c.nodepool == pool}
            if sum(held.values()) > limit:
                if not self.result.limit_breaches:
                    self.result.findings.append(f"pool {pool} (limit {limit} GPUs) held {held}")
                self.result.limit_breaches += 1
        self.result.quota_breaches += sum(self.team_admitted(t) > QUOTA for t in self.team_pools)
        for c in claims:
            if wk.LEDGER_ACTIONS in c.metadata.annotations and c.status.node_name:
                self.carried[c.name] = c.status.node_name
        self.unsettled = self.members.poll()

    def wait(
        self,
        what: str,
        done: Callable[[], bool],
        step: Callable[[], None] = lambda: None,
        detail: Callable[[], str] | None = None,
    ) -> bool:
        """Poll (after `step`) until done(); past SETTLE, a problem saying what was awaited."""
        from bench import chaos

        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:
            step()
            self.poll()
            if done():
                return True
            time.sleep(0.1)
        seen = detail() if detail is not None else chaos.describe(self.backend)
        self.result.problems.append(f"timed out waiting for {what} ({seen}; stranded: {self.stranded()})")
        return False

    def team_admitted(self, pool: str) -> int:
        """GPUs of the team's admitted pods pinned to `pool`."""
        return sum(
            _gpus(q.requests)
            for q in self.pods()
            if q.namespace == self.where.team and not q.gated and not q.is_terminal and _pinned_to(q) == pool
        )

    def stranded(self) -> list[str]:
        """Pending pods a pool could take: all but the team's gated ones its quota holds back."""
        full = all(self.team_admitted(t) + 1 > QUOTA for t in self.team_pools)
        return sorted(
            q.key
            for q in self.pods()
            if not (q.node_name or q.deleting or q.is_terminal) and not (q.gated and full)
        )

    def all_bound(self) -> bool:
        nodes = [
            n for n in list(self.backend.state.nodes.values()) if n.labels.get(wk.NODEPOOL) in self.limits
        ]
        return (
            not self.events
            and not self.waves
            and not self.stranded()
            and all(n.labels.get(wk.INITIALIZED) == "true" for n in nodes)
        )

    def collected(self) -> bool:
        return sorted(self.cloud.live()) == sorted(c.name for c in self.claims())

    def instances(self) -> str:
        return (
            f"instances of claims {sorted(self.cloud.live())}, claims {sorted(c.name for c in self.claims())}"
        )

    def books(self) -> None:
        """Orphans, double launches, stranded pods and pods nominated twice, once GC has run."""
        # An orphan: a live instance no claim holds by its provider ID (its claim gone, or the claim
        # holding another instance).
        tied = {c.status.provider_id for c in self.claims()}
        path = self.cloud.state_path
        self.result.leaked = (
            sum(i.provider_id not in tied for i in saved.load(path)[0]) if os.path.exists(path) else 0
        )
        self.result.double_launches = sum(max(0, n - 1) for n in self.cloud.launches().values())
        self.result.stranded = len(self.stranded())
        found = nominations(self.backend.client, self.where.namespaces)
        twice = {pod: sorted(c) for pod, c in found.items() if len(c) > 1}
        self.result.nominated_twice = len(twice)
        self.result.findings += [
            f"pod {pod} nominated to NodeClaims {claims}" for pod, claims in twice.items()
        ]


def nominated(client: kc.KubeClient, namespaces: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(pod, NodeClaim) of every `Nominated` Event (of the pods of `namespaces`, when given), in the
    order they were written."""
    paths = (
        [kc.EVENT.path(namespace=ns) for ns in namespaces] if namespaces is not None else [kc.EVENT.path()]
    )
    events = [e for path in paths for e in client.request("GET", path)["items"]]
    events.sort(key=lambda e: int((e.get("metadata") or {}).get("resourceVersion") or 0))
    out = []
    for event in events:
        found = NOMINATED.search(event.get("message", "")) if event.get("reason") == "Nominated" else None
        if found:
            involved = event.get("involvedObject") or {}
            out.append((f"{involved.get('namespace', 'default')}/{involved.get('name', '')}", found.group(1)))
    return out


def nominations(client: kc.KubeClient, namespaces: Iterable[str] | None = None) -> dict[str, set[str]]:
    """Pod -> the NodeClaims its `Nominated` Events name (of the pods of `namespaces`, when given)."""
    out: dict[str, set[str]] = {}
    for pod, claim in nominated(client, namespaces):
        out.setdefault(pod, set()).add(claim)
    return out


class NominatedBinder(TestBinder):
    """The campaign's kube-scheduler: TestBinder's, but it honours the provisioner's nominations. A pod
    nominated to a NodeClaim goes to that claim's node, and a node whose claim a pod still pending was
    nominated to is kept for that pod. Without it alike pods swap nodes, and the provisioner rightly opens
    a claim for the one left over: a second nomination that no defect made."""

    __test__ = False

    def sync(self) -> list[str]:
        state = self.backend.state
        # The last Event wins.
        latest = dict(nominated(cast(KubeBackend, self.backend).client, self.namespaces))
        # By provider ID: a Node registers before its claim's status names it.
        by_id = {c.status.provider_id: c.name for c in list(state.claims.values()) if c.status.provider_id}
        claim_of = {n.name: by_id.get(n.provider_id or "") for n in list(state.nodes.values())}
        pods = {p.key: p for p in list(state.pods.values())}
        waiting = {claim for pod, claim in latest.items() if pod in pods and not pods[pod].node_name}
        bound: dict[str, list[Pod]] = {}
        for p in pods.values():
            if p.node_name:
                bound.setdefault(p.node_name, []).append(p)
        out = []
        for p in sorted(pods.values(), key=lambda p: p.key):
            if p.node_name or p.deleting or p.is_terminal or p.scheduling_gates:
                continue
            if self.namespaces is not None and p.namespace not in self.namespaces:
                continue  # kube-scheduler's, on a real cluster
            mine = latest.get(p.key)
            nodes = sorted(list(state.nodes.values()), key=lambda n: (claim_of.get(n.name) != mine, n.name))
            target = next(
                (
                    n
                    for n in nodes
                    if (claim_of.get(n.name) == mine or claim_of.get(n.name) not in waiting)
                    and fits(p, n, bound.get(n.name, []))
                ),
                None,
            )
            if target is None:
                if not p.unschedulable:  # what tells the provisioner a pod needs capacity
                    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                    status = {
                        "conditions": p.conditions_with({**condition, "message": "0/N nodes are available"})
                    }
                    self.backend.patch_status("Pod", p.name, status, namespace=p.namespace)
                continue
            try:
                self.backend.bind(p.namespace, p.name, target.name)
            except ConflictError:
                continue  # bound meanwhile
            scheduled = p.conditions_with({"type": "PodScheduled", "status": "True"})
            running = {
                "phase": "Running",
                "startTime": isoformat(self.backend.clock.now()),
                "conditions": scheduled,
            }
            self.backend.patch_status("Pod", p.name, running, namespace=p.namespace)
            bound.setdefault(target.name, []).append(p)
            out.append(p.key)
        return out
