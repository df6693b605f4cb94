"""The whole lifecycle with the AWS provider: boto3 over HTTP to moto (behind the tests' fault-and-price
proxy) and the controllers over the Kubernetes API fixture."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from provisioner.api import labels as wk
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.settings import ControllerSettings
from testkit.controllers.world import World, gpu_pod, node_pool
from testkit.typed import present

aws_world = pytest.importorskip("testkit.providers.aws.world")
from testkit.providers.aws.stack import Stack, shared_stack  # noqa: E402
from testkit.providers.aws.world import World as AWSWorld  # noqa: E402
from testkit.providers.harness_aws import make_provider  # noqa: E402


@pytest.fixture
def aws() -> Iterator[tuple[Stack, AWSWorld]]:
    stack = shared_stack()
    stack.reset()
    account = aws_world.build(stack)
    yield stack, account
    stack.proxy.reset()


def test_pending_gpu_pods_become_ec2_instances_then_initialized_nodes_then_bound(
    make_kube_world: Callable[..., World], aws: tuple[Stack, AWSWorld]
) -> None:
    stack, account = aws
    provider = make_provider(stack)
    w = make_kube_world(provider=provider, settings=ControllerSettings(cluster_name="contract"))
    w.apply(account.node_class.to_dict(), node_pool("gpu", zones=account.zones), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert present(claim.status.provider_id).startswith("aws:///")
    assert present(claim.status.instance_type).startswith(("g5", "g6"))
    assert condition_status(claim, "Initialized") == "True"
    (node,) = w.state.nodes.values()
    assert node.labels[wk.NODEPOOL] == "gpu" and node.provider_id == claim.status.provider_id
    instance_id = present(claim.status.provider_id).rsplit("/", 1)[-1]
    ec2 = stack.client("ec2", direct=True)
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in described.get("Tags", [])}
    assert tags.get(wk.NODECLAIM) == claim.name

    w.backend.delete("NodeClaim", claim.name)
    w.run_until(lambda: not w.state.claims, max_ticks=20)
    state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"][
        "Name"
    ]
    assert state in ("shutting-down", "terminated")
