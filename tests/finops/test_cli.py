"""`provisioner report ...` end to end: ledger file in, report out; cluster file in, tables out."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.finops.ledger import Ledger
from testkit.builders import NOW as T0
from testkit.builders import action_row as action
from testkit.builders import blocker_row, usage_row

runner = CliRunner()
NOW = (T0 + timedelta(hours=2)).isoformat()


@pytest.fixture
def ledger_file(ledger_url: str) -> str:
    """A ledger with two actions, a blocker and a usage sample, on SQLite and on PostgreSQL."""
    path = ledger_url
    with Ledger(path) as ledger:
        ledger.record_actions(
            [action("a", command_id="1", savings=2.0), action("b", command_id="2", pool="cpu", savings=0.5)]
        )
        ledger.record_blockers([blocker_row()])
        ledger.record_usage([usage_row("a")])
    return path


def test_scale_down_json_from_a_ledger_file(ledger_file: str) -> None:
    result = runner.invoke(
        app,
        ["report", "scale-down", "--ledger", str(ledger_file), "--since", "7d", "--now", NOW, "-o", "json"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["total"]["savingsPerHour"] == pytest.approx(2.5)
    assert doc["total"]["realizedSavings"] == pytest.approx(5.0)
    assert doc["topBlockers"][0]["kind"] == "PDB"


def test_scale_down_for_one_pool_as_html_to_a_file(ledger_file: str, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    args = [
        "report",
        "scale-down",
        "--ledger",
        str(ledger_file),
        "--pool",
        "cpu",
        "--now",
        NOW,
        "--write",
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
        pytest.param(["-o", "xml"], "error: --output: 'xml' is not a format", id="bad-format"),
        pytest.param(
            ["--write", "r.pdf"], "error: --write: r.pdf: the extension does not name", id="bad-extension"
        ),
        pytest.param(
            ["--pool", "gpux"],
            "error: --pool: 'gpux': no such pool in the ledger; pools: cpu, gpu",
            id="bad-pool",
        ),
        pytest.param(
            ["--since", "last tuesday"], "error: --since: 'last tuesday' is not a span", id="bad-since"
        ),
        pytest.param(["--now", "notatime"], "error: --now: 'notatime' is not a span", id="bad-now"),
        pytest.param(
            ["--now", "2026-01-01T00:00Z", "--since", "2026-02-01T00:00Z"],
            "error: --since: '2026-02-01T00:00Z' is after --now",
            id="since-after-now",
        ),
    ],
)
def test_bad_options_say_what_is_allowed(ledger_file: str, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["report", "scale-down", "--ledger", str(ledger_file), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_missing_ledger_file_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "scale-down", "--ledger", str(tmp_path / "nope.sqlite")])
    assert result.exit_code == 2
    assert "no ledger at" in result.output


def test_nodes_and_nodepools_from_a_file_of_objects(tmp_path: Path) -> None:
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
    result = runner.invoke(app, ["report", "nodes", "-f", str(path), "-o", "csv"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("name,nodepool,status,reasons")
    assert "g1,gpu,Not ready,GPU device plugin missing" in lines[1]
    assert "g2,gpu,Not ready,disk pressure" in lines[2]
    pools = runner.invoke(app, ["report", "nodepools", "-f", str(path)])
    assert pools.exit_code == 0, pools.output
    assert "2 node(s) not ready" in pools.stdout


def test_nodes_from_a_live_cluster_through_a_kubeconfig(tmp_path: Path) -> None:
    """The official client against a Kubernetes API over HTTP (the controller tests' kmock server)."""
    from provisioner.kube import client as kc
    from testkit.controllers.kube_server import KubeServer

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
        result = runner.invoke(app, ["report", "nodes", "--kubeconfig", str(kubeconfig), "-o", "csv"])
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("gpu-1,")]
    assert line.startswith("gpu-1,gpu,Not ready,scheduling disabled,")


def test_the_format_follows_the_written_file_unless_o_says(ledger_file: str, tmp_path: Path) -> None:
    base = ["report", "scale-down", "--ledger", str(ledger_file), "--now", NOW]
    as_csv = tmp_path / "r.csv"
    assert runner.invoke(app, [*base, "--write", str(as_csv)]).exit_code == 0
    assert as_csv.read_text().startswith("section,name,")
    forced = tmp_path / "r.txt"
    assert runner.invoke(app, [*base, "-o", "json", "--write", str(forced)]).exit_code == 0
    assert json.loads(forced.read_text())["total"]["nodesReplaced"] == 2


def test_a_table_fits_the_width_it_is_given() -> None:
    from provisioner.finops.reports.text import table

    rows = [["a-very-long-node-name-that-goes-on-and-on", "gpu", 12.5]]
    lines = table(("Node", "Pool", "Saved $/h"), rows, width=30).splitlines()
    assert max(len(line) for line in lines) <= 30
    assert "…" in lines[2] and "12.50" in lines[2], "text is cut, numbers never"
    narrow = table(("Node", "Pool", "Saved $/h"), rows, width=20, title="Actions").splitlines()
    assert narrow[0] == "Actions" and "Saved $/h: 12.50" in narrow, "one value per line when no table fits"
    assert max(len(line) for line in narrow) <= 20


def test_costs_by_team_and_as_focus_columns(ledger_file: str) -> None:
    from provisioner.finops.reports.focus import FOCUS_COLUMNS

    result = runner.invoke(app, ["report", "costs", "--ledger", str(ledger_file), "--now", NOW, "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["total"] == pytest.approx(32.0), "one 1 h sample of a $32/h node"
    focus = runner.invoke(
        app, ["report", "costs", "--ledger", str(ledger_file), "--now", NOW, "-o", "focus-csv"]
    )
    assert focus.exit_code == 0, focus.output
    header, *rows = focus.stdout.splitlines()
    assert tuple(header.split(",")) == FOCUS_COLUMNS
    assert rows


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("provisioner ")
