"""Group launches on EC2 over real HTTP (moto behind the fault proxy, which enforces what moto ignores):
one CreateFleet with MinTargetCapacity for a whole gang, its members tagged with their claims, a short
fleet terminated, and cluster placement groups (existing, or created per gang and collected)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from providers.aws import AWSProvider
from providers.aws.group import LAUNCH_GROUP
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.cloudprovider import (
    CreateError,
    GangPlacement,
    InstanceType,
    InsufficientCapacity,
    OfferingKey,
    TransientError,
)
from testkit.builders import node_claim
from testkit.providers.aws import world
from testkit.providers.aws.faults import FaultProxy
from testkit.typed import present

ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND
A, B = "us-east-1a", "us-east-1b"
LATER = datetime.now(UTC) + timedelta(days=1)


def options(provider: AWSProvider, node_class: Any, names: list[str]) -> list[InstanceType]:
    types = {t.name: t for t in provider.instance_types(node_class)}
    return [types[n] for n in names]


def gang(node_class: Any, prefix: str, size: int, names: list[str], **claim: Any) -> list[NodeClaim]:
    return [node_claim(f"{prefix}-{i}", names, node_class=node_class, **claim) for i in range(size)]


def tags_of(ec2: Any, provider_id: str) -> dict[str, str]:
    raw = ec2.describe_instances(InstanceIds=[provider_id.rsplit("/", 1)[1]])["Reservations"][0]["Instances"][
        0
    ]
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def test_a_gang_is_one_fleet_asking_ec2_for_all_or_nothing_and_each_member_is_tagged_with_its_claim(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    claims = gang(account.node_class, "train", 4, ["p5.48xlarge"], zones=(A, B))

    instances = provider.create_group(
        claims,
        options(provider, account.node_class, ["p5.48xlarge"]),
        account.node_class,
        placement=GangPlacement(gang="ml/train"),
    )

    (fleet,) = proxy.fleet_calls
    assert (fleet.total, fleet.min_target) == (4, 4)
    assert len({i.provider_id for i in instances}) == 4
    for claim, instance in zip(claims, instances, strict=True):
        tags = tags_of(ec2, instance.provider_id)
        assert tags[wk.NODECLAIM] == claim.name == instance.nodeclaim
        assert tags[wk.CLUSTER] == "contract"
        assert tags[wk.GANG] == "ml/train"
        assert LAUNCH_GROUP in tags
    assert {i.nodeclaim for i in provider.list()} == {c.name for c in claims}


def test_a_short_fleet_is_terminated_and_the_gang_launches_whole_in_the_next_zone(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.partial_fleets = True  # an EC2 that ends partial despite MinTargetCapacity
    proxy.set_capacity(instance_type="p5.48xlarge", zone=A, capacity_type=ON_DEMAND, count=3)
    claims = gang(account.node_class, "short", 4, ["p5.48xlarge"], zones=(A, B))
    types = options(provider, account.node_class, ["p5.48xlarge"])

    instances = provider.create_group(claims, types, account.node_class)

    first, second = proxy.fleet_calls
    assert len(first.launched) == 3 and set(first.launched) <= proxy.terminated
    assert {i.zone for i in instances} == {B}
    (partial,) = instances[0].partial  # for the ledger: what the short attempt billed
    assert partial.offering == OfferingKey("p5.48xlarge", A, ON_DEMAND)
    assert sorted(p.rsplit("/", 1)[1] for p in partial.provider_ids) == sorted(first.launched)
    assert partial.price == present(types[0].cheapest(zones={A}, capacity_types={ON_DEMAND})).price
    assert all(i.partial == () for i in instances[1:])
    assert {i.provider_id.rsplit("/", 1)[1] for i in provider.list()} == set(second.launched)


def test_an_existing_placement_group_is_named_in_every_override(
    new_provider: Any, account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    ec2_proxy = new_provider().sdk.ec2
    ec2_proxy.create_placement_group(GroupName="training-pg", Strategy="cluster")
    node_class = world.node_class(placement={"groupName": "training-pg"})
    provider = new_provider()

    instances = provider.create_group(
        gang(node_class, "pg", 2, ["p5.48xlarge"]), options(provider, node_class, ["p5.48xlarge"]), node_class
    )

    assert {i.placement_group for i in instances} == {"training-pg"}
    assert {i.placement_group for i in provider.list()} == {"training-pg"}


def test_an_unknown_placement_group_is_a_create_error_naming_it(
    provider: AWSProvider, account: world.World
) -> None:
    node_class = world.node_class(placement={"groupName": "no-such-pg"})

    with pytest.raises(CreateError, match="no-such-pg"):
        provider.create_group(
            gang(node_class, "pg", 2, ["p5.48xlarge"]),
            options(provider, node_class, ["p5.48xlarge"]),
            node_class,
        )
    assert provider.list() == []


def test_a_placement_group_per_gang_is_created_tagged_and_collected_once_its_nodes_are_gone(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    node_class = world.node_class(placement={"groupPerGang": True})
    placement = GangPlacement(gang="ml/llama")
    instances = provider.create_group(
        gang(node_class, "llama", 2, ["p5.48xlarge"]),
        options(provider, node_class, ["p5.48xlarge"]),
        node_class,
        placement=placement,
    )
    (name,) = proxy.placement_groups
    group = proxy.placement_groups[name]

    assert {i.placement_group for i in instances} == {name}
    assert group.strategy == "cluster"
    assert group.tags[wk.CLUSTER] == "contract" and group.tags[wk.GANG] == "ml/llama"
    assert provider.collect_placement(older_than=LATER) == []  # its nodes still run

    provider.delete(instances[0].provider_id)
    assert provider.collect_placement(older_than=LATER) == []
    provider.delete(instances[1].provider_id)
    assert provider.collect_placement(older_than=datetime(2000, 1, 1, tzinfo=UTC)) == []  # too young
    assert provider.collect_placement(older_than=LATER) == [name]
    assert proxy.placement_groups == {}


def test_a_gang_that_fits_nowhere_names_every_offering_and_leaves_no_placement_group_in_use(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    for zone in account.zones:
        proxy.set_capacity(instance_type="p5.48xlarge", zone=zone, capacity_type=ON_DEMAND, count=1)
    node_class = world.node_class(placement={"groupPerGang": True})

    with pytest.raises(InsufficientCapacity) as caught:
        provider.create_group(
            gang(node_class, "none", 2, ["p5.48xlarge"]),
            options(provider, node_class, ["p5.48xlarge"]),
            node_class,
            placement=GangPlacement(gang="ml/none"),
        )

    assert len(caught.value.offerings) == len(account.zones)
    assert provider.list() == []
    assert len(provider.collect_placement(older_than=LATER)) == 1


def test_nodes_of_a_gang_carry_the_network_nodes_ec2_reports_and_no_labels_when_refused(
    new_provider: Any, account: world.World, proxy: FaultProxy
) -> None:
    node_class = world.node_class(placement={"groupPerGang": True})
    provider = new_provider()
    provider.create_group(
        gang(node_class, "topo", 3, ["p5.48xlarge"]),
        options(provider, node_class, ["p5.48xlarge"]),
        node_class,
        placement=GangPlacement(gang="ml/topo"),
    )

    listed = provider.list()
    proxy.fail_next("DescribeInstanceTopology", status=403, code="UnauthorizedOperation")
    without = new_provider().list()

    layers = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)]
    for instance in listed:
        nodes = proxy.fleet_instances[instance.provider_id.rsplit("/", 1)[1]].network_nodes
        assert [instance.labels[k] for k in layers] == nodes
    assert len({i.labels[layers[1]] for i in listed}) == 1, "one placement group, one layer-2 node"
    assert [i.labels for i in without] == [{}, {}, {}]
    assert proxy.actions.count("DescribeInstanceTopology") == 2  # once each: answers are kept
    provider.list()
    assert proxy.actions.count("DescribeInstanceTopology") == 2


def test_an_efa_node_class_offers_the_efa_resource_on_efa_types_and_launches_with_efa_interfaces(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    efa_class = world.node_class("efa", placement={"efa": True, "groupPerGang": True})
    types = {t.name: t for t in provider.instance_types(efa_class)}
    plain = {t.name: t for t in provider.instance_types(account.node_class)}

    provider.create_group(
        gang(efa_class, "efa", 2, ["p5.48xlarge"]),
        [types["p5.48xlarge"]],
        efa_class,
        placement=GangPlacement(gang="ml/efa"),
    )

    assert types["p5.48xlarge"].capacity[wk.EFA_RESOURCE] == 32
    assert types["p5.48xlarge"].allocatable[wk.EFA_RESOURCE] == 32
    assert wk.EFA_RESOURCE not in types["m5.large"].capacity
    assert wk.EFA_RESOURCE not in plain["p5.48xlarge"].capacity
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    nics = data["NetworkInterfaces"]
    assert len(nics) == 32
    assert {n["InterfaceType"] for n in nics} == {"efa"}
    assert [(n["NetworkCardIndex"], n["DeviceIndex"]) for n in nics[:2]] == [(0, 0), (1, 1)]
    assert "SecurityGroupIds" not in data


def test_members_left_without_their_claim_tag_by_a_failure_are_adopted_by_the_retry(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    claims = gang(account.node_class, "adopt", 3, ["m5.large"])
    types = options(provider, account.node_class, ["m5.large"])
    proxy.fail_next("CreateTags", status=503, code="ServiceUnavailable")

    with pytest.raises(TransientError):
        provider.create_group(claims, types, account.node_class)
    (fleet,) = proxy.fleet_calls
    untagged = [tags_of(ec2, f"aws:///x/{i}") for i in fleet.launched]
    assert all(wk.NODECLAIM not in t and t[wk.CLUSTER] == "contract" for t in untagged), "GC's to collect"

    instances = provider.create_group(claims, types, account.node_class)

    assert len(proxy.fleet_calls) == 1, "no second fleet: the first one's instances were adopted"
    assert sorted(i.provider_id.rsplit("/", 1)[1] for i in instances) == sorted(fleet.launched)
    assert sorted(i.nodeclaim or "" for i in provider.list()) == ["adopt-0", "adopt-1", "adopt-2"]


def test_a_gang_fills_a_reservation_with_room_for_all_of_it_and_skips_one_without(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    small = proxy.add_reservation(instance_type="p5.48xlarge", zone=A, count=1, tags={"for": "gangs"})
    big = proxy.add_reservation(instance_type="p5.48xlarge", zone=B, count=2, tags={"for": "gangs"})
    node_class = world.node_class(capacityReservationSelectorTerms=[{"tags": {"for": "gangs"}}])
    types = options(provider, node_class, ["p5.48xlarge"])
    claims = gang(
        node_class, "res", 2, ["p5.48xlarge"], capacity_types=(wk.CAPACITY_TYPE_RESERVED, ON_DEMAND)
    )

    instances = provider.create_group(claims, types, node_class)

    assert {(i.capacity_type, i.reservation_id) for i in instances} == {(wk.CAPACITY_TYPE_RESERVED, big.id)}
    assert (small.used, big.used) == (0, 2)
    assert proxy.fleet_calls == [], "reservations go through RunInstances, one per member"


def test_a_deleted_launch_template_is_made_again_by_the_retry(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    types = options(provider, account.node_class, ["m5.large"])
    provider.create_group(gang(account.node_class, "first", 2, ["m5.large"]), types, account.node_class)
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
    claims = gang(account.node_class, "second", 2, ["m5.large"])

    with pytest.raises(TransientError, match="launch template"):
        provider.create_group(claims, types, account.node_class)
    instances = provider.create_group(claims, types, account.node_class)

    assert [i.nodeclaim for i in instances] == ["second-0", "second-1"]
