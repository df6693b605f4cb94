"""Launching on EC2 over real HTTP: CreateFleet with the claim's options across the NodeClass's zones,
the fallback ladder within one create (another zone, then on-demand), idempotency by claim name, the
launch template, and the instance's life (get, list, delete, drift)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from providers.aws import AWSProvider
from provisioner.api import labels as wk
from provisioner.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    CreateError,
    InstanceType,
    InsufficientCapacity,
    NodeClassNotReady,
    NotFound,
    OfferingKey,
    TransientError,
)
from testkit.builders import node_claim
from testkit.providers.aws import world
from testkit.providers.aws.faults import FaultProxy
from testkit.providers.aws.stack import Stack

SPOT = wk.CAPACITY_TYPE_SPOT
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND
A, B, C = "us-east-1a", "us-east-1b", "us-east-1c"


def options(provider: AWSProvider, account: world.World, names: list[str]) -> list[InstanceType]:
    types = {t.name: t for t in provider.instance_types(account.node_class)}
    return [types[n] for n in names]


def described(ec2: Any, instance_id: str) -> dict[str, Any]:
    found: dict[str, Any] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][
        0
    ]
    return found


def tags_of(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def instance_id(provider_id: str) -> str:
    return provider_id.rsplit("/", 1)[1]


def test_a_claim_for_8_h100_launches_p5_48xlarge_tagged_with_its_claim_pool_and_cluster(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    claim = node_claim("train-8xh100", ["p5.48xlarge"], node_class=account.node_class, nodepool="h100-prod")

    instance = provider.create(claim, options(provider, account, ["p5.48xlarge"]), account.node_class)

    raw = described(ec2, instance_id(instance.provider_id))
    assert raw["InstanceType"] == "p5.48xlarge"
    assert instance.provider_id == f"aws:///{raw['Placement']['AvailabilityZone']}/{raw['InstanceId']}"
    assert (instance.instance_type, instance.capacity_type) == ("p5.48xlarge", ON_DEMAND)
    assert instance.price > 0
    assert (
        tags_of(raw).items()
        >= {
            wk.NODECLAIM: "train-8xh100",
            wk.NODEPOOL: "h100-prod",
            wk.CLUSTER: "contract",
            "kubernetes.io/cluster/contract": "owned",
            "team": "ml",
        }.items()
    )
    assert raw["ImageId"] == account.image_id


def test_the_launch_template_carries_the_node_class(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    claim = node_claim("lt", ["m5.large"], node_class=account.node_class)

    provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    assert template["LaunchTemplateName"].startswith("provisioner/contract/default/")
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["ImageId"] == account.image_id
    assert data["SecurityGroupIds"] == [account.security_group_id]
    assert data["IamInstanceProfile"] == {"Name": "provisioner-node"}
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\necho hello\n"
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 100
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeType"] == "gp3"
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1


def test_one_launch_template_serves_every_launch_until_the_node_class_changes(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    types = options(provider, account, ["m5.large"])
    provider.create(node_claim("one", ["m5.large"], node_class=account.node_class), types, account.node_class)
    provider.create(node_claim("two", ["m5.large"], node_class=account.node_class), types, account.node_class)
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 1

    changed = world.node_class(userData="#!/bin/bash\necho changed\n")
    provider.create(node_claim("three", ["m5.large"], node_class=changed), types, changed)

    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 2


def test_spot_is_preferred_when_allowed_and_cheaper_in_the_cheapest_zone(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    claim = node_claim(
        "spot-ok", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT, ON_DEMAND)
    )

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    # The proxy prices spot in zone a lowest.
    assert (instance.capacity_type, instance.zone) == (SPOT, A)
    assert [call.capacity_type for call in proxy.fleet_calls] == [SPOT]
    assert set(proxy.fleet_calls[0].overrides) == {("m5.large", z) for z in (A, B, C)}


def test_a_spot_stockout_in_one_zone_falls_to_another_zone_within_one_launch(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.stockout(instance_type="m5.large", zone=A, capacity_type=SPOT)
    claim = node_claim(
        "zone-b", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT, ON_DEMAND)
    )

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    assert (instance.capacity_type, instance.zone) == (SPOT, B)
    assert len(proxy.fleet_calls) == 1
    assert proxy.fleet_calls[0].failed == [("m5.large", A)]
    assert instance.skipped == (OfferingKey("m5.large", A, SPOT),)


def test_a_spot_stockout_in_every_zone_falls_to_on_demand_within_one_launch(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    for zone in (A, B, C):
        proxy.stockout(instance_type="m5.large", zone=zone, capacity_type=SPOT)
    claim = node_claim("od", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT, ON_DEMAND))

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    assert instance.capacity_type == ON_DEMAND
    assert [call.capacity_type for call in proxy.fleet_calls] == [SPOT, ON_DEMAND]
    assert sorted(proxy.fleet_calls[0].failed) == [("m5.large", z) for z in (A, B, C)]
    assert proxy.launched == 1
    assert set(instance.skipped) == {OfferingKey("m5.large", z, SPOT) for z in (A, B, C)}


def test_the_claim_zone_requirement_is_respected(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    claim = node_claim(
        "in-c", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT, ON_DEMAND), zones=(C,)
    )

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    assert instance.zone == C
    assert {zone for call in proxy.fleet_calls for _, zone in call.overrides} == {C}


def test_every_offering_out_raises_insufficient_capacity_naming_each_offering_tried(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    for zone in (A, B):
        for capacity_type in (SPOT, ON_DEMAND):
            proxy.stockout(instance_type="g5.xlarge", zone=zone, capacity_type=capacity_type)
    claim = node_claim(
        "none-left",
        ["g5.xlarge"],
        node_class=account.node_class,
        capacity_types=(SPOT, ON_DEMAND),
        zones=(A, B),
    )

    with pytest.raises(InsufficientCapacity) as caught:
        provider.create(claim, options(provider, account, ["g5.xlarge"]), account.node_class)

    assert set(caught.value.offerings) == {
        OfferingKey("g5.xlarge", z, ct) for z in (A, B) for ct in (SPOT, ON_DEMAND)
    }
    assert caught.value.kind == "capacity"
    assert proxy.launched == 0


def test_offerings_flagged_unavailable_are_not_tried(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    (m5,) = options(provider, account, ["m5.large"])
    flagged = m5.with_offerings(
        tuple(o if o.zone != A else type(o)(o.zone, o.capacity_type, o.price, False) for o in m5.offerings)
    )
    claim = node_claim("skip-a", ["m5.large"], node_class=account.node_class)

    instance = provider.create(claim, [flagged], account.node_class)

    assert instance.zone != A
    assert A not in {zone for call in proxy.fleet_calls for _, zone in call.overrides}


def test_create_is_idempotent_by_claim_name(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    claim = node_claim("once", ["m5.large"], node_class=account.node_class)
    types = options(provider, account, ["m5.large"])

    first = provider.create(claim, types, account.node_class)
    second = provider.create(claim, types, account.node_class)

    assert second.provider_id == first.provider_id
    assert proxy.launched == 1
    assert len(proxy.fleet_calls) == 1


def test_overrides_are_capped_at_60(provider: AWSProvider, account: world.World, proxy: FaultProxy) -> None:
    types = [t for t in provider.instance_types(account.node_class) if t.gpu is None]
    assert len(types) * len(account.zones) > 60
    claim = node_claim("many", [t.name for t in types], node_class=account.node_class)

    provider.create(claim, types, account.node_class)

    assert len(proxy.fleet_calls[0].overrides) == 60


def test_throttling_is_a_transient_error(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.throttle(times=1)
    claim = node_claim("throttled", ["m5.large"], node_class=account.node_class)

    with pytest.raises(TransientError, match="RequestLimitExceeded"):
        provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)
    assert proxy.launched == 0


def test_botocore_retries_throttling_itself_when_max_attempts_allows(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy
) -> None:
    provider = new_provider(max_attempts=2)
    proxy.throttle(times=1)
    claim = node_claim("sdk-retried", ["m5.large"], node_class=account.node_class)

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    assert instance.instance_type == "m5.large"
    assert proxy.launched == 1


def test_get_list_and_delete(provider: AWSProvider, account: world.World, ec2: Any) -> None:
    claim = node_claim("lifecycle", ["m5.large"], node_class=account.node_class)
    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)
    # An instance of another cluster in the same account is not ours.
    ec2.run_instances(
        ImageId=account.image_id,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": wk.CLUSTER, "Value": "other"}]}],
    )

    got = provider.get(instance.provider_id)
    assert (got.instance_type, got.zone, got.nodeclaim, got.image_id) == (
        "m5.large",
        instance.zone,
        "lifecycle",
        account.image_id,
    )
    assert [i.provider_id for i in provider.list()] == [instance.provider_id]

    provider.delete(instance.provider_id)

    assert described(ec2, instance_id(instance.provider_id))["State"]["Name"] in (
        "shutting-down",
        "terminated",
    )
    assert provider.list() == []
    with pytest.raises(NotFound):
        provider.get(instance.provider_id)
    with pytest.raises(NotFound):
        provider.delete(instance.provider_id)


@pytest.mark.parametrize(
    "provider_id",
    ["aws:///us-east-1a/i-0123456789abcdef0", "gce://project/zone/name", "aws:///us-east-1a/"],
    ids=["unknown-instance", "not-aws", "no-instance-id"],
)
def test_get_and_delete_of_an_unknown_instance_raise_not_found(
    provider: AWSProvider, provider_id: str
) -> None:
    with pytest.raises(NotFound):
        provider.get(provider_id)
    with pytest.raises(NotFound):
        provider.delete(provider_id)


def test_drift_is_reported_when_the_node_class_selects_another_ami(
    provider: AWSProvider, account: world.World, ec2: Any
) -> None:
    claim = node_claim("drifting", ["m5.large"], node_class=account.node_class)
    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)
    claim.status.provider_id = instance.provider_id

    assert provider.is_drifted(claim, account.node_class) is None

    newer = world.register_image(ec2, name="node-image-v2", tags={"version": "2"})
    moved = world.node_class(amiSelectorTerms=[{"id": newer}])
    reason = provider.is_drifted(claim, moved)

    assert reason is not None and reason.startswith("AMIDrift") and newer in reason


def test_sdk_errors_never_leave_the_provider(
    new_provider: Callable[..., AWSProvider], account: world.World
) -> None:
    # Nothing listens on this port: the SDK raises EndpointConnectionError; the caller sees ours.
    provider = new_provider(endpoint_url="http://127.0.0.1:9")

    with pytest.raises(CloudProviderError) as caught:
        provider.instance_types(account.node_class)

    assert isinstance(caught.value, TransientError)
    assert caught.value.__class__.__module__.startswith("provisioner.")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InsufficientInstanceCapacity", "capacity"),
        ("UnfulfillableCapacity", "capacity"),
        ("InsufficientFreeAddressesInSubnet", "capacity"),
        ("SpotMaxPriceTooLow", "capacity"),
        ("MaxSpotInstanceCountExceeded", "quota"),
    ],
    ids=lambda v: v,
)
def test_capacity_error_codes_become_insufficient_capacity(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, code: str, kind: str
) -> None:
    proxy.stockout(instance_type="m5.large", zone=A, capacity_type=SPOT, code=code)
    claim = node_claim(
        "coded", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT,), zones=(A,)
    )

    with pytest.raises(InsufficientCapacity) as caught:
        provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    assert caught.value.offerings == [OfferingKey("m5.large", A, SPOT)]
    assert caught.value.kind == kind


def test_a_fleet_error_that_is_not_about_capacity_is_a_create_error(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.stockout(instance_type="m5.large", zone=A, capacity_type=ON_DEMAND, code="InvalidParameterValue")
    claim = node_claim("bad", ["m5.large"], node_class=account.node_class, zones=(A,))

    with pytest.raises(CreateError, match="InvalidParameterValue"):
        provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)


@pytest.mark.parametrize(
    ("action", "status", "code", "error"),
    [
        ("CreateFleet", 500, "InternalError", TransientError),
        ("CreateFleet", 503, "Unavailable", TransientError),
        ("CreateFleet", 400, "UnauthorizedOperation", CreateError),
        ("DescribeInstances", 500, "InternalError", TransientError),
        ("DescribeInstances", 400, "Throttling", TransientError),
        ("CreateLaunchTemplate", 400, "InvalidParameterValue", CreateError),
    ],
    ids=[
        "fleet-500",
        "fleet-503",
        "fleet-unauthorized",
        "describe-500",
        "describe-throttled",
        "template-invalid",
    ],
)
def test_api_errors_are_translated_at_the_edge(
    provider: AWSProvider,
    account: world.World,
    proxy: FaultProxy,
    action: str,
    status: int,
    code: str,
    error: type[Exception],
) -> None:
    types = options(provider, account, ["m5.large"])
    proxy.fail_next(action, status=status, code=code)

    with pytest.raises(error, match=code) as caught:
        provider.create(
            node_claim("api-error", ["m5.large"], node_class=account.node_class), types, account.node_class
        )

    assert type(caught.value).__module__.startswith("provisioner.cloudprovider")
    assert proxy.launched == 0


def test_a_capacity_error_for_the_whole_fleet_request_names_every_override(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.fail_next("CreateFleet", status=400, code="InsufficientInstanceCapacity")
    claim = node_claim("whole", ["m5.large"], node_class=account.node_class, capacity_types=(SPOT, ON_DEMAND))

    instance = provider.create(claim, options(provider, account, ["m5.large"]), account.node_class)

    # The spot request failed as a whole; the on-demand one launched, within the same create.
    assert instance.capacity_type == ON_DEMAND
    assert set(instance.skipped) == {OfferingKey("m5.large", z, SPOT) for z in (A, B, C)}


def test_a_node_class_with_a_role_gets_an_instance_profile_made_for_it(
    provider: AWSProvider, account: world.World, stack: Stack, ec2: Any
) -> None:
    iam = stack.client("iam")
    iam.create_role(RoleName="node-role", AssumeRolePolicyDocument="{}")
    nc = world.node_class(instanceProfile=None, role="node-role")
    types = {t.name: t for t in provider.instance_types(nc)}

    provider.create(node_claim("with-role", ["m5.large"], node_class=nc), [types["m5.large"]], nc)

    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    profile = data["IamInstanceProfile"]["Name"]
    assert profile.startswith("provisioner_contract_")
    roles = iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]
    assert [r["RoleName"] for r in roles] == ["node-role"]


def test_a_role_that_does_not_exist_leaves_the_node_class_not_ready(
    provider: AWSProvider, account: world.World
) -> None:
    nc = world.node_class(instanceProfile=None, role="missing-role")

    with pytest.raises(NodeClassNotReady, match="missing-role"):
        provider.instance_types(nc)


def test_a_retried_create_does_not_launch_again_while_describe_instances_lags(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy
) -> None:
    now = [0.0]
    provider = new_provider(clock=lambda: now[0])
    claim = node_claim("lagging", ["m5.large"], node_class=account.node_class)
    types = options(provider, account, ["m5.large"])
    first = provider.create(claim, types, account.node_class)
    # EC2 is eventually consistent: right after a launch, a tag lookup may find nothing.
    proxy.hide_instances(times=1)

    assert provider.create(claim, types, account.node_class).provider_id == first.provider_id
    assert proxy.launched == 1

    now[0] = 301.0  # long after, the tag lookup alone decides (and still finds the instance)
    assert provider.create(claim, types, account.node_class).provider_id == first.provider_id
    proxy.hide_instances(times=1)
    provider.create(claim, types, account.node_class)
    assert proxy.launched == 2  # the memory has expired: a lookup that finds nothing means "launch"


def test_an_al2023_alias_boots_gpu_types_on_the_nvidia_ami_and_others_on_the_standard_one(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    standard = world.register_image(ec2, name="al2023-standard")
    nvidia = world.register_image(ec2, name="al2023-nvidia")
    base = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64"
    proxy.public_parameters.update(
        {f"{base}/standard/recommended/image_id": standard, f"{base}/nvidia/recommended/image_id": nvidia}
    )
    provider = new_provider()  # the Kubernetes version comes from EKS DescribeCluster
    nc = world.node_class(amiSelectorTerms=[{"alias": "al2023@latest"}])
    types = {t.name: t for t in provider.instance_types(nc)}

    gpu = provider.create(node_claim("gpu", ["p5.48xlarge"], node_class=nc), [types["p5.48xlarge"]], nc)
    cpu = provider.create(node_claim("cpu", ["m5.large"], node_class=nc), [types["m5.large"]], nc)

    assert described(ec2, instance_id(gpu.provider_id))["ImageId"] == nvidia
    assert described(ec2, instance_id(cpu.provider_id))["ImageId"] == standard
    assert (gpu.image_id, cpu.image_id) == (nvidia, standard)
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 2
    # No arm64 AMI was published here, so Graviton types are not offered.
    assert not [t for t in types.values() if t.labels[wk.ARCH] == "arm64"]


def test_the_provider_satisfies_the_cloud_provider_protocol(provider: AWSProvider) -> None:
    assert isinstance(provider, CloudProvider)
    assert provider.name == "aws"


def launch_template_user_data(ec2: Any) -> str:
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    return base64.b64decode(data["UserData"]).decode()


def test_al2023_nodes_get_a_node_config_for_the_eks_cluster_after_the_node_class_script(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, stack: Stack, ec2: Any
) -> None:
    standard = world.register_image(ec2, name="al2023")
    proxy.public_parameters[
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
    ] = standard
    nc = world.node_class(amiSelectorTerms=[{"alias": "al2023@latest"}])
    types = {t.name: t for t in provider.instance_types(nc)}

    provider.create(node_claim("joins", ["m5.large"], node_class=nc), [types["m5.large"]], nc)

    cluster = stack.client("eks").describe_cluster(name="contract")["cluster"]
    text = launch_template_user_data(ec2)
    assert text.startswith("MIME-Version: 1.0")
    assert text.index("echo hello") < text.index("kind: NodeConfig")
    assert f"apiServerEndpoint: {cluster['endpoint']}" in text
    assert f"certificateAuthority: {cluster['certificateAuthority']['data']}" in text
    assert "cidr: 10.100.0.0/16" in text
    assert "--register-with-taints=provisioner.sh/unregistered:NoExecute" in text


def test_a_mig_pools_nodes_register_with_its_layout_label_from_their_first_moment(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    """The MIG manager partitions the GPUs before the provisioner registers the node: the kubelet itself
    registers with `nvidia.com/mig.config`, through a launch template of its own."""
    proxy.public_parameters[
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
    ] = world.register_image(ec2, name="al2023")
    nc = world.node_class(amiSelectorTerms=[{"alias": "al2023@latest"}])
    types = {t.name: t for t in provider.instance_types(nc)}
    claim = node_claim("sliced", ["m5.large"], node_class=nc)
    claim.metadata.labels["nvidia.com/mig.config"] = "all-1g.10gb"

    provider.create(claim, [types["m5.large"]], nc)

    text = launch_template_user_data(ec2)
    assert "      - --node-labels=nvidia.com/mig.config=all-1g.10gb" in text


def test_al2023_without_an_eks_cluster_is_not_ready_to_launch(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    proxy.public_parameters[
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
    ] = world.register_image(ec2, name="al2023")
    provider = new_provider(cluster_name="elsewhere", kubernetes_version="1.31")
    nc = world.node_class(amiSelectorTerms=[{"alias": "al2023@latest"}])
    types = {t.name: t for t in provider.instance_types(nc)}

    with pytest.raises(NodeClassNotReady, match="DescribeCluster"):
        provider.create(node_claim("lost", ["m5.large"], node_class=nc), [types["m5.large"]], nc)
    assert proxy.launched == 0
