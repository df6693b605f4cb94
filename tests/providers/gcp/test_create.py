"""Launching on GCP: what instances.insert receives, fallbacks across zones and capacity types within one
create, error classification, idempotency and waiting. Real client, real HTTP, local Compute stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from providers.gcp import GCPProvider
from provisioner.api import labels as wk
from provisioner.cloudprovider import (
    CreateError,
    Instance,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    TransientError,
)
from testkit.builders import node_claim
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import IMAGE, gcp_node_class, make_provider

SPOT_FIRST = (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)


def launch(provider: GCPProvider, name: str, options: list[str], **claim_kw: Any) -> Instance:
    nc = claim_kw.pop("node_class", None) or gcp_node_class()
    claim = node_claim(name, options, node_class=nc, **claim_kw)
    return provider.create(claim, provider.instance_types(nc), nc)


def instance_name(provider_id: str) -> str:
    return provider_id.rsplit("/", 1)[-1]


def test_a_claim_for_8_h100_on_spot_launches_a3_highgpu_8g_with_spot_settings(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    inst = launch(provider, "train-8xh100", ["a3-highgpu-8g"], capacity_types=SPOT_FIRST)
    assert (inst.instance_type, inst.capacity_type) == ("a3-highgpu-8g", wk.CAPACITY_TYPE_SPOT)
    assert inst.provider_id == f"gce://{standin.project}/{inst.zone}/{instance_name(inst.provider_id)}"
    body = standin.insert_body(instance_name(inst.provider_id))
    assert body["machineType"].endswith("/machineTypes/a3-highgpu-8g")
    assert body["scheduling"]["provisioningModel"] == "SPOT"
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "guestAccelerators" not in body  # a3 GPUs come with the machine type


def test_a_mig_pools_instance_tells_its_join_script_the_layout_label(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    nc = gcp_node_class()
    claim = node_claim("sliced", ["a3-highgpu-8g"], node_class=nc)
    claim.metadata.labels["nvidia.com/mig.config"] = "all-1g.10gb"
    inst = provider.create(claim, provider.instance_types(nc), nc)

    items = {
        i["key"]: i["value"]
        for i in standin.insert_body(instance_name(inst.provider_id))["metadata"]["items"]
    }
    assert items["provisioner-node-labels"] == "nvidia.com/mig.config=all-1g.10gb"


def test_an_n1_t4_type_launches_n1_with_guest_accelerators(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    inst = launch(provider, "infer-t4", ["n1-standard-8-t4x1"])
    assert inst.instance_type == "n1-standard-8-t4x1"
    body = standin.insert_body(instance_name(inst.provider_id))
    assert body["machineType"] == f"zones/{inst.zone}/machineTypes/n1-standard-8"
    assert body["guestAccelerators"] == [
        {"acceleratorType": f"zones/{inst.zone}/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}
    ]
    # GPUs cannot live-migrate: the stand-in refuses the insert otherwise, as Compute Engine does.
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "provisioningModel" not in body["scheduling"]


def test_on_demand_cpu_machines_keep_the_default_maintenance_policy(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    inst = launch(provider, "cpu-1", ["e2-standard-2"])
    assert inst.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND
    assert "onHostMaintenance" not in standin.insert_body(instance_name(inst.provider_id)).get(
        "scheduling", {}
    )


def test_the_cheapest_allowed_offering_is_launched(provider: GCPProvider) -> None:
    inst = launch(
        provider,
        "cheap",
        ["e2-standard-4", "e2-standard-2"],
        capacity_types=SPOT_FIRST,
        zones=("us-central1-c",),
    )
    assert (inst.instance_type, inst.zone, inst.capacity_type) == ("e2-standard-2", "us-central1-c", "spot")


def test_a_spot_stockout_falls_to_another_zone_then_to_on_demand_within_one_create(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.stockout(machine_type="a3-highgpu-8g", zone="us-central1-a", provisioning_model="SPOT")
    first = launch(provider, "h100-a", ["a3-highgpu-8g"], capacity_types=SPOT_FIRST)
    assert (first.zone, first.capacity_type) == ("us-central1-b", "spot")

    for zone in ("us-central1-b", "us-central1-c"):
        standin.stockout(machine_type="a3-highgpu-8g", zone=zone, provisioning_model="SPOT")
    inserts_before = len(standin.calls("instances.insert"))
    second = launch(provider, "h100-b", ["a3-highgpu-8g"], capacity_types=SPOT_FIRST)
    assert (second.zone, second.capacity_type) == ("us-central1-a", "on-demand")
    # Spot in a and b failed, c failed, then on-demand in a: all within this one create. Zone a's spot
    # was remembered from the first create, so it is not asked again.
    assert len(standin.calls("instances.insert")) - inserts_before == 3
    assert standin.launches() == 2


def test_a_stockout_answered_as_a_503_is_capacity_not_transient(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.stockout(machine_type="e2-standard-2", zone="us-central1-a", synchronous=True)
    inst = launch(provider, "sync-stockout", ["e2-standard-2"], zones=("us-central1-a", "us-central1-b"))
    assert inst.zone == "us-central1-b"
    assert [c.status for c in standin.calls("instances.insert")] == [503, 200]


def test_when_every_offering_is_out_insufficient_capacity_names_each_one(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    nc = gcp_node_class(zones=["us-central1-a", "us-central1-b"])
    for zone in nc.spec.zones:
        standin.stockout(machine_type="e2-standard-2", zone=zone, provisioning_model="STANDARD")
    with pytest.raises(InsufficientCapacity) as info:
        launch(provider, "nope", ["e2-standard-2"], node_class=nc)
    assert info.value.kind == "capacity"
    assert set(info.value.offerings) == {
        OfferingKey("e2-standard-2", "us-central1-a", "on-demand"),
        OfferingKey("e2-standard-2", "us-central1-b", "on-demand"),
    }
    assert standin.launches() == 0


def test_one_create_tries_a_bounded_number_of_offerings(standin: ComputeStandIn) -> None:
    provider = make_provider(standin, max_launch_attempts=3)
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        for model in ("SPOT", "STANDARD"):
            standin.stockout(machine_type="e2-standard-2", zone=zone, provisioning_model=model)
    with pytest.raises(InsufficientCapacity) as info:
        launch(provider, "bounded", ["e2-standard-2"], capacity_types=SPOT_FIRST)
    assert len(standin.calls("instances.insert")) == 3
    assert len(info.value.offerings) == 3


def test_quota_exceeded_gives_insufficient_capacity_of_kind_quota_without_trying_every_zone(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.quota_exceeded(machine_type="a3-highgpu-8g", provisioning_model="STANDARD")
    with pytest.raises(InsufficientCapacity) as info:
        launch(provider, "over-quota", ["a3-highgpu-8g"])
    assert info.value.kind == "quota"
    assert "QUOTA_EXCEEDED" in str(info.value)
    # Quota is regional: one refusal is enough to know the other zones will refuse too.
    assert len(standin.calls("instances.insert")) == 1
    assert {o.instance_type for o in info.value.offerings} == {"a3-highgpu-8g"}


def test_spot_quota_falls_back_to_on_demand(standin: ComputeStandIn, provider: GCPProvider) -> None:
    standin.quota_exceeded(machine_type="a3-highgpu-8g", provisioning_model="SPOT")
    inst = launch(provider, "spot-quota", ["a3-highgpu-8g"], capacity_types=SPOT_FIRST)
    assert inst.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND


def test_throttling_is_a_transient_error_after_one_call_without_client_retries(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.throttle(times=1, methods={"instances.insert"})
    with pytest.raises(TransientError, match="throttled"):
        launch(provider, "throttled", ["e2-standard-2"])
    assert [c.status for c in standin.calls("instances.insert")] == [429]
    # The next call (the retry wrapper's) goes through.
    assert launch(provider, "throttled", ["e2-standard-2"]).instance_type == "e2-standard-2"


def test_a_503_on_a_read_is_a_transient_error_not_a_600_second_client_retry(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    inst = launch(provider, "r1", ["e2-standard-2"])
    standin.fail_5xx(times=1)
    gets_before = len(standin.calls("instances.get"))
    with pytest.raises(TransientError):
        provider.get(inst.provider_id)
    assert len(standin.calls("instances.get")) == gets_before + 1
    assert provider.get(inst.provider_id).provider_id == inst.provider_id


def test_create_is_idempotent_by_claim_name(standin: ComputeStandIn, provider: GCPProvider) -> None:
    first = launch(provider, "same-claim", ["e2-standard-2"])
    second = launch(provider, "same-claim", ["e2-standard-2", "e2-standard-4"])
    assert second.provider_id == first.provider_id
    assert standin.launches() == 1
    assert len(standin.calls("instances.insert")) == 1


def test_already_exists_on_insert_is_success(standin: ComputeStandIn, provider: GCPProvider) -> None:
    first = launch(provider, "racing", ["e2-standard-2"], zones=("us-central1-a",))
    # The aggregated view lags, so the lookup misses it and the insert answers 409 alreadyExists.
    standin.stale_aggregated_instances()
    again = launch(provider, "racing", ["e2-standard-2"], zones=("us-central1-a",))
    assert again.provider_id == first.provider_id
    assert [c.status for c in standin.calls("instances.insert")] == [200, 409]
    assert standin.launches() == 1


def test_an_operation_that_does_not_finish_in_time_is_transient_and_a_retry_finds_the_instance(
    standin: ComputeStandIn,
) -> None:
    provider = make_provider(standin, operation_timeout=0.3)
    standin.hang_operations()
    with pytest.raises(TransientError, match="not done"):
        launch(provider, "slow", ["e2-standard-2"])
    standin.hang_operations(False)
    inst = launch(provider, "slow", ["e2-standard-2"])
    assert inst.nodeclaim == "slow"
    assert standin.launches() == 1


def test_a_bad_request_is_a_create_error(standin: ComputeStandIn, provider: GCPProvider) -> None:
    nc = gcp_node_class(labels={"Team": "ml"})  # GCE label keys are lowercase: refused by the API
    with pytest.raises(CreateError, match="labels"):
        launch(provider, "bad", ["e2-standard-2"], node_class=nc)


def test_the_instance_carries_the_node_class_settings(standin: ComputeStandIn, provider: GCPProvider) -> None:
    nc = gcp_node_class(
        network="vpc-1",
        subnetwork="nodes",
        service_account={"email": "nodes@test-project.iam.gserviceaccount.com"},
        boot_disk={
            "sizeGb": 200,
            "type": "pd-ssd",
            "kmsKey": "projects/p/locations/l/keyRings/r/cryptoKeys/k",
        },
        network_tags=["gpu-nodes"],
        labels={"team": "ml"},
        metadata={"startup-script": "echo hi"},
    )
    inst = launch(provider, "settings", ["e2-standard-2"], node_class=nc, zones=("us-central1-a",))
    body = standin.insert_body(instance_name(inst.provider_id))
    boot = body["disks"][0]
    assert boot["boot"] is True and boot["autoDelete"] is True
    assert boot["initializeParams"]["sourceImage"] == IMAGE
    assert boot["initializeParams"]["diskSizeGb"] == "200"
    assert boot["initializeParams"]["diskType"] == "zones/us-central1-a/diskTypes/pd-ssd"
    assert boot["diskEncryptionKey"]["kmsKeyName"].endswith("cryptoKeys/k")
    assert body["networkInterfaces"] == [
        {"network": "global/networks/vpc-1", "subnetwork": "regions/us-central1/subnetworks/nodes"}
    ]
    assert body["serviceAccounts"][0]["email"] == "nodes@test-project.iam.gserviceaccount.com"
    assert body["tags"]["items"] == ["gpu-nodes"]
    assert body["labels"]["team"] == "ml"
    metadata = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    assert metadata["startup-script"] == "echo hi"
    assert metadata["provisioner-nodeclaim"] == "settings"


def test_claim_names_gce_would_refuse_are_folded_and_kept_exactly_in_metadata(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    claim_name = "gpu.pool-" + "x" * 70
    inst = launch(provider, claim_name, ["e2-standard-2"], nodepool="GPU.Pool")
    name = instance_name(inst.provider_id)
    assert len(name) <= 63 and "." not in name
    assert inst.nodeclaim == claim_name  # exact, from metadata
    labels = standin.instance(name)["labels"]
    assert labels["provisioner-cluster"] == "test-cluster"
    assert all(len(v) <= 63 and v == v.lower() for v in labels.values())


def test_get_list_and_delete(standin: ComputeStandIn, provider: GCPProvider) -> None:
    inst = launch(provider, "lifecycle", ["e2-standard-2"])
    got = provider.get(inst.provider_id)
    assert (got.state, got.nodeclaim, got.nodepool, got.image_id) == (
        "running",
        "lifecycle",
        "default",
        IMAGE,
    )
    assert [i.provider_id for i in provider.list()] == [inst.provider_id]
    provider.delete(inst.provider_id)
    with pytest.raises(NotFound):
        provider.get(inst.provider_id)
    with pytest.raises(NotFound):
        provider.delete(inst.provider_id)
    assert provider.list() == []


def test_list_pages_and_keeps_to_this_cluster(standin: ComputeStandIn, provider: GCPProvider) -> None:
    standin.set_max_page_size(2)
    mine = {launch(provider, f"n{i}", ["e2-standard-2"]).provider_id for i in range(5)}
    other = make_provider(standin, cluster_name="other-cluster")
    launch(other, "n0", ["e2-standard-2"])
    assert {i.provider_id for i in provider.list()} == mine
    assert any(c.query.get("pageToken") for c in standin.calls("instances.aggregatedList"))


def test_a_malformed_provider_id_is_not_found(provider: GCPProvider) -> None:
    with pytest.raises(NotFound):
        provider.get("aws:///us-east-1a/i-0123")


def test_drift_is_reported_when_the_node_class_image_changes(provider: GCPProvider) -> None:
    nc = gcp_node_class()
    inst = launch(provider, "drifter", ["e2-standard-2"], node_class=nc)
    claim = node_claim("drifter", ["e2-standard-2"], node_class=nc)
    claim.status.provider_id = inst.provider_id
    assert provider.is_drifted(claim, nc) is None
    newer = gcp_node_class(image="projects/debian-cloud/global/images/debian-12-v2")
    reason = provider.is_drifted(claim, newer)
    assert reason is not None and reason.startswith("ImageDrift")
