"""`provisioner templates validate` reports every problem of a list at once (each at its own line), refuses
volume sizes that are not positive, and refuses requirement keys under `provisioner.sh/` that are none of
ours."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.test_templates_validate import VALID, run_validate, with_lines


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str], Path]:
    def _write(text: str) -> Path:
        path = tmp_path / "pool.yaml"
        path.write_text(text)
        return path

    return _write


def problems(lines: list[str]) -> list[str]:
    """`LINE: path: message` of each printed problem (the file name dropped)."""
    return [line.split(":", 1)[1].strip() for line in lines]


def test_every_bad_limit_is_reported(write: Callable[[str], Path]) -> None:
    code, lines, _ = run_validate(write(with_lines({8: 'cpu: "-4"', 9: "nvidia.com/gpu: lots"})))
    assert code == 1
    found = problems(lines)
    assert any(p.startswith("8: NodePool/gpu: spec.limits.cpu: '-4' is negative") for p in found), found
    assert any(p.startswith("9: NodePool/gpu: spec.limits[\"nvidia.com/gpu\"]: 'lots' is not") for p in found)


def test_every_unknown_capacity_type_is_reported_with_a_suggestion_even_beside_another_bad_requirement(
    write: Callable[[str], Path],
) -> None:
    text = with_lines({27: 'values: ["spott", "demand"]', 30: 'values: ["many"]'})
    code, lines, _ = run_validate(write(text))
    assert code == 1
    found = problems(lines)
    assert any("requirements[0].values[0]" in p and "'spott' (did you mean 'spot'?)" in p for p in found), (
        found
    )
    assert any(
        "requirements[0].values[1]" in p and "'demand' (did you mean 'on-demand'?)" in p for p in found
    )
    assert any("requirements[1].values[0]" in p and "integer value, got 'many'" in p for p in found)


def test_every_label_the_provisioner_sets_is_named_on_its_own_line(write: Callable[[str], Path]) -> None:
    text = VALID.replace(
        "  template:\n",
        "  template:\n    metadata:\n      labels:\n"
        "        provisioner.sh/nodepool: x\n        kubernetes.io/hostname: y\n",
    )
    code, lines, _ = run_validate(write(text))
    assert code == 1
    found = problems(lines)
    assert len([p for p in found if "is set by the provisioner" in p]) == 2, found
    assert any('labels["provisioner.sh/nodepool"]' in p for p in found)
    assert any('labels["kubernetes.io/hostname"]' in p for p in found)


@pytest.mark.parametrize(
    ("size", "says"),
    [
        pytest.param("-100Gi", "'-100Gi' is negative", id="negative"),
        pytest.param("0Gi", "must be more than 0", id="zero"),
        pytest.param("lots", "not a Kubernetes quantity", id="malformed"),
    ],
)
def test_a_volume_size_that_is_not_positive_is_an_error_at_its_line(
    write: Callable[[str], Path], size: str, says: str
) -> None:
    text = (
        VALID
        + "  blockDeviceMappings:\n    - deviceName: /dev/xvda\n      ebs:\n        volumeSize: "
        + size
        + "\n"
    )
    code, lines, _ = run_validate(write(text))
    assert code == 1
    (problem,) = [p for p in problems(lines) if "AWSNodeClass/gpu" in p]
    line = len(text.splitlines())
    assert problem.startswith(f"{line}: AWSNodeClass/gpu: spec.blockDeviceMappings[0].ebs.volumeSize: ")
    assert says in problem


def test_a_requirement_on_a_typo_under_our_prefix_is_an_error_with_did_you_mean(
    write: Callable[[str], Path],
) -> None:
    text = with_lines({25: "- key: provisioner.sh/capacity-typ"})
    code, lines, _ = run_validate(write(text))
    assert code == 1, "no node ever carries the key: the pool could never mean it"
    (problem,) = problems(lines)
    assert problem.startswith("25: NodePool/gpu: spec.template.spec.requirements[0].key: ")
    assert "warning" not in problem
    assert "did you mean 'provisioner.sh/capacity-type'?" in problem


def test_a_key_of_another_prefix_is_not_a_typo(write: Callable[[str], Path]) -> None:
    code, lines, _ = run_validate(write(with_lines({25: "- key: example.com/capacity-typ"})))
    assert (code, lines) == (0, [])
