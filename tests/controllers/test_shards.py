"""Sharded replicas as processes: `provisioner run --cloud fake --shards N` two and three times against
one API server and one fake cloud (its state file). Pods of pools on every shard are provisioned once,
a pod whose pools span replicas is passed on in its list's order, pool limits hold, and a replica
killed mid-launch hands its pools over (its Leases expire) with no second launch and no orphan.

The replicas take a kubeconfig, as on a cluster. Each test keeps to a Space of its own (a fresh
namespace for its pods and the replicas' Leases; pool, class and team names unique to it; all of it
deleted at the end) and asserts only on what the API shows, the replicas' logs and the fake cloud. So
with PROVISIONER_TEST_KUBECONFIG set they run unchanged against that cluster (README "Running the
controller tests against a real cluster")."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.fake import saved
from provisioner.api import NodeClaim
from provisioner.clock import RealClock
from provisioner.controllers.admission import CONDITION
from provisioner.kube import client as kc
from provisioner.scheduling import shards as model
from provisioner.state.objects import Pod
from testkit.controllers.backends import KubeBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.serve import write_kubeconfig
from testkit.controllers.space import Space
from testkit.controllers.standins import TestBinder, cluster_controllers
from testkit.controllers.world import gpu_pod
from tests.controllers.conftest import REAL_CLUSTER
from tests.controllers.spaced import binder_of, class_of, pool_of
from tests.polling import in_turn, wait_until

pytestmark = pytest.mark.slow

SHARDS = 6
LEASE = "3"  # seconds: a killed replica's shards move within it (plus a retry period)


class Replicas:
    """Controller processes sharing the pools, and what they launched."""

    def __init__(self, kubeconfig: str, space: Space, state: Path) -> None:
        self.kubeconfig = kubeconfig
        self.space = space
        self.state = state
        self.procs: list[subprocess.Popen[str]] = []
        self.logs: list[Path] = []

    def start(self, *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-c", "from provisioner.cli import main; main()", "run", "--cloud", "fake"]
        cmd += ["--kubeconfig", self.kubeconfig, "--lease-namespace", self.space.namespace]
        cmd += ["--cluster-name", "e2e", "--batch-idle", "0.2", "--batch-max", "1"]
        cmd += ["--interval", "0.1", "--log-format", "json", "--metrics-port", "0", "--ledger", "none"]
        cmd += ["--shards", str(SHARDS), "--lease-duration", LEASE, "--fake-state", str(self.state)]
        # A file, not a pipe: a pipe nobody reads until the end fills up and blocks a chatty replica.
        log = self.state.parent / f"replica-{len(self.procs)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                cmd,
                stderr=out,
                stdout=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
            )
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def launches(self) -> dict[str, int]:
        """Instances launched per claim, over every replica."""
        return saved.load(str(self.state))[1] if self.state.exists() else {}

    def instances(self) -> list[Any]:
        return saved.load(str(self.state))[0] if self.state.exists() else []

    def stop(self) -> list[str]:
        """Stop every replica still running; their logs."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return [log.read_text() for log in self.logs]


@pytest.fixture
def backend(kube_client: kc.KubeClient, space: Space) -> Iterator[KubeBackend]:
    b = KubeBackend(kube_client, RealClock(), cleanup=bool(REAL_CLUSTER))  # type: ignore[arg-type]
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def replicas(
    kube_server: KubeServer | None, space: Space, backend: KubeBackend, tmp_path: Path
) -> Iterator[Replicas]:
    """Stopped before the backend and the space clean up (a live replica would launch again)."""
    kubeconfig = REAL_CLUSTER
    if kubeconfig is None:
        assert kube_server is not None
        kubeconfig = str(tmp_path / "kubeconfig")
        write_kubeconfig(Path(kubeconfig), kube_server.url)
    r = Replicas(kubeconfig, space, tmp_path / "cloud.json")
    try:
        yield r
    finally:
        r.stop()


