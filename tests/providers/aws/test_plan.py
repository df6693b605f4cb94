"""The launch plan, pure: which offerings a claim may use and in which CreateFleet requests they go."""

from __future__ import annotations

import pytest

from providers.aws import launch
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.cloudprovider import GPU, InstanceType, Offering, OfferingKey
from testkit.builders import node_claim
from testkit.providers.aws import world

SPOT, OD = wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND
SUBNETS = [
    launch.Subnet("subnet-a", "z-a", 10),
    launch.Subnet("subnet-a2", "z-a", 200),
    launch.Subnet("subnet-b", "z-b", 5),
]


def itype(name: str, prices: dict[tuple[str, str], float], *, arch: str = "amd64") -> InstanceType:
    return InstanceType(
        name=name,
        capacity={"cpu": 2000},
        offerings=tuple(Offering(zone=z, capacity_type=ct, price=p) for (z, ct), p in prices.items()),
        labels={wk.ARCH: arch},
    )


def claim(
    options: list[str], capacity_types: tuple[str, ...] = (SPOT, OD), zones: tuple[str, ...] | None = None
) -> NodeClaim:
    return node_claim("c", options, node_class=world.node_class(), capacity_types=capacity_types, zones=zones)


def test_one_subnet_per_zone_the_one_with_most_free_addresses() -> None:
    assert {z: s.id for z, s in launch.pick_subnets(SUBNETS).items()} == {
        "z-a": "subnet-a2",
        "z-b": "subnet-b",
    }


def plan(
    claim: NodeClaim, types: list[InstanceType], image_keys: frozenset[str] = frozenset({"amd64"})
) -> launch.LaunchPlan:
    return launch.plan(claim, types, subnets=SUBNETS, image_keys=set(image_keys))


def offerings(p: launch.LaunchPlan) -> list[launch.Candidate]:
    return [c for a in p.attempts for c in a.candidates]


def test_spot_goes_first_when_cheaper_then_on_demand() -> None:
    t = itype("m", {("z-a", SPOT): 0.03, ("z-b", SPOT): 0.04, ("z-a", OD): 0.1, ("z-b", OD): 0.1})

    attempts = plan(claim(["m"]), [t]).attempts

    assert [a.capacity_type for a in attempts] == [SPOT, OD]
    assert [c.zone for c in attempts[0].candidates] == ["z-a", "z-b"]
    assert [c.subnet_id for c in attempts[0].candidates] == ["subnet-a2", "subnet-b"]


def test_on_demand_goes_first_when_spot_is_dearer() -> None:
    t = itype("m", {("z-a", SPOT): 0.2, ("z-a", OD): 0.1})

    assert [a.capacity_type for a in plan(claim(["m"]), [t]).attempts] == [OD, SPOT]


def test_a_spot_type_dearer_than_the_cheapest_on_demand_waits_in_a_later_request() -> None:
    # The shared launch order cuts into one CreateFleet per run of one capacity type. (Before it, the
    # AWS provider put every spot override in the first request, a 5 $/h spot type before 0.1 $/h
    # on-demand.)
    small = itype("small", {("z-a", SPOT): 0.03, ("z-a", OD): 0.1})
    big = itype("big", {("z-a", SPOT): 5.0, ("z-a", OD): 12.0})

    attempts = plan(claim(["small", "big"]), [small, big]).attempts

    assert [(a.capacity_type, [c.instance_type for c in a.candidates]) for a in attempts] == [
        (SPOT, ["small"]),
        (OD, ["small"]),
        (SPOT, ["big"]),
        (OD, ["big"]),
    ]


def test_a_claim_silent_on_capacity_type_may_launch_spot_as_the_scheduler_priced_it() -> None:
    # The claim admits what its requirements do not exclude (NodeClaim.admits), on every cloud. (The AWS
    # provider used to read silence as on-demand only, while the scheduler and the other providers read
    # it as any capacity type.)
    t = itype("m", {("z-a", SPOT): 0.03, ("z-a", OD): 0.1})
    silent = node_claim("c", ["m"], node_class=world.node_class(), capacity_types=None)

    assert [a.capacity_type for a in plan(silent, [t]).attempts] == [SPOT, OD]


@pytest.mark.parametrize(
    ("capacity_types", "zones", "expected"),
    [
        ((OD,), None, {("z-a", OD), ("z-b", OD)}),
        ((SPOT,), ("z-b",), {("z-b", SPOT)}),
        ((SPOT, OD), ("z-c",), set()),
    ],
    ids=["on-demand-only", "spot-in-b", "zone-without-subnet"],
)
def test_candidates_follow_the_claim_requirements(
    capacity_types: tuple[str, ...], zones: tuple[str, ...] | None, expected: set[tuple[str, str]]
) -> None:
    t = itype("m", {(z, ct): 0.1 for z in ("z-a", "z-b", "z-c") for ct in (SPOT, OD)})

    p = plan(claim(["m"], capacity_types, zones), [t])

    assert {(c.zone, c.capacity_type) for c in offerings(p)} == expected


def test_unavailable_offerings_are_named_not_tried() -> None:
    t = InstanceType(
        name="m",
        capacity={},
        offerings=(Offering("z-a", OD, 0.1, available=False), Offering("z-b", OD, 0.1)),
        labels={wk.ARCH: "amd64"},
    )

    p = plan(claim(["m"], (OD,)), [t])

    assert [c.zone for c in offerings(p)] == ["z-b"]
    assert p.unavailable == (OfferingKey("m", "z-a", OD),)


def test_only_the_claim_options_with_an_ami_for_their_arch_are_candidates() -> None:
    types = [
        itype("x86", {("z-a", OD): 0.1}),
        itype("arm", {("z-a", OD): 0.05}, arch="arm64"),
        itype("other", {("z-a", OD): 0.01}),
    ]

    p = plan(claim(["x86", "arm"], (OD,)), types)

    assert [c.instance_type for c in offerings(p)] == ["x86"]
    assert p.image_keys == {"amd64"}


def test_a_request_holds_at_most_60_overrides_the_cheapest() -> None:
    types = [itype(f"t{i}", {("z-a", OD): 1.0 + i, ("z-b", OD): 1.5 + i}) for i in range(40)]
    (attempt,) = plan(claim([t.name for t in types], (OD,)), types).attempts
    request = launch.fleet_request(attempt, launch_templates={"amd64": "lt"}, tags={"k": "v"})

    overrides = request["LaunchTemplateConfigs"][0]["Overrides"]
    assert len(overrides) == 60
    assert overrides[0] == {"InstanceType": "t0", "SubnetId": "subnet-a2", "Priority": 0.0}
    # The 60 cheapest of the 80 offerings: t0 to t29, in both zones.
    assert {c.instance_type for c in attempt.candidates} == {f"t{i}" for i in range(30)}
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}


@pytest.mark.parametrize(
    ("gpu", "keys", "expected"),
    [
        (True, {"amd64", "amd64/nvidia"}, "amd64/nvidia"),
        (False, {"amd64", "amd64/nvidia"}, "amd64"),
        (True, {"amd64"}, "amd64"),
        (False, {"arm64"}, None),
    ],
    ids=["gpu-boots-nvidia", "cpu-boots-standard", "gpu-without-variant", "no-image-for-arch"],
)
def test_image_key_picks_the_accelerated_image_for_nvidia_types(
    gpu: bool, keys: set[str], expected: str | None
) -> None:
    t = InstanceType(
        name="t",
        capacity={},
        labels={wk.ARCH: "amd64"},
        gpu=GPU(name="h100", count=8, memory_mib=81920) if gpu else None,
    )

    assert launch.image_key(t, keys) == expected
