"""What lets the controller tests run against a cluster they share (PROVISIONER_TEST_KUBECONFIG): the
standalone strict server that stands in for one here (testkit/controllers/serve.py), the sweep that
deletes what a test left, and a test's own Space (testkit/controllers/space.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from provisioner.api import labels as wk
from provisioner.clusterapi import NotFoundError
from provisioner.kube import client as kc
from testkit.builders.nodes import node_claim
from testkit.controllers.space import Space, Sweep
from testkit.controllers.world import gpu_pod, node_class, node_pool
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import wait_until


def _exists(client: kc.KubeClient, res: kc.Resource, name: str, namespace: str | None = None) -> bool:
    try:
        client.get(res, name, namespace=namespace)
    except NotFoundError:
        return False
    return True


def test_the_standalone_server_writes_a_kubeconfig_and_makes_each_namespaces_service_account(
    tmp_path: Path,
) -> None:
    config = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.controllers.serve", "--kubeconfig-out", str(config)],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        wait_until("the server's kubeconfig written", config.exists, limit=120)
        client = kc.KubeClient.connect(kubeconfig=str(config))
        try:
            client.create(kc.NAMESPACE, {"metadata": {"name": "fresh"}})
            account = "/api/v1/namespaces/fresh/serviceaccounts/default"

            def has_account() -> bool:
                try:
                    client.request("GET", account)
                except NotFoundError:
                    return False
                return True

            wait_until("the new namespace's default ServiceAccount", has_account, limit=120)
            # The chart's CRDs are there: a NodePool over its NodeClass is admitted.
            client.create(kc.nodeclass("AWSNodeClass"), node_class())
            client.create(kc.NODEPOOL, node_pool("gpu"))
        finally:
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0


def test_a_sweep_deletes_what_appeared_since_and_keeps_what_was_there(kube_client: kc.KubeClient) -> None:
    klass = kc.nodeclass("AWSNodeClass")
    kube_client.create(klass, node_class("kept-class"))
    sweep = Sweep(kube_client)
    kube_client.create(klass, node_class("swept-class"))
    kube_client.create(kc.NODEPOOL, node_pool("swept-pool", node_class_name="swept-class"))
    claim = node_claim("swept-claim", ["g5.xlarge"], nodepool="swept-pool").to_dict()
    claim["metadata"]["finalizers"] = [wk.TERMINATION_FINALIZER]
    kube_client.create(kc.NODECLAIM, claim)
    kube_client.create(kc.POD, gpu_pod("swept-pod"), namespace="default")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "swept-pod"}}
    binding["target"] = {"kind": "Node", "name": "swept-node"}
    kube_client.request(
        "POST", kc.POD.path(namespace="default", name="swept-pod", sub="binding"), body=binding
    )
    sweep.sweep()
    assert _exists(kube_client, klass, "kept-class")
    assert not _exists(kube_client, klass, "swept-class")
    assert not _exists(kube_client, kc.NODEPOOL, "swept-pool")
    assert not _exists(kube_client, kc.NODECLAIM, "swept-claim"), (
        "its finalizer lifted: no controller is left"
    )
    assert not _exists(kube_client, kc.POD, "swept-pod", "default"), "bound, deleted with grace 0"
    kube_client.delete(klass, "kept-class")


def test_a_space_deletes_its_namespaces_and_its_pools_claims_and_nodes_and_nothing_else(
    kube_client: kc.KubeClient,
) -> None:
    space = Space(kube_client, accounts=bool(REAL_CLUSTER))
    other = Space(kube_client, accounts=bool(REAL_CLUSTER))
    ns = space.namespace
    pool = space.pool(space.name("gpu"))
    for s, p in ((space, pool), (other, other.pool(other.name("gpu")))):
        node = {"metadata": {"name": f"{p}-node", "labels": {wk.NODEPOOL: p}}}
        kube_client.create(kc.NODE, node)
        kube_client.create(kc.POD, gpu_pod("train"), namespace=s.namespace)
    lease = {"metadata": {"name": "provisioner-shard-0"}, "spec": {"holderIdentity": "r0"}}
    kube_client.create(kc.LEASE, lease, namespace=ns)
    space.close()
    # A real cluster's namespace controller takes a moment; the strict server deletes it at once.
    wait_until(f"namespace {ns} gone", lambda: not _exists(kube_client, kc.NAMESPACE, ns), limit=120)
    assert not _exists(kube_client, kc.POD, "train", ns), "gone with its namespace (deleted first here)"
    assert not _exists(kube_client, kc.LEASE, "provisioner-shard-0", ns)
    assert not _exists(kube_client, kc.NODE, f"{pool}-node")
    assert _exists(kube_client, kc.NODE, f"{other.name('gpu')}-node"), "another test's Node stays"
    assert _exists(kube_client, kc.POD, "train", other.namespace), "another test's pod stays"
    other.close()