def holders(client: kc.KubeClient, namespace: str) -> dict[int, str]:
    """Shard -> the identity holding its Lease now."""
    items = client.request("GET", kc.LEASE.path(namespace=namespace))["items"]
    out = {}
    for lease in items:
        name = lease["metadata"]["name"]
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if name.startswith("provisioner-shard-") and holder:
            out[int(name.rsplit("-", 1)[1])] = holder
    return out


def admission_holder(client: kc.KubeClient, namespace: str) -> str | None:
    lease = client.get(kc.LEASE, "provisioner-admission", namespace=namespace)
    return (lease.get("spec") or {}).get("holderIdentity")


def pod_watches(replicas: Replicas) -> dict[str, tuple[str, frozenset[str]]]:
    """Live replica identity -> the pods its informer watches now, as its log last said (`all`, or a
    label selector), and what it watches besides (the quota admission holder: `no shard`, namespaces)."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for proc, log in zip(replicas.procs, replicas.logs, strict=True):
        if proc.poll() is not None:
            continue
        identity, watching, besides = None, None, set()
        for line in log.read_text().splitlines():
            if not line.startswith("{"):
                continue
            message = json.loads(line).get("message", "")
            if message.startswith("provisioner running:"):
                identity = message.split("identity=", 1)[1].split()[0]
            elif message.startswith("watching pods: "):
                watching = message.removeprefix("watching pods: ")
            elif message.startswith("watching pods of "):
                besides.add(message.removeprefix("watching pods of "))
            elif message.startswith("no longer watching pods of "):
                besides.discard(message.removeprefix("no longer watching pods of "))
        if identity and watching:
            out[identity] = (watching, frozenset(besides))
    return out


def each_watches_its_shards(
    client: kc.KubeClient, replicas: Replicas, *, namespaces: Iterable[str] = ()
) -> bool:
    """Whether each replica's pod watch is what it holds: the pods of its shards (a label selector), and
    for the quota admission holder besides the pods labelled for no shard, those behind the admission
    gate and those of the team `namespaces`."""
    held = holders(client, replicas.space.namespace)
    admits = admission_holder(client, replicas.space.namespace)
    besides = frozenset({"no shard", "gated", *(f"namespace {ns}" for ns in namespaces)})
    expected = {
        who: (
            model.selector({s for s, h in held.items() if h == who}),
            besides if who == admits else frozenset(),
        )
        for who in set(held.values()) | {admits or ""}
        if who
    }
    return pod_watches(replicas) == expected


def pods_of(backend: KubeBackend, space: Space) -> list[Pod]:
    """The pods of the test (a real cluster runs others)."""
    return [p for p in list(backend.state.pods.values()) if p.namespace in space.namespaces]


def claims_of(backend: KubeBackend, space: Space) -> list[NodeClaim]:
    """The NodeClaims of the test's pools."""
    return [c for c in list(backend.state.claims.values()) if c.nodepool in space.pools]


def labelled_by_their_nodes_shard(backend: KubeBackend, space: Space) -> bool:
    """Whether every bound pod carries the shard label of its node's pool (the pod watch of that pool's
    holder takes it)."""
    for pod in pods_of(backend, space):
        node = backend.state.nodes.get(pod.node_name or "")
        pool = node.labels.get("provisioner.sh/nodepool") if node is not None else None
        if pool is None or pod.labels.get(model.SHARD) != str(model.shard_of(pool, SHARDS)):
            return False
    return True


def pools_on_every_shard(space: Space, per_shard: int = 1) -> list[str]:
    """Pool names of the test, `per_shard` in each shard."""
    names: dict[int, list[str]] = {i: [] for i in range(SHARDS)}
    for i in itertools.count():
        name = space.name(f"pool-{i}")
        got = names[model.shard_of(name, SHARDS)]
        if len(got) < per_shard:
            got.append(name)
        if all(len(v) == per_shard for v in names.values()):
            return [space.pool(n) for v in names.values() for n in v]
    raise AssertionError("unreachable")


