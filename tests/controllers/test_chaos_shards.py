"""The sharded runs of the reliability campaign (bench/chaos_shards.py, bench/chaos_fleet.py): what a seed
draws, how the fleet restarts its replicas, and how the campaign reads the shard Leases and the `Nominated`
Events it judges by (in a namespace of the test's own, so on a real cluster too). The runs themselves are
processes: `.ci/run` runs one (`bench/chaos.py --sharded --quick`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from bench import chaos, chaos_fleet, chaos_shards
from provisioner.clock import isoformat
from provisioner.crashpoints import POINTS
from provisioner.kube import client as kc
from provisioner.kube.shards import MEMBER_LABEL
from provisioner.scheduling import shards as model
from testkit.controllers.space import Space


def test_a_seed_draws_the_same_plan_every_time_and_seeds_differ() -> None:
    plans = [chaos_shards.plan(seed, 3) for seed in range(20)]
    assert plans == [chaos_shards.plan(seed, 3) for seed in range(20)]
    assert len({(p.events, p.crash_at) for p in plans}) > 10
    for p in plans:
        assert p.crash_at.split(":")[0] in POINTS
        assert 0 <= p.crash_slot < 3
        assert [e.at for e in p.events] == sorted(e.at for e in p.events)
        assert 3 <= len(p.events) <= 5 and {e.kind for e in p.events} <= {"kill", "leave", "join"}
        assert p.second_wave_at <= p.events[-1].at
    assert {e.kind for p in plans for e in p.events} == {"kill", "leave", "join"}


def test_the_pools_lie_one_on_each_shard() -> None:
    names = chaos_shards.pools()
    assert sorted(model.shard_of(n, chaos_fleet.SHARDS) for n in names) == list(range(chaos_fleet.SHARDS))


def test_the_sharded_campaign_runs_two_and_three_replicas_per_seed_and_ci_runs_one() -> None:
    assert chaos.campaign_runs(["fake", "aws"], quick=True, seeds=10, sharded=True) == [
        ("fake", 0, "replicas-3")
    ]
    runs = chaos.campaign_runs(["fake"], quick=False, seeds=2, first_seed=5, sharded=True)
    assert runs == [("fake", s, f"replicas-{n}") for s in (5, 6) for n in (2, 3)]


def test_a_failing_run_says_how_to_replay_it() -> None:
    sharded = chaos.RunResult(cloud="fake", seed=7, point="replicas-2", nominated_twice=1)
    assert sharded.bad
    assert sharded.replay() == (
        "python bench/chaos.py --sharded --first-seed 7 --seeds 1 --points replicas-2 --no-suites"
    )
    crash = chaos.RunResult(cloud="aws", seed=3, point="launch-called:2", shards_unsettled=1)
    assert crash.bad
    assert crash.replay() == (
        "python bench/chaos.py --clouds aws --first-seed 3 --seeds 1 --points launch-called:2 --no-suites"
    )
    assert not chaos.RunResult(cloud="fake", seed=0, point="replicas-3", shard_settle_seconds=9.0).bad


class _Running:
    """A replica process that is still running."""

    returncode = None

    def poll(self) -> None:
        return None


def _fleet(*hosts: str) -> chaos_fleet.Fleet:
    fleet = chaos_fleet.Fleet(url="", cloud=cast(Any, None), ledger="", logs=cast(Any, None), flags=[])
    for i, host in enumerate(hosts):
        slot, starts = (int(x) for x in host.removeprefix("r").split("-"))
        r = chaos_fleet.Replica(slot=slot, starts=starts, proc=cast(Any, _Running()))
        fleet.replicas.append(r)
        assert r.host == host, i
    return fleet


def test_the_shards_are_settled_only_when_the_live_replicas_hold_them_as_assigned() -> None:
    fleet = _fleet("r0-1", "r1-2")
    members = ["r0-1-aaaaaa", "r1-2-bbbbbb"]
    assigned = model.assign(chaos_fleet.SHARDS, members)
    assert chaos_fleet.settled(fleet, assigned, members) == ""
    # A killed replica's member Lease still runs: its shards have not moved yet.
    assert "members" in chaos_fleet.settled(fleet, assigned, [*members, "r2-1-cccccc"])
    # A replica that is running but not a member yet.
    assert "members" in chaos_fleet.settled(fleet, assigned, members[:1])
    # A shard nobody holds, or held by a replica it is not assigned to.
    everything = dict.fromkeys(range(chaos_fleet.SHARDS), members[0])
    assert "shards held" in chaos_fleet.settled(fleet, everything, members), "one replica above its share"
    assert "shards held" in chaos_fleet.settled(fleet, {s: h for s, h in assigned.items() if s}, members)


class _Exited:
    """A replica process that has exited with `returncode`."""

    def __init__(self, returncode: int) -> None:
        self.returncode = returncode

    def poll(self) -> int:
        return self.returncode


class _Restarts(chaos_fleet.Fleet):
    """A fleet whose starts are only recorded (no process)."""

    def start(self, r: chaos_fleet.Replica) -> None:
        r.starts += 1
        r.proc = cast(Any, _Running())
        r.back_at, r.leaving = None, False


def test_a_replica_dead_at_its_crash_point_is_started_again_and_any_other_death_is_a_problem() -> None:
    fleet = _Restarts(url="", cloud=cast(Any, None), ledger="", logs=cast(Any, None), flags=[])
    crashed = chaos_fleet.Replica(slot=0, starts=1, proc=cast(Any, _Exited(-9)), crash_at="launch-called:1")
    failed = chaos_fleet.Replica(slot=1, starts=1, proc=cast(Any, _Exited(1)))
    left = chaos_fleet.Replica(slot=2, starts=1, proc=cast(Any, _Exited(-15)), leaving=True, back_at=1e12)
    fleet.replicas += [crashed, failed, left]
    fleet.tick()
    assert fleet.crashes == 2 and fleet.problems == ["replica r1-1 exited 1 on its own"]
    assert (crashed.starts, crashed.crash_at, failed.starts) == (2, None, 2), "both started again, disarmed"
    assert left.starts == 1 and not left.leaving, "a replica that left comes back only at its time"
    left.back_at = 0.0
    fleet.tick()
    assert left.starts == 2 and fleet.crashes == 2


def test_a_replica_told_to_leave_that_dies_at_its_crash_point_on_the_way_out_is_a_crash() -> None:
    fleet = _Restarts(url="", cloud=cast(Any, None), ledger="", logs=cast(Any, None), flags=[])
    armed = chaos_fleet.Replica(
        slot=0, starts=1, proc=cast(Any, _Exited(-9)), leaving=True, back_at=1e12, crash_at="status-written:1"
    )
    unarmed = chaos_fleet.Replica(slot=1, starts=1, proc=cast(Any, _Exited(-9)), leaving=True, back_at=1e12)
    fleet.replicas += [armed, unarmed]
    fleet.tick()
    assert fleet.crashes == 1 and armed.crash_at is None, "a crash, and disarmed"
    assert fleet.problems == ["replica r1-1 exited -9 on SIGTERM"], "killed with no crash point: a problem"
    assert armed.starts == unarmed.starts == 1, "each comes back only at its time"


def _lease(
    namespace: str, name: str, holder: str, renewed: datetime, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": chaos_fleet.LEASE,
            "acquireTime": isoformat(renewed).replace("Z", ".000000Z"),
            "renewTime": isoformat(renewed).replace("Z", ".000000Z"),
        },
    }


def test_only_leases_renewed_within_their_duration_count(kube_client: kc.KubeClient, space: Space) -> None:
    now = datetime.now(UTC)
    stale = now - timedelta(seconds=chaos_fleet.LEASE + 60)
    member = {MEMBER_LABEL: "provisioner"}
    ns = space.namespace
    for doc in (
        _lease(ns, "provisioner-shard-0", "r0-1-aaaaaa", now),
        _lease(ns, "provisioner-shard-1", "r1-1-bbbbbb", stale),
        _lease(ns, "provisioner-member-r0-1-aaaaaa", "r0-1-aaaaaa", now, member),
        _lease(ns, "provisioner-member-r1-1-bbbbbb", "r1-1-bbbbbb", stale, member),
        _lease(ns, "provisioner-admission", "r1-1-bbbbbb", now),
    ):
        kube_client.create(kc.LEASE, doc, namespace=ns)
    assert chaos_fleet.leases(kube_client, ns) == ({0: "r0-1-aaaaaa"}, ["r0-1-aaaaaa"])


def test_a_pod_nominated_to_two_claims_is_found(kube_client: kc.KubeClient, space: Space) -> None:
    ns = space.namespace

    def nominated(pod: str, claim: str, i: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod}.{i}", "namespace": ns},
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns, "apiVersion": "v1"},
            "reason": "Nominated",
            "message": f"Pod should schedule on: nodeclaim/{claim}",
            "type": "Normal",
        }

    for i, (pod, claim) in enumerate([("a", "gpu-1"), ("a", "gpu-1"), ("b", "gpu-2"), ("b", "gpu-3")]):
        kube_client.create(kc.EVENT, nominated(pod, claim, i), namespace=ns)
    assert chaos_shards.nominations(kube_client, [ns]) == {
        f"{ns}/a": {"gpu-1"},
        f"{ns}/b": {"gpu-2", "gpu-3"},
    }
