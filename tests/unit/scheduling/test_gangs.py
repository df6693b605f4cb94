"""Gangs in the solver: a Kueue pod group is placed whole, in one zone, on one group offering, or not at
all, and every member of a gang left out says why."""

from __future__ import annotations

import pytest

from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.scheduling import SolveOptions
from testkit.builders import (
    ZONES,
    gang_pods,
    gpu_pod,
    instance_type,
    node,
    node_pool,
    pod,
    reasons_of,
    run,
    snapshot,
)


def h100(*, unavailable: tuple[tuple[str, str], ...] = ()) -> list[InstanceType]:
    return [
        instance_type(
            "p5.48xlarge",
            cpu=192,
            memory_gib=2048,
            gpus=8,
            gpu_name="h100",
            gpu_memory_mib=81920,
            price=55.0,
            unavailable=unavailable,
        )
    ]


def od_out(*zones: str) -> tuple[tuple[str, str], ...]:
    return tuple((z, wk.CAPACITY_TYPE_ON_DEMAND) for z in zones)


def capacity(zone: str, count: int) -> dict[OfferingKey, int]:
    return {OfferingKey("p5.48xlarge", zone, wk.CAPACITY_TYPE_ON_DEMAND): count}


def test_a_gang_with_room_gets_one_claim_per_member_in_one_zone_as_one_group() -> None:
    results = run(gang_pods(count=4), types=h100())
    assert len(results.new_claims) == 4
    assert {c.offering.zone for c in results.new_claims} == {"zone-a"}
    assert all(c.gang == "default/train" and c.gang_size == 4 for c in results.new_claims)
    zones = {r.values[0] for c in results.new_claims for r in c.requirements if r.key == wk.ZONE}
    assert zones == {"zone-a"}, "the claims pin the gang's zone, so the launch cannot spread them"
    [gang] = results.gangs
    assert (gang.state, gang.zone, gang.new_nodes, gang.fitting) == ("Placed", "zone-a", 4, 4)


def test_a_shortage_launches_nothing_for_any_member_and_each_says_how_many_fit() -> None:
    types = h100(unavailable=od_out("zone-b", "zone-c"))
    results = run(gang_pods(count=4), types=types, options=SolveOptions(capacity=capacity("zone-a", 3)))
    assert results.new_claims == []
    assert len(results.unschedulable) == 4
    for i in range(4):
        why = reasons_of(results, f"train-{i}")["default"]
        assert "needs all 4 pods placed together; 3 of 4 fit in zone-a" in why
        assert "p5.48xlarge on-demand in zone-a has 3 left, 4 needed" in why
    [gang] = results.gangs
    assert (gang.state, gang.fitting, gang.zone) == ("Unschedulable", 3, "zone-a")


def test_a_gang_moves_to_the_zone_with_room_for_all_of_it() -> None:
    cap = {**capacity("zone-a", 3), **capacity("zone-b", 4), **capacity("zone-c", 0)}
    results = run(gang_pods(count=4), types=h100(), options=SolveOptions(capacity=cap))
    assert len(results.new_claims) == 4
    assert {c.offering.zone for c in results.new_claims} == {"zone-b"}
    assert results.gangs[0].state == "Placed"


def test_other_pods_are_placed_when_a_gang_is_left_out() -> None:
    types = [*h100(unavailable=od_out(*ZONES)), instance_type("m.xlarge", cpu=4, memory_gib=16)]
    loose = pod("web", cpu="1")
    results = run([*gang_pods(count=2), loose], types=types)
    assert [p.name for c in results.new_claims for p in c.pods] == ["web"]
    assert {u.pod.name for u in results.unschedulable} == {"train-0", "train-1"}
    assert results.gangs[0].state == "Unschedulable"


def test_a_gang_whose_pods_do_not_all_exist_waits_and_launches_nothing() -> None:
    results = run(gang_pods(count=3, total=4), types=h100())
    assert results.new_claims == []
    why = reasons_of(results, "train-0")[""]
    assert "3 of its 4 pods exist" in why
    assert results.gangs[0].state == "Waiting"