def pinned_pod(space: Space, name: str, pool: str) -> dict[str, Any]:
    """A one-GPU pod for one pool, pinned to it by node selector (a list alone would let kube-scheduler,
    and the tests' binder, bind it to a node of any pool that fits)."""
    return gpu_pod(name, namespace=space.namespace, node_selector={"provisioner.sh/nodepool": pool})


def settle(backend: KubeBackend, binder: TestBinder) -> Callable[[], object]:
    return in_turn(lambda: cluster_controllers(backend, binder.namespaces), binder.sync)


def all_bound(backend: KubeBackend, space: Space) -> bool:
    pods = pods_of(backend, space)
    return bool(pods) and all(p.node_name for p in pods)


def assert_each_claim_launched_once_and_nothing_orphaned(backend: KubeBackend, replicas: Replicas) -> None:
    claims = {c.name: c for c in claims_of(backend, replicas.space)}
    launches = replicas.launches()
    assert set(launches) == set(claims), "an instance for every claim, none for a claim that is not there"
    assert all(n == 1 for n in launches.values()), f"a claim launched twice: {launches}"
    live = {i.provider_id for i in replicas.instances() if i.state != "terminated"}
    assert live == {c.status.provider_id for c in claims.values()}, "no orphaned instance"


@pytest.mark.parametrize("count", [2, 3], ids=["two-replicas", "three-replicas"])
def test_replicas_share_the_shards_and_provision_pods_of_every_pool_once(
    count: int, kube_client: kc.KubeClient, backend: KubeBackend, replicas: Replicas
) -> None:
    space = replicas.space
    pools = pools_on_every_shard(space)
    backend.create(class_of(space))
    for name in pools:
        backend.create(pool_of(space, name))
    for _ in range(count):
        replicas.start()

    def held() -> dict[int, str]:
        return holders(kube_client, space.namespace)

    wait_until(
        "every shard held, by every replica",
        lambda: len(held()) == SHARDS and len(set(held().values())) == count,
    )
    for name in pools:
        for i in range(2):
            backend.create(pinned_pod(space, f"{name}-{i}", name))
    binder = binder_of(backend, space)
    wait_until("every pod bound", lambda: all_bound(backend, space), step=settle(backend, binder), limit=120)
    claims = claims_of(backend, space)
    assert len(claims) == 2 * len(pools), "one one-GPU node per one-GPU pod, none twice"
    assert {c.nodepool for c in claims} == set(pools)
    assert_each_claim_launched_once_and_nothing_orphaned(backend, replicas)
    # Created without the shard label (no webhook here): the quota admission holder labelled them, and
    # each replica but that one watches only its own shards' pods.
    wait_until(
        "every pod labelled with its node's shard", lambda: labelled_by_their_nodes_shard(backend, space)
    )
    wait_until(
        "each replica watching its shards' pods", lambda: each_watches_its_shards(kube_client, replicas)
    )
    logs = replicas.stop()
    # Which replica wrote which claim is not asserted: on a loaded machine a replica whose renewals
    # starve loses its shards to the others mid-run, which is the design working.
    assert all(json.loads(line) for log in logs for line in log.splitlines() if line.startswith("{"))


