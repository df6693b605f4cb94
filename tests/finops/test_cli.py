"""`provisioner report ...` end to end: ledger file in, report out; cluster file in, tables out."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.finops.ledger import Ledger
from provisioner.finops.rows import BlockerRow
from tests.finops.test_ledger import T0, action, usage_row

runner = CliRunner()
NOW = (T0 + timedelta(hours=2)).isoformat()


@pytest.fixture
def ledger_file(ledger_url):
    """A ledger with two actions, a blocker and a usage sample, on SQLite and on PostgreSQL."""
    path = ledger_url
    with Ledger(path) as ledger:
        ledger.record_actions(
            [action("a", command_id="1", savings=2.0), action("b", command_id="2", pool="cpu", savings=0.5)]
        )
        ledger.record_blockers(
            [
                BlockerRow(
                    time=T0,
                    evaluation_id="e",
                    node="z",
                    nodepool="gpu",
                    kind="PDB",
                    method="single-node",
                    detail="PDB ml/web",
                )
            ]
        )
        ledger.record_usage([usage_row("a")])
    return path


def test_scale_down_json_from_a_ledger_file(ledger_file):
    result = runner.invoke(
        app,
        ["report", "scale-down", "--db", str(ledger_file), "--since", "7d", "--now", NOW, "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["total"]["savings_per_hour"] == pytest.approx(2.5)
    assert doc["total"]["realized_savings"] == pytest.approx(5.0)
    assert doc["topBlockers"][0]["kind"] == "PDB"


def test_scale_down_for_one_pool_as_html_to_a_file(ledger_file, tmp_path):
    out = tmp_path / "report.html"
    args = [
        "report",
        "scale-down",
        "--db",
        str(ledger_file),
        "--pool",
        "cpu",
        "--now",
        NOW,
        "--format",
        "html",
        "-o",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "<svg" in page and "pool cpu" in page
    assert ">a<" not in page  # the gpu pool's node is left out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--format", "xml"], "allowed are table, csv, json, html", id="bad-format"),
        pytest.param(["--since", "last tuesday"], "--since 'last tuesday'", id="bad-since"),
    ],
)
def test_bad_options_say_what_is_allowed(ledger_file, args, message):
    result = runner.invoke(app, ["report", "scale-down", "--db", str(ledger_file), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_missing_ledger_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["report", "scale-down", "--db", str(tmp_path / "nope.sqlite")])
    assert result.exit_code == 2
    assert "no ledger at" in result.output


def test_nodes_and_nodepools_from_a_file_of_objects(tmp_path):
    docs = [
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "gpu"}}}},
        },
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "kind": "Node",
                    "metadata": {
                        "name": "g1",
                        "labels": {"provisioner.sh/nodepool": "gpu", "provisioner.sh/gpu-count": "8"},
                    },
                    "status": {
                        "allocatable": {"cpu": "96"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
                {
                    "kind": "Node",
                    "metadata": {"name": "g2", "labels": {"provisioner.sh/nodepool": "gpu"}},
                    "status": {
                        "allocatable": {"cpu": "8"},
                        "conditions": [
                            {"type": "Ready", "status": "True"},
                            {"type": "DiskPressure", "status": "True"},
                        ],
                    },
                },
            ],
        },
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = runner.invoke(app, ["report", "nodes", "-f", str(path), "--format", "csv"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("name,nodepool,status,reasons")
    assert "g1,gpu,Not ready,GPU device plugin missing" in lines[1]
    assert "g2,gpu,Not ready,disk pressure" in lines[2]
    pools = runner.invoke(app, ["report", "nodepools", "-f", str(path)])
    assert pools.exit_code == 0, pools.output
    assert "2 node(s) not ready" in pools.stdout


def test_nodes_from_a_live_cluster_through_a_kubeconfig(tmp_path):
    """The official client against a Kubernetes API over HTTP (the controller tests' kmock server)."""
    from provisioner.kube import client as kc
    from tests.controllers.kube_server import KubeServer

    server = KubeServer().start()
    try:
        client = kc.KubeClient.connect(url=server.url)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-1",
                "labels": {"provisioner.sh/nodepool": "gpu", "provisioner.sh/gpu-count": "4"},
            },
            "spec": {"unschedulable": True},
            "status": {
                "allocatable": {"cpu": "48", "nvidia.com/gpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        client.create(kc.NODE, node)
        client.close()
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "test", "cluster": {"server": server.url}}],
                    "users": [{"name": "test", "user": {}}],
                    "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                    "current-context": "test",
                }
            )
        )
        result = runner.invoke(app, ["report", "nodes", "--kubeconfig", str(kubeconfig), "--format", "csv"])
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("gpu-1,")]
    assert line.startswith("gpu-1,gpu,Not ready,scheduling disabled,")
