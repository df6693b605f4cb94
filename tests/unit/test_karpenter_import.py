"""`provisioner templates import-karpenter`: Karpenter v1 NodePools and EC2NodeClasses, as users write
them, become ours and validate; whatever cannot be carried over is a warning naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.api import documents, karpenter, karpenter_providers, labels
from provisioner.cli.main import app

DATA = Path(__file__).resolve().parents[1] / "data" / "karpenter"
EXAMPLES = sorted(DATA.glob("*.yaml"))


def run_import(*args: str | Path) -> tuple[int, str, list[str]]:
    result = CliRunner().invoke(app, ["templates", "import-karpenter", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr.splitlines()


def convert(text: str) -> karpenter.Conversion:
    return karpenter.convert_documents(documents.parse_yaml_documents(text, source="in.yaml"))


def test_there_are_realistic_examples_to_import() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "general-purpose",
        "spot",
        "gpu",
        "multi-arch-exported",
        "exported-list",
    }


def test_a_kubectl_list_is_converted_item_by_item_with_lines_in_the_file() -> None:
    code, stdout, stderr = run_import(DATA / "exported-list.yaml")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(stdout) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("NodePool", "on-demand-arm"),
        ("AWSNodeClass", "arm"),
    ]
    assert stderr[0] == (
        f"{DATA / 'exported-list.yaml'}:8: NodePool/on-demand-arm: metadata.resourceVersion: warning: not carried "
        "over: server-set metadata"
    )
    assert stderr[-1] == "2 objects converted from 1 file, 1 field not carried over (see the warnings above)"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_karpenter_example_imports_and_then_validates(example: Path, tmp_path: Path) -> None:
    code, _, _ = run_import(example, "--write", tmp_path)
    assert code == 0
    written = tmp_path / f"{example.stem}.yaml"
    assert written.exists()
    result = CliRunner().invoke(app, ["templates", "validate", str(written)])
    assert result.exit_code == 0, result.stdout
    report = documents.validate_paths([written])
    source_kinds = [d.data["kind"] for d in documents.expand_lists(documents.read_yaml_file(example))]
    expected = [{"NodePool": "NodePool", "EC2NodeClass": "AWSNodeClass"}[k] for k in source_kinds]
    assert [o.kind for o in report.objects] == expected


def test_all_examples_imported_together_validate_without_dangling_refs(tmp_path: Path) -> None:
    code, _, _ = run_import(*EXAMPLES, "--write", tmp_path)
    assert code == 0
    report = documents.validate_paths([tmp_path])
    assert report.ok
    assert report.warnings == []


def test_without_output_folder_the_result_goes_to_stdout_as_yaml() -> None:
    code, stdout, _ = run_import(DATA / "general-purpose.yaml")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(stdout) if d]
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [
        ("provisioner.sh/v1", "NodePool"),
        ("provisioner.sh/v1", "AWSNodeClass"),
    ]


def test_group_kind_and_label_prefixes_are_mapped() -> None:
    conversion = convert((DATA / "gpu.yaml").read_text())
    pool, node_class = conversion.objects
    spec = pool["spec"]["template"]["spec"]
    assert spec["nodeClassRef"] == {"group": "provisioner.sh", "kind": "AWSNodeClass", "name": "gpu"}
    keys = [r["key"] for r in spec["requirements"]]
    assert keys == [labels.CAPACITY_TYPE, labels.GPU_NAME, labels.GPU_COUNT, labels.GPU_MANUFACTURER]
    assert spec["requirements"][1]["values"] == ["a10g", "t4"]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": 16, "cpu": 512}
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["expireAfter"] == "Never"
    assert node_class["kind"] == "AWSNodeClass"
    assert node_class["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "200Gi"
    assert node_class["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 2


def test_min_values_expire_after_budgets_and_architectures_survive() -> None:
    (pool,) = convert((DATA / "spot.yaml").read_text()).objects
    spec = pool["spec"]
    reqs = {r["key"]: r for r in spec["template"]["spec"]["requirements"]}
    assert reqs[labels.INSTANCE_FAMILY]["minValues"] == 5
    assert reqs[labels.INSTANCE_TYPE] == {"key": labels.INSTANCE_TYPE, "operator": "Exists", "minValues": 10}
    assert reqs[labels.ARCH]["values"] == ["amd64", "arm64"]
    assert reqs[labels.INSTANCE_CPU] == {"key": labels.INSTANCE_CPU, "operator": "Lt", "values": ["65"]}
    assert spec["template"]["spec"]["expireAfter"] == "168h"
    assert spec["template"]["spec"]["terminationGracePeriod"] == "2h"
    assert spec["disruption"]["budgets"][1] == {
        "nodes": "0",
        "schedule": "0 9 * * mon-fri",
        "duration": "8h",
        "reasons": ["Underutilized"],
    }
    assert pool["metadata"]["annotations"] == {
        "kubernetes.io/description": "Spot capacity for interruptible work"
    }


WARNINGS = [
    pytest.param(
        "gpu.yaml",
        78,
        "EC2NodeClass/gpu: spec.kubelet.maxPods: warning: not carried over: kubelet",
        id="kubelet",
    ),
    pytest.param(
        "gpu.yaml", 31, "warning: GPU names lowercased: ['A10G', 't4'] -> ['a10g', 't4']", id="gpu-case"
    ),
    pytest.param(
        "gpu.yaml", 91, 'spec.tags["karpenter.sh/discovery"]: warning: not carried over', id="karpenter-tag"
    ),
    pytest.param(
        "multi-arch-exported.yaml",
        69,
        "spec.amiFamily: warning: not carried over: AMI family 'Windows2019' is not supported",
        id="ami-family",
    ),
    pytest.param(
        "multi-arch-exported.yaml",
        74,
        "spec.instanceStorePolicy: warning: not carried over",
        id="instance-store",
    ),
    pytest.param(
        "multi-arch-exported.yaml",
        72,
        "spec.amiSelectorTerms[1].ssmParameter: warning: not carried over",
        id="ssm-parameter",
    ),
    pytest.param(
        "multi-arch-exported.yaml", 51, "NodePool/multi-arch: status: warning: not carried over", id="status"
    ),
    pytest.param(
        "multi-arch-exported.yaml",
        11,
        "metadata.creationTimestamp: warning: not carried over: server-set metadata",
        id="server-metadata",
    ),
]


@pytest.mark.parametrize(("example", "line", "expected"), WARNINGS)
def test_what_cannot_be_carried_over_is_a_located_warning(example: str, line: int, expected: str) -> None:
    code, _, stderr = run_import(DATA / example)
    assert code == 0
    matching = [entry for entry in stderr if expected in entry]
    assert matching == [next(iter(matching), None)] and matching, stderr
    assert matching[0].startswith(f"{DATA / example}:{line}: ")


def test_nothing_is_dropped_silently() -> None:
    """Every key path of the input that is missing from the output has a warning at or above it."""

    def leaves(data: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
        if isinstance(data, dict) and data:
            for key, value in data.items():
                yield from leaves(value, (*prefix, key))
        elif isinstance(data, list) and data:
            for i, value in enumerate(data):
                yield from leaves(value, (*prefix, i))
        else:
            yield prefix

    for example in EXAMPLES:
        docs = documents.expand_lists(documents.read_yaml_file(example))
        for doc in docs:
            obj, problems, _ = karpenter.convert_document(doc)
            assert obj is not None
            out_leaves = {documents.format_path(p) for p in leaves(obj)}
            warned = [p.path for p in problems]
            for path in leaves(doc.data):
                text = documents.format_path(path)
                renamed = any(str(k) in karpenter_providers.LABEL_MAP for k in path) or path[:1] in (
                    ("apiVersion",),
                    ("kind",),
                )
                kept = text in out_leaves or renamed or "nodeClassRef" in text or "requirements" in text
                if not kept:
                    assert any(text.startswith(w) for w in warned), f"{example.name}: {text} dropped silently"


def test_a_node_class_ref_to_another_provider_is_an_error() -> None:
    conversion = convert(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: azure\nspec:\n  template:\n    spec:\n"
        "      nodeClassRef:\n        group: karpenter.azure.com\n        kind: AKSNodeClass\n        name: default\n"
    )
    assert not conversion.ok
    assert conversion.objects == []
    (problem,) = conversion.problems
    assert str(problem).startswith(
        "in.yaml:8: NodePool/azure: spec.template.spec.nodeClassRef: cannot convert"
    )


def test_old_karpenter_versions_are_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: old\nspec: {}\n")
    code, _, stderr = run_import(path)
    assert code == 1
    assert f"{path}:1: NodePool/old: apiVersion: karpenter.sh/v1beta1 NodePool is not supported" in stderr[0]


def test_our_own_objects_pass_through_and_other_kinds_are_skipped_with_a_warning() -> None:
    conversion = convert(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n"
        + (Path(__file__).resolve().parents[2] / "nodepool_templates" / "cpu-default.yaml").read_text()
    )
    assert conversion.ok
    assert conversion.converted == 0
    assert [o["kind"] for o in conversion.objects] == ["NodePool", "NodePool", "AWSNodeClass", "GCPNodeClass"]
    assert [str(p) for p in conversion.problems] == [
        "in.yaml:1: ConfigMap/x: warning: skipped: v1/ConfigMap is not a Karpenter NodePool or EC2NodeClass"
    ]


def test_unreadable_input_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x00\x01")
    code, _, stderr = run_import(binary, tmp_path / "missing.yaml")
    assert code == 1
    assert stderr[0] == f"{binary}:1: not a text file (it holds NUL bytes); expected YAML"
    assert stderr[1].startswith(f"{tmp_path / 'missing.yaml'}:1: cannot read: ")


def test_an_import_whose_result_does_not_validate_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: bad\nspec:\n  weight: 1000\n  template:\n"
        "    spec:\n      nodeClassRef:\n        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n"
        "        name: default\n"
    )
    code, _, stderr = run_import(path, "--write", tmp_path / "out")
    assert code == 1
    assert any("spec.weight: Input should be less than or equal to 100" in line for line in stderr)
