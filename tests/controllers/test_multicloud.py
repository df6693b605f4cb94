"""`provisioner run --cloud aws,gcp` as a process: one controller serves an AWSNodeClass pool through
boto3 (moto behind the fault-and-price proxy) and a GCPNodeClass pool through google-cloud-compute (the
Compute stand-in), both over real HTTP, and pods of both pools get instances on their own cloud in one
run, each tagged with its NodeClaim.

The controller takes the test's kubeconfig, and the test keeps to a Space (its pods in its namespace,
pool and class names of its own), so with PROVISIONER_TEST_KUBECONFIG set it runs against that cluster:
the clouds stay the local stand-ins."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.gcp import naming
from provisioner.api import labels as wk
from testkit.controllers.backends import KubeBackend
from testkit.controllers.processes import Process
from testkit.controllers.space import Space
from testkit.controllers.world import node_pool, pod
from testkit.typed import present
from tests.controllers.spaced import binder_of
from tests.polling import wait_until

aws_world = pytest.importorskip("testkit.providers.aws.world")
from testkit.providers.aws.stack import CREDENTIALS, REGION, Stack, shared_stack  # noqa: E402
from testkit.providers.aws.world import World as AWSWorld  # noqa: E402
from testkit.providers.gcp import fixtures as gcp_fixtures  # noqa: E402
from testkit.providers.gcp.standin import ComputeStandIn  # noqa: E402
from testkit.providers.harness_gcp import gcp_node_class  # noqa: E402


@pytest.fixture
def aws() -> Iterator[tuple[Stack, AWSWorld]]:
    stack = shared_stack()
    stack.reset()
    account = aws_world.build(stack)
    yield stack, account
    stack.proxy.reset()


@pytest.fixture
def gcp() -> Iterator[ComputeStandIn]:
    server = ComputeStandIn().start()
    yield server
    server.stop()


def _pool(
    space: Space, name: str, *, kind: str, node_class: str, types: list[str], zones: list[str]
) -> dict[str, Any]:
    doc = node_pool(
        space.pool(space.name(name)),
        gpu_names=None,
        instance_types=types,
        zones=zones,
        node_class_name=node_class,
    )
    doc["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = kind
    return doc


def test_one_controller_launches_pools_of_both_clouds_in_one_run(
    kubeconfig: str,
    kube_backend: KubeBackend,
    space: Space,
    aws: tuple[Stack, AWSWorld],
    gcp: ComputeStandIn,
    tmp_path: Path,
) -> None:
    stack, account = aws
    backend = kube_backend
    aws_class, gcp_class = space.name("aws-nodes"), space.name("gcp-nodes")
    web_aws = _pool(
        space, "web-aws", kind="AWSNodeClass", node_class=aws_class, types=["m5.large"], zones=account.zones
    )
    web_gcp = _pool(
        space,
        "web-gcp",
        kind="GCPNodeClass",
        node_class=gcp_class,
        types=["e2-standard-2"],
        zones=gcp_fixtures.ZONES,
    )
    for obj in (
        aws_world.node_class(aws_class).to_dict(),
        gcp_node_class(gcp_class).to_dict(),
        web_aws,
        web_gcp,
        pod("api-aws", namespace=space.namespace, annotations={wk.NODEPOOLS: web_aws["metadata"]["name"]}),
        pod("api-gcp", namespace=space.namespace, annotations={wk.NODEPOOLS: web_gcp["metadata"]["name"]}),
    ):
        backend.create(obj)
    args = ["run", "--cloud", "aws,gcp", "--aws-region", REGION, "--aws-endpoint", stack.url]
    args += ["--gcp-project", gcp.project, "--gcp-region", gcp_fixtures.REGION, "--gcp-endpoint", gcp.url]
    args += ["--kubeconfig", kubeconfig, "--cluster-name", aws_world.CLUSTER]
    args += ["--batch-idle", "0.2", "--batch-max", "1", "--interval", "0.1", "--metrics-port", "0"]
    args += ["--no-leader-elect", "--no-disruption", "--log-format", "text"]
    env = {
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
    }
    proc = Process(*args, log=tmp_path / "run.log", env=env)
    try:

        def launched() -> bool:
            claims = space.claims(backend.state)
            return len(claims) == 2 and all(c.status.provider_id for c in claims)

        # No kubelet registers these instances: the binder only marks the pods unschedulable.
        binder = binder_of(backend, space)
        wait_until("a launched claim in each pool", launched, step=binder.sync)
        by_pool = {c.nodepool: c for c in space.claims(backend.state)}
        claim_aws, claim_gcp = by_pool[web_aws["metadata"]["name"]], by_pool[web_gcp["metadata"]["name"]]
        assert present(claim_aws.status.provider_id).startswith("aws:///")
        assert claim_aws.status.instance_type == "m5.large"
        assert present(claim_gcp.status.provider_id).startswith("gce://")
        assert claim_gcp.status.instance_type == "e2-standard-2"

        ec2 = stack.client("ec2", direct=True)
        instance_id = present(claim_aws.status.provider_id).rsplit("/", 1)[-1]
        described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        assert {t["Key"]: t["Value"] for t in described["Tags"]}[wk.NODECLAIM] == claim_aws.name
        gce_name = naming.instance_name(aws_world.CLUSTER, claim_gcp.name)
        with gcp.state.lock:
            (zone,) = [z for z, name in gcp.state.instances if name == gce_name]
            labels = gcp.state.instances[(zone, gce_name)]["labels"]
        assert zone in gcp_fixtures.ZONES
        assert labels[naming.LABEL_NODECLAIM] == naming.label_value(claim_gcp.name)
    except AssertionError as err:
        raise AssertionError(f"{err}; the controller said: {proc.stop()[-4000:]}") from None
    finally:
        logged = proc.stop()
    assert proc.returncode == 0, logged[-3000:]
