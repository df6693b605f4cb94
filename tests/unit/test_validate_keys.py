"""`templates validate` refuses what can never be meant: requirement keys under `provisioner.sh/` that no
node carries, and limit or quota resources no instance type of the catalogs offers, each with "did you
mean"; these show beside the structural errors of the same document instead of waiting for them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.api import documents, key_checks
from provisioner.cli.main import app
from tests.unit.test_templates_validate import VALID, run_validate, with_lines

TEAM = """\
---
apiVersion: provisioner.sh/v1
kind: Team
metadata: {name: vision}
spec:
  namespaces: [vision]
  quotas:
    - nodePool: gpu
      resources: {nvidia.com/gpus: "8", cpu: "64"}
"""


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str], Path]:
    def _write(text: str) -> Path:
        path = tmp_path / "pool.yaml"
        path.write_text(text)
        return path

    return _write


def test_a_gpu_name_typo_is_refused_with_the_well_known_key(write: Callable[[str], Path]) -> None:
    code, lines, summary = run_validate(write(with_lines({25: "- key: provisioner.sh/gpu_name"})))
    assert code == 1
    (line,) = lines
    assert line.endswith(
        ":25: NodePool/gpu: spec.template.spec.requirements[0].key: provisioner.sh/gpu_name is not one of the "
        "provisioner's well-known labels (did you mean 'provisioner.sh/gpu-name'?)"
    )
    assert "1 error" in summary


def test_a_reservation_key_is_well_known() -> None:
    assert key_checks.unknown_key("provisioner.sh/capacity-reservation-id") is None
    assert key_checks.unknown_key("example.com/gpu_name") is None


def test_a_label_typo_stays_a_warning_and_shows_beside_a_structural_error(
    write: Callable[[str], Path],
) -> None:
    text = with_lines({6: "weight: 500"}).replace(
        "  template:\n    spec:\n",
        "  template:\n    metadata:\n      labels: {provisioner.sh/tier: gold}\n    spec:\n",
        1,
    )
    code, lines, _ = run_validate(write(text))
    assert code == 1
    assert any(":6: NodePool/gpu: spec.weight:" in line for line in lines), lines
    assert any('labels["provisioner.sh/tier"]: warning: ' in line for line in lines), lines


def test_a_requirement_typo_shows_beside_a_structural_error(write: Callable[[str], Path]) -> None:
    text = with_lines({6: "weight: 500", 25: "- key: provisioner.sh/gpu_name"})
    code, lines, _ = run_validate(write(text))
    assert code == 1
    assert [line.split(": ", 2)[1] for line in lines] == ["NodePool/gpu", "NodePool/gpu"]
    assert any("spec.template.spec.requirements[0].key" in line for line in lines)


@pytest.mark.parametrize(
    ("resource", "hint"),
    [
        pytest.param("nvidia.com/gpus", "did you mean 'nvidia.com/gpu'?", id="plural"),
        pytest.param("gpu", "did you mean 'nvidia.com/gpu'?", id="bare-gpu"),
        pytest.param("memroy", "did you mean 'memory'?", id="misspelt"),
        pytest.param("example.com/fpga", "offered: ", id="unknown"),
    ],
)
def test_a_limit_no_instance_type_offers_is_refused(
    write: Callable[[str], Path], resource: str, hint: str
) -> None:
    code, lines, _ = run_validate(write(with_lines({9: f"{resource}: 8"})))
    assert code == 1
    (line,) = lines
    assert ":9: NodePool/gpu: spec.limits" in line
    assert f"no instance type in the catalogs offers a resource {resource!r}; {hint}" in line


def test_nodes_is_a_pool_limit(write: Callable[[str], Path]) -> None:
    assert run_validate(write(with_lines({9: "nodes: 8"})))[0] == 0


def test_a_team_quota_on_a_resource_no_instance_type_offers_is_refused(write: Callable[[str], Path]) -> None:
    code, lines, _ = run_validate(write(VALID + TEAM))
    assert code == 1
    (line,) = lines
    assert 'Team/vision: spec.quotas[0].resources["nvidia.com/gpus"]: ' in line
    assert "did you mean 'nvidia.com/gpu'?" in line


def test_without_the_catalogs_only_known_misspellings_warn() -> None:
    docs = documents.parse_yaml_documents(with_lines({9: "example.com/fpga: 8"}) + TEAM, source="x.yaml")
    report = documents.validate_documents(docs)
    assert report.errors == []
    assert [p.path for p in report.warnings] == ['spec.quotas[0].resources["nvidia.com/gpus"]']


def test_a_scenario_with_a_typo_key_is_refused_by_simulate(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "apiVersion: provisioner.sh/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n"
        "spec: {catalog: aws, region: us-east-1}\n---\n"
        + with_lines({25: "- key: provisioner.sh/gpu_name", 27: 'values: ["h100"]'})
    )
    result = CliRunner().invoke(app, ["simulate", str(scenario)])
    assert result.exit_code != 0
    assert "did you mean 'provisioner.sh/gpu-name'?" in result.stdout + result.stderr