@pytest.mark.parametrize("crash_at", ["launch-called:1", "node-registering:1"], ids=["launched", "no-node"])
def test_a_replica_killed_mid_launch_hands_its_pools_over_without_a_second_launch_or_an_orphan(
    crash_at: str, kube_client: kc.KubeClient, backend: KubeBackend, replicas: Replicas
) -> None:
    # The first replica dies (SIGKILL, no Lease released) right after its first launch, before the
    # claim's status says so: the instance exists, only the shared cloud knows it. `no-node`: before the
    # fake cloud's kubelet registered its Node, too (the survivor's launch gets the instance back, and
    # its Node must come with it, or the pod waits for the registration timeout).
    space = replicas.space

    def held() -> dict[int, str]:
        return holders(kube_client, space.namespace)

    doomed = replicas.start(env={"PROVISIONER_CRASH_AT": crash_at})
    wait_until("the first replica holds every shard", lambda: len(held()) == SHARDS)
    survivor = replicas.start()
    # Balanced, not merely shared: the first replica holds every shard until the second one's membership
    # is seen, and a shard still on its way over would let one replica serve both pools.
    half = SHARDS // 2
    wait_until(
        "both replicas hold half the shards",
        lambda: sorted(Counter(held().values()).values()) == [half, half],
    )
    pools = pools_on_every_shard(space)
    backend.create(class_of(space))
    for name in pools:
        backend.create(pool_of(space, name))
        backend.create(pinned_pod(space, f"{name}-0", name))
    binder = binder_of(backend, space)
    wait_until(
        "the first replica killed itself mid-launch",
        lambda: doomed.poll() is not None,
        step=settle(backend, binder),
    )
    assert doomed.returncode == -signal.SIGKILL
    wait_until(
        "the survivor holds every shard",
        lambda: len(held()) == SHARDS and len(set(held().values())) == 1,
        step=settle(backend, binder),  # the cluster goes on meanwhile (Nodes lose their not-ready taint)
    )
    wait_until("every pod bound", lambda: all_bound(backend, space), step=settle(backend, binder), limit=120)
    assert survivor.poll() is None
    claims = claims_of(backend, space)
    assert len(claims) == len(pools)
    assert_each_claim_launched_once_and_nothing_orphaned(backend, replicas)
    # The dead replica's pools moved, and the watch of their pods with them.
    wait_until(
        "the survivor watching every shard's pods and the pods of no shard",
        lambda: each_watches_its_shards(kube_client, replicas),
    )


def _pool_in(space: Space, shards: set[int], taken: set[str]) -> str:
    return next(
        n
        for n in (space.name(f"span-{i}") for i in itertools.count())
        if model.shard_of(n, SHARDS) in shards and n not in taken
    )


def _admitted(pod: Any) -> str | None:
    """The status of the pod's quota admission condition."""
    found = [c for c in pod.raw.get("status", {}).get("conditions") or () if c.get("type") == CONDITION]
    return found[0].get("status") if found else None


def _pools_on_two_replicas(kube_client: kc.KubeClient, replicas: Replicas) -> tuple[str, str]:
    """Two pool names whose shards two different replicas hold."""
    space = replicas.space
    replicas.start()
    replicas.start()
    # Balanced, not merely shared: the first replica holds every shard until the second one's membership
    # is seen, and a shard still on its way over would let one replica serve both pools.
    half = SHARDS // 2
    wait_until(
        "both replicas hold half the shards",
        lambda: sorted(Counter(holders(kube_client, space.namespace).values()).values()) == [half, half],
    )
    held = holders(kube_client, space.namespace)
    first_holder, second_holder = sorted(set(held.values()))
    first = _pool_in(space, {s for s, h in held.items() if h == first_holder}, set())
    return first, _pool_in(space, {s for s, h in held.items() if h == second_holder}, {first})


