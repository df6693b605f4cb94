"""A small AWS account in moto for one test: a VPC, tagged subnets in some zones, a security group, an
AMI, the EKS cluster, and the AWSNodeClass that selects them by tags (builders with overrides)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from providers.aws.model import AWSNodeClass
from testkit.providers.aws.stack import Stack

DISCOVERY = {"provisioner.sh/discovery": "contract"}
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
CLUSTER = "contract"
"""The provider's cluster name; an EKS cluster of that name exists (nodes' bootstrap reads it)."""


@dataclass
class World:
    vpc_id: str
    subnets: dict[str, str]
    """zone -> subnet id."""
    security_group_id: str
    image_id: str
    node_class: AWSNodeClass
    zones: list[str] = field(default_factory=list)


def register_image(
    ec2: Any, *, name: str = "node-image", instance_type: str = "m5.large", tags: dict[str, str] | None = None
) -> str:
    """A tagged AMI with an architecture. moto's RegisterImage drops both, so the image is made the way
    real ones often are: CreateImage from a builder instance (then terminated; it carries no cluster tag).
    Its architecture is the builder type's (`m7g.large` gives arm64)."""
    builder = ec2.run_instances(ImageId="ami-00000000", MinCount=1, MaxCount=1, InstanceType=instance_type)
    builder_id = builder["Instances"][0]["InstanceId"]
    image_id: str = ec2.create_image(
        InstanceId=builder_id,
        Name=name,
        TagSpecifications=[
            {
                "ResourceType": "image",
                "Tags": [{"Key": k, "Value": v} for k, v in {**DISCOVERY, **(tags or {})}.items()],
            }
        ],
    )["ImageId"]
    ec2.terminate_instances(InstanceIds=[builder_id])
    return image_id


def node_class(name: str = "default", **spec: Any) -> AWSNodeClass:
    """An AWSNodeClass selecting everything by the discovery tag; `spec` overrides spec fields."""
    base: dict[str, Any] = {
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        "amiSelectorTerms": [{"tags": DISCOVERY}],
        "instanceProfile": "provisioner-node",
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}, "rootVolume": True}
        ],
        "userData": "#!/bin/bash\necho hello\n",
        "tags": {"team": "ml"},
    }
    base.update(spec)
    return AWSNodeClass.model_validate({"metadata": {"name": name}, "spec": base})


def build(stack: Stack, *, zones: list[str] | None = None) -> World:
    """The account for one test (call after `stack.reset()`)."""
    zones = zones or ZONES
    ec2 = stack.client("ec2", direct=True)
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    tags = [{"Key": k, "Value": v} for k, v in DISCOVERY.items()]
    subnets = {}
    for i, zone in enumerate(zones):
        subnets[zone] = ec2.create_subnet(
            VpcId=vpc_id,
            CidrBlock=f"10.0.{i}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
        )["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(
        GroupName="nodes",
        Description="nodes",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    image_id = register_image(ec2)
    stack.client("eks", direct=True).create_cluster(
        name=CLUSTER,
        version="1.31",
        roleArn="arn:aws:iam::123456789012:role/eks-cluster",
        resourcesVpcConfig={"subnetIds": list(subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
    )
    return World(
        vpc_id=vpc_id,
        subnets=subnets,
        security_group_id=sg,
        image_id=image_id,
        node_class=node_class(),
        zones=sorted(zones),
    )
