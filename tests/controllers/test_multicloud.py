"""`provisioner run --cloud aws,gcp` as a process: one controller serves an AWSNodeClass pool through
boto3 (moto behind the fault-and-price proxy) and a GCPNodeClass pool through google-cloud-compute (the
Compute stand-in), both over real HTTP, and pods of both pools get instances on their own cloud in one
run, each tagged with its NodeClaim."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from providers.gcp import naming
from provisioner.api import labels as wk
from provisioner.clock import RealClock
from provisioner.kube import client as kc
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import KubeBackend, TestBinder, node_pool, pod
from testkit.typed import present
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import wait_until

aws_world = pytest.importorskip("testkit.providers.aws.world")
from testkit.providers.aws.stack import CREDENTIALS, REGION, Stack, shared_stack  # noqa: E402
from testkit.providers.aws.world import World as AWSWorld  # noqa: E402
from testkit.providers.gcp import fixtures as gcp_fixtures  # noqa: E402
from testkit.providers.gcp.standin import ComputeStandIn  # noqa: E402
from testkit.providers.harness_gcp import gcp_node_class  # noqa: E402

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="drives its own API server")


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


def _pool(name: str, *, kind: str, node_class: str, types: list[str], zones: list[str]) -> dict[str, Any]:
    doc = node_pool(name, gpu_names=None, instance_types=types, zones=zones, node_class_name=node_class)
    doc["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = kind
    return doc


def test_one_controller_launches_pools_of_both_clouds_in_one_run(
    kube_server: KubeServer,
    kube_client: kc.KubeClient,
    aws: tuple[Stack, AWSWorld],
    gcp: ComputeStandIn,
) -> None:
    stack, account = aws
    backend = KubeBackend(kube_client, RealClock())  # type: ignore[arg-type]
    gcp_class = gcp_node_class("gcp-nodes").to_dict()
    for obj in (
        account.node_class.to_dict(),
        gcp_class,
        _pool(
            "web-aws",
            kind="AWSNodeClass",
            node_class=account.node_class.name,
            types=["m5.large"],
            zones=account.zones,
        ),
        _pool(
            "web-gcp",
            kind="GCPNodeClass",
            node_class="gcp-nodes",
            types=["e2-standard-2"],
            zones=gcp_fixtures.ZONES,
        ),
        pod("api-aws", annotations={wk.NODEPOOLS: "web-aws"}),
        pod("api-gcp", annotations={wk.NODEPOOLS: "web-gcp"}),
    ):
        backend.create(obj)
    cmd = [
        sys.executable,
        "-c",
        "from provisioner.cli import main; main()",
        "run",
        "--cloud",
        "aws,gcp",
        "--aws-region",
        REGION,
        "--aws-endpoint",
        stack.url,
        "--gcp-project",
        gcp.project,
        "--gcp-region",
        gcp_fixtures.REGION,
        "--gcp-endpoint",
        gcp.url,
        "--url",
        kube_server.url,
        "--cluster-name",
        aws_world.CLUSTER,
        "--batch-idle",
        "0.2",
        "--batch-max",
        "1",
        "--interval",
        "0.1",
        "--metrics-port",
        "0",
        "--no-leader-elect",
        "--no-disruption",
        "--log-format",
        "text",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
    }
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    err = ""
    try:

        def launched() -> bool:
            claims = backend.state.claims.values()
            return len(claims) == 2 and all(c.status.provider_id for c in claims)

        # No kubelet registers these instances: the binder only marks the pods unschedulable.
        wait_until("a launched claim in each pool", launched, step=TestBinder(backend).sync)
        by_pool = {c.nodepool: c for c in backend.state.claims.values()}
        assert present(by_pool["web-aws"].status.provider_id).startswith("aws:///")
        assert by_pool["web-aws"].status.instance_type == "m5.large"
        assert present(by_pool["web-gcp"].status.provider_id).startswith("gce://")
        assert by_pool["web-gcp"].status.instance_type == "e2-standard-2"

        ec2 = stack.client("ec2", direct=True)
        instance_id = present(by_pool["web-aws"].status.provider_id).rsplit("/", 1)[-1]
        described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        assert {t["Key"]: t["Value"] for t in described["Tags"]}[wk.NODECLAIM] == by_pool["web-aws"].name
        gce_name = naming.instance_name(aws_world.CLUSTER, by_pool["web-gcp"].name)
        with gcp.state.lock:
            (zone,) = [z for z, name in gcp.state.instances if name == gce_name]
            labels = gcp.state.instances[(zone, gce_name)]["labels"]
        assert zone in gcp_fixtures.ZONES
        assert labels[naming.LABEL_NODECLAIM] == naming.label_value(by_pool["web-gcp"].name)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"the controller said: {proc.communicate()[1][-4000:]}") from None
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        backend.close()
    assert proc.returncode == 0, err[-3000:]