def test_a_pod_spanning_replicas_is_passed_on_in_list_order_and_pool_limits_hold(
    kube_client: kc.KubeClient, backend: KubeBackend, replicas: Replicas
) -> None:
    space = replicas.space
    first, second = _pools_on_two_replicas(kube_client, replicas)
    backend.create(class_of(space))
    # One-GPU nodes: the first pool may launch two, then its limit says no and the rest go on.
    backend.create(pool_of(space, first, instance_types=("g5.xlarge",), limits={"nvidia.com/gpu": "2"}))
    backend.create(pool_of(space, second, instance_types=("g5.xlarge",)))
    spanning = {"provisioner.sh/nodepools": f"{first},{second}"}
    for i in range(5):
        backend.create(gpu_pod(f"train-{i}", namespace=space.namespace, annotations=spanning))
    binder = binder_of(backend, space)
    wait_until("every pod bound", lambda: all_bound(backend, space), step=settle(backend, binder), limit=120)
    by_pool: dict[str, int] = {}
    for claim in claims_of(backend, space):
        by_pool[claim.nodepool or ""] = by_pool.get(claim.nodepool or "", 0) + 1
    assert by_pool == {first: 2, second: 3}, "the first pool up to its limit, the rest in the second"
    # The binder may put any of these alike pods on any of the nodes, so count the pods passed on: the
    # three the first pool's limit left out, each named once by the first pool's replica.
    passed = [p for p in pods_of(backend, space) if p.annotations.get(model.TRIED)]
    assert [p.annotations[model.TRIED] for p in passed] == [first] * 3
    assert_each_claim_launched_once_and_nothing_orphaned(backend, replicas)
    # Passed on, each was labelled for the second pool's shard, whose holder watched and took it; bound,
    # each carries its node's shard.
    wait_until(
        "every pod labelled with its node's shard", lambda: labelled_by_their_nodes_shard(backend, space)
    )


def test_a_teams_quota_over_pools_of_two_replicas_is_never_exceeded(
    kube_client: kc.KubeClient, backend: KubeBackend, replicas: Replicas
) -> None:
    space = replicas.space
    first, second = _pools_on_two_replicas(kube_client, replicas)
    quota = [
        {"nodePool": pool, "resources": {"nvidia.com/gpu": "1"}, "overQuota": False}
        for pool in (first, second)
    ]
    backend.create(class_of(space))
    for pool in (first, second):
        backend.create(pool_of(space, pool, instance_types=("g5.xlarge",)))
    team = space.own(space.name("vision"))
    backend.create(
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "Team",
            "metadata": {"name": team},
            "spec": {"namespaces": [team], "quotas": quota},
        }
    )
    for i in range(4):
        doc = gpu_pod(
            f"train-{i}", namespace=team, annotations={"provisioner.sh/nodepools": f"{first},{second}"}
        )
        doc["spec"]["schedulingGates"] = [{"name": "provisioner.sh/admission"}]
        backend.create(doc)
    binder = binder_of(backend, space)
    over: list[tuple[int, list[str]]] = []

    def look() -> None:
        # At every look, not only at the end: more than two pods admitted, or two claims in one pool.
        admitted = sum(1 for p in pods_of(backend, space) if not p.gated)
        pools = sorted(c.nodepool or "" for c in claims_of(backend, space))
        if admitted > 2 or len(pools) != len(set(pools)):
            over.append((admitted, pools))

    step = in_turn(settle(backend, binder), look)

    def two_bound() -> bool:
        return sum(1 for p in pods_of(backend, space) if p.node_name) >= 2 or bool(over)

    wait_until("two pods admitted and bound", two_bound, step=step, limit=120)

    def refused_twice() -> bool:
        return [_admitted(p) for p in pods_of(backend, space)].count("False") == 2 or bool(over)

    wait_until("the other two told they wait for quota", refused_twice, step=step)
    look()
    assert not over, f"the team's quota exceeded (pods admitted, claims' pools): {over[:3]}"
    pods = pods_of(backend, space)
    assert sum(1 for p in pods if p.node_name) == 2 and sum(1 for p in pods if p.gated) == 2
    assert sorted(c.nodepool or "" for c in claims_of(backend, space)) == sorted([first, second])
    assert_each_claim_launched_once_and_nothing_orphaned(backend, replicas)
    # The quota admission holder watches the team's namespace whole (its quota counts its pods in every
    # pool), the others only their shards' pods.
    wait_until(
        f"the admission holder watching namespace {team}",
        lambda: each_watches_its_shards(kube_client, replicas, namespaces=[team]),
    )
