"""The README's YAML examples run as written: each ```yaml block is validated (`templates validate`) when
it holds only NodePools and NodeClasses, else simulated against the bundled templates
(`provisioner simulate nodepool_templates/ block.yaml`), and its pods land where the README says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_simulate import ROOT, cli

README = ROOT / "README.md"
TEMPLATES = ROOT / "nodepool_templates"
TEMPLATE_KINDS = {"NodePool", "AWSNodeClass", "GCPNodeClass"}

WHERE_THE_README_SAYS = {
    "default/train": "a100-standard-aws",
    "default/notebook": "t4-best-effort-aws",
    "default/chat-0": "inference-only-aws",
    "default/chat-1": "inference-only-aws",
    "default/pretrain-0": "h100-prod-aws",
    "default/etl-0": "spot-only-aws",
    "default/etl-2": "spot-only-aws",
    "default/embed-0": "h100-mig",
    "default/embed-6": "h100-mig",
}


def yaml_blocks() -> list[tuple[int, str]]:
    """(line, text) of every ```yaml block."""
    text = README.read_text()
    return [
        (text[: m.start()].count("\n") + 2, m.group(1))
        for m in re.finditer(r"^```yaml\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)
    ]


BLOCKS = yaml_blocks()


def test_the_readme_has_yaml_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize(("line", "text"), BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_every_yaml_block_runs_as_written(tmp_path: Path, line: int, text: str) -> None:
    kinds = {d.get("kind") for d in yaml.safe_load_all(text) if d}
    block = tmp_path / f"readme-{line}.yaml"
    block.write_text(text)
    if kinds <= TEMPLATE_KINDS:
        result = cli("templates", "validate", block)
        assert result.returncode == 0, result.stdout + result.stderr
        return
    result = cli("simulate", TEMPLATES, block, "--output", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert not doc["unschedulable"], doc["unschedulable"]
    landed = {pod: claim["nodePool"] for claim in doc["nodeClaims"] for pod in claim["pods"]}
    expected = {pod: pool for pod, pool in WHERE_THE_README_SAYS.items() if pod in landed}
    assert {pod: landed[pod] for pod in expected} == expected
