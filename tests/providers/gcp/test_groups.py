"""Group launches on GCP: one instances.bulkInsert with minCount for a gang, each member read back with
its claim, a result short of minCount deleted, and compact placement policies (existing or per gang,
collected) with the topology labels Compute Engine reports. Real client, real HTTP, the stand-in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from providers.gcp import GCPProvider
from providers.gcp.model import GCPNodeClass
from provisioner.api import labels as wk
from provisioner.cloudprovider import CreateError, GangPlacement, Instance, InsufficientCapacity, OfferingKey
from testkit.builders import node_claim
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import gcp_node_class
from testkit.typed import present

H100 = "a3-highgpu-8g"
LATER = datetime.now(UTC) + timedelta(days=1)


def gang(
    provider: GCPProvider,
    prefix: str,
    size: int,
    nc: GCPNodeClass | None = None,
    placement: GangPlacement | None = None,
    **claim: Any,
) -> list[Instance]:
    nc = nc or gcp_node_class()
    claims = [node_claim(f"{prefix}-{i}", [H100], node_class=nc, **claim) for i in range(size)]
    return provider.create_group(claims, provider.instance_types(nc), nc, placement=placement)


def zones_of(provider: GCPProvider) -> list[str]:
    return sorted(
        {o.zone for t in provider.instance_types(gcp_node_class()) if t.name == H100 for o in t.offerings}
    )


def test_a_gang_is_one_bulk_insert_with_min_count_and_each_member_knows_its_claim(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    instances = gang(provider, "train", 4, placement=GangPlacement(gang="ml/train"))

    assert len(standin.calls("instances.bulkInsert")) == 1
    assert standin.calls("instances.insert") == []
    assert [i.nodeclaim for i in instances] == ["train-0", "train-1", "train-2", "train-3"]
    assert len({i.zone for i in instances}) == 1
    assert {i.instance_type for i in instances} == {H100}
    listed = {i.nodeclaim: i for i in provider.list()}
    assert sorted(listed, key=str) == ["train-0", "train-1", "train-2", "train-3"]
    raw = standin.instance(instances[0].provider_id.rsplit("/", 1)[1])
    meta = {item["key"]: item["value"] for item in raw["metadata"]["items"]}
    assert json.loads(meta["provisioner-gang-members"])[raw["name"]] == "train-0"
    assert raw["labels"]["provisioner-gang"].startswith("ml-train")


def test_min_count_is_all_or_nothing_and_the_gang_moves_to_a_zone_with_room(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    zones = sorted(
        {o.zone for t in provider.instance_types(gcp_node_class()) if t.name == H100 for o in t.offerings}
    )
    standin.set_capacity(machine_type=H100, zone=zones[0], count=3)

    instances = gang(provider, "big", 4, zones=tuple(zones[:2]))

    assert {i.zone for i in instances} == {zones[1]}
    assert len(standin.calls("instances.bulkInsert")) == 2
    assert OfferingKey(H100, zones[0], wk.CAPACITY_TYPE_ON_DEMAND) in instances[0].skipped


def test_a_bulk_insert_that_ignores_min_count_is_deleted_before_the_error(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    zone = zones_of(provider)[0]
    standin.ignore_min_count()
    standin.set_capacity(machine_type=H100, zone=zone, count=2)

    with pytest.raises(InsufficientCapacity) as caught:
        gang(provider, "short", 3, zones=(zone,))

    assert caught.value.offerings == [OfferingKey(H100, zone, wk.CAPACITY_TYPE_ON_DEMAND)]
    (partial,) = caught.value.partial
    assert len(partial.provider_ids) == 2 and partial.price > 0
    assert standin.launches() == 2
    assert provider.list() == []


def test_a_compact_policy_per_gang_is_created_used_labelled_and_collected(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    nc = gcp_node_class(placement={"compactPerGang": True})

    instances = gang(provider, "llama", 2, nc=nc, placement=GangPlacement(gang="ml/llama"))

    names = {present(i.placement_group) for i in instances}
    (name,) = names
    policy = standin.resource_policy(name)
    assert policy is not None
    assert policy["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    for instance in provider.list():
        assert instance.labels["cloud.google.com/gce-topology-block"]
        assert instance.labels["cloud.google.com/gce-topology-subblock"]
        assert instance.labels["cloud.google.com/gce-topology-host"]
    assert provider.collect_placement(older_than=LATER) == []

    for instance in instances:
        provider.delete(instance.provider_id)
    assert provider.collect_placement(older_than=LATER) == [name]
    assert standin.resource_policy(name) is None


def test_an_existing_policy_is_named_and_an_unknown_one_is_a_create_error(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    with pytest.raises(CreateError):
        gang(provider, "missing", 2, nc=gcp_node_class(placement={"policy": "no-such-policy"}))
    assert provider.list() == []


def test_a_retry_that_a_lagging_listing_misleads_finds_the_gang_instead_of_launching_it_again(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    zone = zones_of(provider)[0]
    first = gang(provider, "lag", 2, zones=(zone,))
    standin.stale_aggregated_instances()  # the listing does not show them yet

    again = gang(provider, "lag", 2, zones=(zone,))

    assert [i.provider_id for i in again] == [i.provider_id for i in first]
    assert standin.launches() == 2