def test_members_already_running_count_and_keep_the_rest_in_their_zone() -> None:
    running = gang_pods(count=2, total=4, node_name="gpu-1")
    snap = snapshot(
        [
            (
                node(
                    "gpu-1",
                    cpu=192,
                    memory_gib=2048,
                    gpus=16,
                    zone="zone-c",
                    instance="p5.48xlarge",
                    labels={wk.GPU_NAME: "h100"},
                ),
                running,
            )
        ]
    )
    pending = [
        gpu_pod(f"train-{i}", labels=dict(running[0].labels), annotations=dict(running[0].annotations))
        for i in (2, 3)
    ]
    results = run(pending, types=h100(), snap=snap)
    assert len(results.new_claims) == 2
    assert {c.offering.zone for c in results.new_claims} == {"zone-c"}
    assert results.gangs[0].running == 2


def test_a_gang_split_between_existing_room_and_new_nodes_stays_in_one_zone() -> None:
    # Room for one member on a node in zone-b; the cheapest new nodes would be in zone-a.
    snap = snapshot(
        [
            (
                node(
                    "gpu-b",
                    cpu=192,
                    memory_gib=2048,
                    gpus=8,
                    zone="zone-b",
                    instance="p5.48xlarge",
                    labels={wk.GPU_NAME: "h100"},
                ),
                [],
            )
        ]
    )
    results = run(gang_pods(count=3), types=h100(), snap=snap)
    zones = {c.offering.zone for c in results.new_claims}
    assert results.gangs[0].state == "Placed"
    assert zones == {"zone-b"} and len(results.new_claims) == 2
    assert [p.node for p in results.placements] == ["gpu-b"]


@pytest.mark.parametrize("count", [1, 2, 5], ids=["one", "two", "five"])
def test_every_member_of_a_placed_gang_is_in_one_group(count: int) -> None:
    results = run(gang_pods(count=count), types=h100(), pools=node_pool())
    assert sorted(p.name for c in results.new_claims for p in c.pods) == [f"train-{i}" for i in range(count)]
    assert {c.gang_size for c in results.new_claims} == {count}


@pytest.mark.parametrize("seed", range(12), ids=lambda s: f"seed{s}")
def test_every_gang_is_placed_whole_in_one_zone_or_not_at_all(seed: int) -> None:
    import random

    rng = random.Random(seed)
    cap = {**{k: v for z in ZONES for k, v in capacity(z, rng.randint(0, 5)).items()}}
    pods = []
    for n in range(rng.randint(1, 4)):
        pods += gang_pods(f"g{n}", rng.randint(1, 5), gpus=rng.choice([4, 8]))
    pods += [pod(f"web-{i}", cpu="1") for i in range(rng.randint(0, 3))]
    types = [*h100(), instance_type("m.xlarge", cpu=4, memory_gib=16)]
    results = run(pods, types=types, options=SolveOptions(capacity=cap))
    where: dict[str, set[str]] = {}
    placed: dict[str, int] = {}
    for c in results.new_claims:
        for p in c.pods:
            group = p.labels.get(wk.KUEUE_POD_GROUP_NAME)
            if group:
                where.setdefault(group, set()).add(c.offering.zone)
                placed[group] = placed.get(group, 0) + 1
    for g in results.gangs:
        group = g.name.split("/")[1]
        if g.state == "Placed":
            assert placed[group] == len(g.members) and len(where[group]) == 1
        else:
            assert group not in placed, f"{g.name} has members placed while {g.state}"
    # Within each offering, the gangs' new nodes together never exceed what it has left.
    used: dict[str, int] = {}
    for c in results.new_claims:
        if c.gang:
            used[c.offering.zone] = used.get(c.offering.zone, 0) + 1
    for zone, n in used.items():
        assert n <= cap[OfferingKey("p5.48xlarge", zone, wk.CAPACITY_TYPE_ON_DEMAND)]
