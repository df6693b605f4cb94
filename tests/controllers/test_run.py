"""`provisioner run --cloud fake` as a process against a Kubernetes API over HTTP: pending GPU pods become
NodeClaims and Ready Nodes, deleting the claims terminates them cleanly, SIGTERM exits cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import cast

import pytest

from provisioner.clock import RealClock
from provisioner.finops.ledger import Ledger
from provisioner.kube import client as kc
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import (
    KubeBackend,
    TestBinder,
    cluster_controllers,
    gpu_pod,
    node_class,
    node_pool,
)
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import in_turn, wait_until

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="drives its own API server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return cast(int, s.getsockname()[1])


def _start_run(url: str, *flags: str) -> subprocess.Popen[str]:
    """`provisioner run --cloud fake` as a process against the API fixture, fast windows, JSON logs."""
    cmd = [sys.executable, "-c", "from provisioner.cli import main; main()", "run", "--cloud", "fake"]
    cmd += ["--url", url, "--cluster-name", "e2e", "--batch-idle", "0.2", "--batch-max", "1"]
    cmd += ["--interval", "0.1", "--log-format", "json", *flags]
    return subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}
    )


def test_run_with_the_fake_cloud_turns_pending_gpu_pods_into_ready_nodes_and_back(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    backend = KubeBackend(kube_client, RealClock())  # type: ignore[arg-type]
    binder = TestBinder(backend)
    for obj in (node_class(), node_pool("gpu"), gpu_pod("train-0"), gpu_pod("train-1")):
        backend.create(obj)
    port = _free_port()
    proc = _start_run(kube_server.url, "--metrics-port", str(port))
    try:

        def settled() -> bool:
            nodes = backend.state.nodes.values()
            return (
                all(p.node_name for p in backend.state.pods.values())
                and bool(nodes)
                and all(n.labels.get("provisioner.sh/initialized") == "true" for n in nodes)
            )

        wait_until(
            "pods bound on initialized nodes",
            settled,
            step=in_turn(lambda: cluster_controllers(backend), binder.sync),
        )
        nodes = list(backend.state.nodes.values())
        assert all(n.ready for n in nodes)
        assert len({p.node_name for p in backend.state.pods.values()}) == 2, "one 1-GPU node per 1-GPU pod"
        claims = list(backend.state.claims.values())
        assert {c.status.provider_id for c in claims} == {n.provider_id for n in nodes}

        def scrape() -> str:
            return cast(
                str, urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            )

        wait_until("claims counted as Initialized", lambda: 'phase="Initialized"} 2.0' in scrape())
        metrics = scrape()
        assert 'provisioner_nodeclaims_created_total{nodepool="gpu"} 2.0' in metrics
        assert 'provisioner_cost_per_hour{nodepool="gpu"}' in metrics

        for p in list(backend.state.pods.values()):
            backend.delete("Pod", p.name, namespace=p.namespace)
        for c in claims:
            backend.delete("NodeClaim", c.name)
        wait_until(
            "claims terminated",
            lambda: not backend.state.claims and not backend.state.nodes,
            step=in_turn(lambda: cluster_controllers(backend), backend.settle),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        backend.close()
    assert proc.returncode == 0, err[-3000:]
    assert '"message": "provisioner stopped"' in err
    lease = kube_client.get(kc.LEASE, "provisioner-leader", namespace="default")
    assert not lease["spec"].get("holderIdentity"), "the lease is released on shutdown"


def test_run_writes_the_ledger_as_it_consolidates_and_report_reads_it_back(
    kube_server: KubeServer, kube_client: kc.KubeClient, tmp_path: Path
) -> None:
    import json

    from typer.testing import CliRunner

    from provisioner.cli.main import app

    backend = KubeBackend(kube_client, RealClock())  # type: ignore[arg-type]
    binder = TestBinder(backend)
    pool = node_pool("gpu", capacity_types=("on-demand",))
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    for obj in (node_class(), pool, gpu_pod("train-0", owner="Job"), gpu_pod("train-1", owner="Job")):
        backend.create(obj)
    ledger = tmp_path / "ledger.sqlite"
    proc = _start_run(
        kube_server.url,
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
            lambda: len({p.node_name for p in backend.state.pods.values() if p.node_name}) == 2,
            step=in_turn(lambda: cluster_controllers(backend), binder.sync),
        )
        backend.delete("Pod", "train-0", namespace="default")

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
            step=lambda: cluster_controllers(backend),  # the kubelet finishes the deleted pod
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        backend.close()
    assert proc.returncode == 0, err[-3000:]
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
