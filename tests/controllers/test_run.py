"""`provisioner run --cloud fake` as a process against a Kubernetes API over HTTP: pending GPU pods become
NodeClaims and Ready Nodes, deleting the claims terminates them cleanly, SIGTERM exits cleanly.

The process takes a kubeconfig and its leader Lease lives in the test's own namespace; each test keeps
to a Space (pods in its namespace, pool and class names of its own) and asserts on what the API shows,
the process's metrics and log and its ledger, so with PROVISIONER_TEST_KUBECONFIG set they run unchanged
against that cluster."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from provisioner.finops.ledger import Ledger
from provisioner.kube import client as kc
from testkit.controllers.backends import KubeBackend
from testkit.controllers.processes import Process
from testkit.controllers.space import Space
from testkit.controllers.standins import cluster_controllers
from testkit.controllers.world import gpu_pod
from tests.controllers.spaced import binder_of, class_of, pool_of
from tests.polling import in_turn, wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return cast(int, s.getsockname()[1])


def _start_run(kubeconfig: str, space: Space, log: Path, *flags: str) -> Process:
    """`provisioner run --cloud fake` as a process against the test's API (its leader Lease in the test's
    namespace), fast windows, JSON logs."""
    args = ["run", "--cloud", "fake", "--kubeconfig", kubeconfig, "--lease-namespace", space.namespace]
    args += ["--cluster-name", "e2e", "--batch-idle", "0.2", "--batch-max", "1"]
    args += ["--interval", "0.1", "--log-format", "json", *flags]
    return Process(*args, log=log)


def _create(backend: KubeBackend, space: Space, pool: dict[str, Any], *pods: str, **kw: Any) -> None:
    """The test's NodeClass, `pool` over it and one-GPU `pods` in the test's namespace."""
    backend.create(class_of(space))
    backend.create(pool)
    for name in pods:
        backend.create(gpu_pod(name, namespace=space.namespace, **kw))


def _cluster(backend: KubeBackend, space: Space) -> Callable[[], None]:
    """What kube-controller-manager and the kubelets do, for the test's pods only."""
    return lambda: cluster_controllers(backend, space.namespaces)


def test_run_with_the_fake_cloud_turns_pending_gpu_pods_into_ready_nodes_and_back(
    kubeconfig: str, kube_client: kc.KubeClient, kube_backend: KubeBackend, space: Space, tmp_path: Path
) -> None:
    backend = kube_backend
    binder = binder_of(backend, space)
    pool = pool_of(space, space.name("gpu"))
    _create(backend, space, pool, "train-0", "train-1")
    name = pool["metadata"]["name"]
    port = _free_port()
    proc = _start_run(kubeconfig, space, tmp_path / "run.log", "--metrics-port", str(port))
    try:

        def settled() -> bool:
            nodes = space.nodes(backend.state)
            return (
                all(p.node_name for p in space.pods(backend.state))
                and bool(nodes)
                and all(n.labels.get("provisioner.sh/initialized") == "true" for n in nodes)
            )

        wait_until(
            "pods bound on initialized nodes",
            settled,
            step=in_turn(_cluster(backend, space), binder.sync),
        )
        nodes = space.nodes(backend.state)
        assert all(n.ready for n in nodes)
        assert len({p.node_name for p in space.pods(backend.state)}) == 2, "one 1-GPU node per 1-GPU pod"
        claims = space.claims(backend.state)
        assert {c.status.provider_id for c in claims} == {n.provider_id for n in nodes}

        def scrape() -> str:
            return cast(
                str, urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            )

        wait_until("claims counted as Initialized", lambda: 'phase="Initialized"} 2.0' in scrape())
        metrics = scrape()
        assert f'provisioner_nodeclaims_created_total{{nodepool="{name}"}} 2.0' in metrics
        assert f'provisioner_cost_per_hour{{nodepool="{name}"}}' in metrics

        for p in space.pods(backend.state):
            backend.delete("Pod", p.name, namespace=p.namespace)
        for c in claims:
            backend.delete("NodeClaim", c.name)
        wait_until(
            "claims terminated",
            lambda: not space.claims(backend.state) and not space.nodes(backend.state),
            step=in_turn(_cluster(backend, space), backend.settle),
        )
    finally:
        logged = proc.stop()
    assert proc.returncode == 0, logged[-3000:]
    assert '"message": "provisioner stopped"' in logged
    lease = kube_client.get(kc.LEASE, "provisioner-leader", namespace=space.namespace)
    assert not lease["spec"].get("holderIdentity"), "the lease is released on shutdown"


def test_run_writes_the_ledger_as_it_consolidates_and_report_reads_it_back(
    kubeconfig: str, kube_backend: KubeBackend, space: Space, tmp_path: Path
) -> None:
    import json

    from typer.testing import CliRunner

    from provisioner.cli.main import app

    backend = kube_backend
    binder = binder_of(backend, space)
    pool = pool_of(space, space.name("gpu"), capacity_types=("on-demand",))
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    _create(backend, space, pool, "train-0", "train-1", owner="Job")
    ledger = tmp_path / "ledger.sqlite"
    proc = _start_run(
        kubeconfig,
        space,
        tmp_path / "run.log",
        "--disruption-validation-delay",
        "0.5",
        "--metrics-port",
        "0",
        "--ledger",
        str(ledger),
    )
    try:
        wait_until(
            "two pods bound on two nodes",
            lambda: len({p.node_name for p in space.pods(backend.state) if p.node_name}) == 2,
            step=in_turn(_cluster(backend, space), binder.sync),
        )
        backend.delete("Pod", "train-0", namespace=space.namespace)

        def action_written() -> bool:
            # Read only, and without the ledger's start-up migration: opening it read-write while the
            # controller creates its schema made either side fail with `database is locked` under load.
            if not ledger.exists():
                return False
            try:
                with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=1)) as db:
                    return bool(db.execute("SELECT count(*) FROM disruption_actions").fetchone()[0])
            except sqlite3.OperationalError:
                return False  # no table yet, or locked for a moment: look again

        # The row is written as the command is carried out (the claim deleted), not at shutdown.
        wait_until(
            "the empty node's action in the ledger",
            action_written,
            limit=90,
            step=_cluster(backend, space),  # the kubelet finishes the deleted pod
        )
    finally:
        logged = proc.stop()
    assert proc.returncode == 0, logged[-3000:]
    runner = CliRunner()
    result = runner.invoke(app, ["report", "scale-down", "--ledger", str(ledger), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (action,) = doc["actions"]
    assert action["reason"] == "Empty" and action["action"] == "delete"
    assert action["savingsPerHour"] == pytest.approx(action["pricePerHour"]) and action["savingsPerHour"] > 0
    with Ledger(ledger) as opened:
        samples = opened.usage()
    assert len({u.node for u in samples}) == 2, "both nodes' usage, written as the controller stopped"
    assert all(u.hours > 0 and u.price_per_hour > 0 for u in samples)
    assert doc["total"]["cost"] == pytest.approx(sum(u.cost for u in samples), abs=0.01)
    costs = runner.invoke(app, ["report", "costs", "--ledger", str(ledger), "-o", "json"])
    assert costs.exit_code == 0, costs.output
    assert json.loads(costs.stdout)["total"] == pytest.approx(doc["total"]["cost"], abs=0.01)
