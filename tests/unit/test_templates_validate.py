"""`provisioner templates validate`: exit codes, and one precise `FILE:LINE: Kind/name: path: message` line
per problem. Bad-input cases mutate one line of a valid template and expect that very line back."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from provisioner.api import documents
from provisioner.cli.main import app

REPO = Path(__file__).resolve().parents[2]

# Line numbers matter: the tests below replace a numbered line and expect that number back.
VALID = """\
apiVersion: provisioner.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  weight: 50
  limits:
    cpu: "100"
    nvidia.com/gpu: 8
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
      - nodes: "10%"
        schedule: "0 9 * * 1-5"
        duration: 8h
  template:
    spec:
      nodeClassRef:
        group: provisioner.sh
        kind: AWSNodeClass
        name: gpu
      expireAfter: 720h
      requirements:
        - key: provisioner.sh/capacity-type
          operator: In
          values: ["spot"]
        - key: provisioner.sh/instance-cpu
          operator: Gt
          values: ["0"]
---
apiVersion: provisioner.sh/v1
kind: AWSNodeClass
metadata:
  name: gpu
spec:
  role: node-role
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        provisioner.sh/discovery: my-cluster
  securityGroupSelectorTerms:
    - id: sg-0123456789abcdef0
"""


def with_lines(replacements: dict[int, str], text: str = VALID) -> str:
    """The template with numbered lines (1-based) replaced, indentation kept."""
    lines = text.splitlines()
    for number, content in replacements.items():
        old = lines[number - 1]
        indent = old[: len(old) - len(old.lstrip())]
        lines[number - 1] = indent + content
    return "\n".join(lines) + "\n"


def run_validate(*paths: Path | str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, ["templates", "validate", *map(str, paths)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout.splitlines(), result.stderr


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    def _write(text: str | bytes, name: str = "pool.yaml") -> Path:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    return _write


def test_the_valid_template_validates_with_exit_0(write: Callable[..., Path]) -> None:
    code, lines, stderr = run_validate(write(VALID))
    assert (code, lines) == (0, [])
    assert "2 documents: all valid" in stderr


def test_bundled_nodepool_templates_validate_with_exit_0_and_no_warnings() -> None:
    code, lines, _ = run_validate(REPO / "nodepool_templates")
    assert code == 0
    assert lines == []


def test_every_bundled_template_file_starts_with_a_comment_saying_who_it_is_for() -> None:
    files = sorted((REPO / "nodepool_templates").glob("*.yaml"))
    assert {f.stem for f in files} >= {
        "h100-prod",
        "a100-standard",
        "t4-best-effort",
        "inference-only",
        "spot-only",
        "cpu-default",
    }
    for file in files:
        text = file.read_text()
        assert text.startswith("# "), file
        assert "For:" in text and "Knobs to turn:" in text, file
        report = documents.validate_paths([file])
        kinds = {o.kind for o in report.objects}
        assert kinds == {"NodePool", "AWSNodeClass", "GCPNodeClass"}, file


BAD_LINES = [
    pytest.param(
        {23: "expireAftr: 720h"},
        23,
        "NodePool/gpu: spec.template.spec.expireAftr: unknown field 'expireAftr' (did you mean 'expireAfter'?)",
        id="unknown-field",
    ),
    pytest.param(
        {26: "operator: Equals"},
        26,
        "spec.template.spec.requirements[0].operator: Input should be 'In', 'NotIn', 'Exists', "
        "'DoesNotExist', 'Gt' or 'Lt', got \"Equals\"",
        id="wrong-operator",
    ),
    pytest.param(
        {30: 'values: ["zero"]'},
        30,
        "spec.template.spec.requirements[1].values[0]: operator Gt takes an integer value, got 'zero'",
        id="gt-with-a-non-integer",
    ),
    pytest.param(
        {29: "operator: Lt", 30: 'values: ["1.5"]'},
        30,
        "spec.template.spec.requirements[1].values[0]: operator Lt takes an integer value, got '1.5'",
        id="lt-with-a-non-integer",
    ),
    pytest.param(
        {6: "weight: 101"},
        6,
        "spec.weight: Input should be less than or equal to 100, got 101",
        id="weight-over-100",
    ),
    pytest.param(
        {6: "weight: 0"},
        6,
        "spec.weight: Input should be greater than or equal to 1, got 0",
        id="weight-zero",
    ),
    pytest.param(
        {6: 'weight: "50"'},
        6,
        'spec.weight: Input should be a valid integer, got "50"',
        id="weight-as-a-string",
    ),
    pytest.param(
        {8: 'cpu: "-1"'},
        8,
        "spec.limits.cpu: '-1' is negative; amounts must be >= 0",
        id="negative-limit",
    ),
    pytest.param(
        {9: "nvidia.com/gpu: eight"},
        9,
        "spec.limits[\"nvidia.com/gpu\"]: 'eight' is not a Kubernetes quantity",
        id="limit-not-a-quantity",
    ),
    pytest.param(
        {14: '- nodes: "101%"'},
        14,
        "spec.disruption.budgets[0].nodes: '101%' is not a node count or percent",
        id="budget-percent-over-100",
    ),
    pytest.param(
        {15: 'schedule: "0 25 * * *"'},
        15,
        "spec.disruption.budgets[0].schedule: '0 25 * * *' is not a cron schedule",
        id="bad-cron",
    ),
    pytest.param(
        {16: "duration: 8 hours"},
        16,
        "spec.disruption.budgets[0].duration: '8 hours' is not a duration such as 30s, 15m, 1h30m or 720h",
        id="bad-budget-duration",
    ),
    pytest.param(
        {23: "expireAfter: 30d"},
        23,
        "spec.template.spec.expireAfter: '30d' is not a duration such as 30s, 15m, 1h30m or 720h, or Never",
        id="bad-expire-after",
    ),
    pytest.param(
        {12: "consolidateAfter: soon"},
        12,
        "spec.disruption.consolidateAfter: 'soon' is not a duration",
        id="bad-consolidate-after",
    ),
    pytest.param(
        {28: "- key: provisioner.sh/capacity-type", 29: "operator: NotIn", 30: 'values: ["spot"]'},
        28,
        "spec.template.spec.requirements[1]: contradictory requirements: provisioner.sh/capacity-type: "
        "no value satisfies every requirement (In ['spot'], NotIn ['spot'])",
        id="contradictory-requirements",
    ),
    pytest.param(
        {21: "kind: EC2NodeClass"},
        21,
        "spec.template.spec.nodeClassRef.kind: kind 'EC2NodeClass' is not known; allowed: AWSNodeClass, "
        "GCPNodeClass",
        id="unknown-node-class-ref-kind",
    ),
    pytest.param(
        {11: "consolidationPolicy: WhenIdle"},
        11,
        "spec.disruption.consolidationPolicy: Input should be 'WhenEmpty' or 'WhenEmptyOrUnderutilized'",
        id="unknown-consolidation-policy",
    ),
    pytest.param(
        {27: 'values: ["cheap"]'},
        27,
        "spec.template.spec.requirements[0].values[0]: provisioner.sh/capacity-type: unknown capacity type "
        "'cheap'; allowed: spot, on-demand, reserved",
        id="unknown-capacity-type",
    ),
    pytest.param(
        {4: "name: GPU_pool"},
        4,
        "metadata.name: 'GPU_pool' is not a valid name",
        id="bad-name",
    ),
    pytest.param(
        {37: 'role: ""'},
        37,
        "AWSNodeClass/gpu: spec.role: give exactly one of role or instanceProfile",
        id="node-class-with-no-role",
    ),
]


@pytest.mark.parametrize(("replacements", "line", "expected"), BAD_LINES)
def test_a_bad_field_is_reported_once_at_its_own_line(
    write: Callable[..., Path], replacements: dict[int, str], line: int, expected: str
) -> None:
    path = write(with_lines(replacements))
    code, lines, _ = run_validate(path)
    assert code == 1
    errors = [entry for entry in lines if ": warning: " not in entry]
    assert len(errors) == 1, lines
    assert errors[0].startswith(f"{path}:{line}: "), errors[0]
    assert expected in errors[0]


def test_a_missing_required_field_points_at_its_parent(write: Callable[..., Path]) -> None:
    text = VALID.replace(
        "      nodeClassRef:\n        group: provisioner.sh\n        kind: AWSNodeClass\n        name: gpu\n",
        "",
    )
    path = write(text)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert lines == [
        f"{path}:18: NodePool/gpu: spec.template.spec.nodeClassRef: required field 'nodeClassRef' is missing"
    ]


def test_several_problems_each_get_their_own_line_in_file_order(write: Callable[..., Path]) -> None:
    path = write(with_lines({6: "weight: 500", 16: "duration: forever", 26: "operator: Equals"}))
    code, lines, _ = run_validate(path)
    assert code == 1
    assert [entry.split(":")[1] for entry in lines] == ["6", "16", "26"]


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        pytest.param("apiVersion: [unclosed\nkind: NodePool\n", 2, "not valid YAML", id="unclosed-flow"),
        pytest.param("a: b\n  c: d\n", 2, "not valid YAML", id="bad-indentation"),
        pytest.param("key: 'open quote\n", 2, "not valid YAML", id="unterminated-quote"),
        pytest.param("a: 1\na: 2\n", 2, "duplicate key 'a' (first at line 1)", id="duplicate-key"),
        pytest.param("? [a, b]\n: c\n", 1, "mapping keys must be strings", id="complex-key"),
        pytest.param("just some words\n", 1, "document 1 is the scalar", id="a-scalar"),
        pytest.param("- a\n- b\n", 1, "document 1 is a list", id="a-list"),
        pytest.param("a: &x [*x]\n", 1, "recursive alias", id="recursive-alias"),
        pytest.param("a: &x {<<: *x}\n", 1, "recursive alias", id="recursive-merge"),
        pytest.param(
            "a: " + "[" * 3000 + "]" * 3000 + "\n", 1, "nesting deeper than 64 levels", id="too-deep"
        ),
    ],
)
def test_a_document_that_is_not_usable_yaml_is_one_located_error(
    write: Callable[..., Path], content: str, line: int, expected: str
) -> None:
    path = write(content)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}:{line}: ")
    assert expected in lines[0]


def test_documents_before_a_syntax_error_are_still_checked(write: Callable[..., Path]) -> None:
    path = write(with_lines({6: "weight: 101"}) + "---\nkind: [\n")
    code, lines, _ = run_validate(path)
    assert code == 1
    assert [entry.split(":")[1] for entry in lines] == ["6", f"{VALID.count(chr(10)) + 3}"]


def test_merge_keys_and_anchors_are_read_as_kubernetes_reads_them() -> None:
    text = "base: &base\n  weight: 10\n  kind: x\npool:\n  kind: y\n  <<: *base\n"
    (doc,) = documents.parse_yaml_documents(text)
    assert doc.data["pool"] == {"kind": "y", "weight": 10}
    assert doc.line_of(("pool", "kind")) == 5
    assert doc.line_of(("pool", "weight")) == 2
    data, line = doc
    assert (data, line) == (doc.data, 1)


def test_an_alias_bomb_is_refused_not_expanded(write: Callable[..., Path]) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"{'abcdefghij'[i]}: &{'abcdefghij'[i]} [{', '.join(['*' + 'abcdefghij'[i - 1]] * 10)}]\n"
    path = write(bomb)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert "alias bomb" in lines[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"", "file holds no YAML documents", id="empty"),
        pytest.param(b"# only a comment\n---\n", "file holds no YAML documents", id="only-comments"),
        pytest.param(
            b"\x7fELF\x02\x01\x01\x00\x00\x00binary",
            "not a text file (it holds NUL bytes); expected YAML",
            id="binary",
        ),
        pytest.param(b"name: caf\xe9\n", "not UTF-8 text; expected YAML", id="latin-1"),
    ],
)
def test_empty_binary_and_non_utf8_files_are_errors_not_tracebacks(
    write: Callable[..., Path], content: bytes, expected: str
) -> None:
    path = write(content)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert lines == [f"{path}:1: {expected}"]


def test_unreadable_and_missing_paths_are_errors_not_tracebacks(tmp_path: Path) -> None:
    with pytest.raises(documents.DocumentError) as err:
        documents.read_yaml_file(tmp_path)  # a folder read as a file: the OS refuses
    assert err.value.problem.message.startswith("cannot read: ")
    code, lines, _ = run_validate(tmp_path / "nope.yaml")
    assert (code, lines) == (1, [f"{tmp_path / 'nope.yaml'}:1: no such file or folder"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_an_error(
    write: Callable[..., Path],
) -> None:  # pragma: no cover - not root in CI
    path = write(VALID)
    path.chmod(0)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert "cannot read" in lines[0]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\n",
            "apiVersion: karpenter.sh/v1 is Karpenter's API; convert it with "
            "`provisioner templates import-karpenter FILE`",
            id="karpenter-api",
        ),
        pytest.param(
            "apiVersion: provisioner.sh/v2\nkind: NodePool\n",
            'apiVersion: apiVersion "provisioner.sh/v2" is not known; allowed: provisioner.sh/v1',
            id="unknown-version",
        ),
        pytest.param(
            "apiVersion: provisioner.sh/v1\nkind: NodePol\n",
            "kind: kind \"NodePol\" is not known (did you mean 'NodePool'?)",
            id="misspelled-kind",
        ),
    ],
)
def test_unknown_api_versions_and_kinds_say_what_is_allowed(
    write: Callable[..., Path], header: str, expected: str
) -> None:
    path = write(header + "metadata:\n  name: x\nspec: {}\n")
    code, lines, _ = run_validate(path)
    assert code == 1
    assert len(lines) == 1
    assert expected in lines[0]


def test_the_same_name_in_two_files_is_a_duplicate(write: Callable[..., Path]) -> None:
    first = write(VALID, "a.yaml")
    second = write(VALID.split("---\n")[0], "b.yaml")
    code, lines, _ = run_validate(first, second)
    assert code == 1
    assert lines == [
        f"{second}:4: NodePool/gpu: metadata.name: duplicate name: NodePool 'gpu' is also defined at {first}:4"
    ]


def test_a_node_class_ref_to_a_class_not_in_the_set_is_a_warning_and_exit_0(
    write: Callable[..., Path],
) -> None:
    path = write(VALID.split("---\n")[0])
    code, lines, _ = run_validate(path)
    assert code == 0
    assert lines == [
        f"{path}:22: NodePool/gpu: spec.template.spec.nodeClassRef.name: warning: no AWSNodeClass named 'gpu' "
        "among the files checked (fine if it exists in the cluster)"
    ]


def test_strict_turns_warnings_into_exit_1(write: Callable[..., Path]) -> None:
    path = write(VALID.split("---\n")[0])
    result = CliRunner().invoke(app, ["templates", "validate", "--strict", str(path)])
    assert result.exit_code == 1


def test_karpenter_label_keys_and_uppercase_gpu_names_are_warned_about(write: Callable[..., Path]) -> None:
    path = write(
        with_lines(
            {
                25: "- key: karpenter.sh/capacity-type",
                28: "- key: provisioner.sh/gpu-name",
                29: "operator: In",
                30: 'values: ["H100"]',
            }
        )
    )
    code, lines, _ = run_validate(path)
    assert code == 0
    lines = [entry for entry in lines if "GPU pool without" not in entry]
    assert [entry.split(": warning: ")[1] for entry in lines] == [
        "karpenter.sh/capacity-type is Karpenter's label; nodes here carry provisioner.sh/capacity-type",
        "GPU name 'H100' is not a known model; did you mean 'h100'?",
    ]
    assert [entry.split(":")[1] for entry in lines] == ["25", "30"]


def test_a_kubectl_list_is_validated_item_by_item_at_the_items_lines(write: Callable[..., Path]) -> None:
    items = "".join("  - " + "\n    ".join(doc.splitlines()) + "\n" for doc in VALID.split("---\n"))
    text = "apiVersion: v1\nkind: List\nitems:\n" + items.replace("weight: 50", "weight: 500")
    path = write(text)
    code, lines, _ = run_validate(path)
    assert code == 1
    assert lines == [
        f"{path}:9: NodePool/gpu: spec.weight: Input should be less than or equal to 100, got 500"
    ]


def test_a_dash_reads_standard_input() -> None:
    result = CliRunner().invoke(app, ["templates", "validate", "-"], input=with_lines({6: "weight: 0"}))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "<stdin>:6: NodePool/gpu: spec.weight: Input should be greater than or equal to 1, got 0"
    ]
    ok = CliRunner().invoke(app, ["templates", "validate", "-"], input=VALID)
    assert ok.exit_code == 0


@pytest.mark.parametrize(
    ("replacements", "line", "expected"),
    [
        pytest.param(
            {30: 'values: ["eight"]', 29: "operator: In"},
            30,
            "spec.template.spec.requirements[1].values[0]: warning: provisioner.sh/instance-cpu values are whole "
            "numbers; 'eight' matches no node",
            id="non-integer-cpu-count",
        ),
        pytest.param(
            {14: '- nodes: "0"', 15: "reasons: [Empty]", 16: "# no window"},
            13,
            "spec.disruption.budgets: warning: every budget is 0 at all times",
            id="disruption-blocked-forever",
        ),
    ],
)
def test_valid_but_doubtful_pools_get_a_located_warning_and_exit_0(
    write: Callable[..., Path], replacements: dict[int, str], line: int, expected: str
) -> None:
    path = write(with_lines(replacements))
    code, lines, _ = run_validate(path)
    assert code == 0
    matching = [entry for entry in lines if expected in entry]
    assert len(matching) == 1, lines
    assert matching[0].startswith(f"{path}:{line}: NodePool/gpu: ")


def test_a_gpu_pool_without_a_gpu_taint_is_warned_about(write: Callable[..., Path]) -> None:
    path = write(
        with_lines({28: "- key: provisioner.sh/gpu-name", 29: "operator: In", 30: 'values: ["h100"]'})
    )
    code, lines, _ = run_validate(path)
    assert code == 0
    assert lines == [
        f"{path}:24: NodePool/gpu: spec.template.spec.requirements: warning: a GPU pool without a nvidia.com/gpu "
        "taint lets CPU-only pods land on its costly nodes; add taints: [{key: nvidia.com/gpu, value: 'true', "
        "effect: NoSchedule}]"
    ]


def test_folders_are_searched_for_yaml_and_yml_only(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pool.yml").write_text(VALID)
    (tmp_path / "notes.txt").write_text("not yaml: [")
    report = documents.validate_paths([tmp_path])
    assert report.ok
    assert (report.files, report.documents) == (1, 2)


# ------------------------------------------------------------------------------------------- properties

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12)
FIELD_NAMES = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "spec",
    "template",
    "requirements",
    "key",
    "operator",
    "values",
    "minValues",
    "limits",
    "weight",
    "disruption",
    "budgets",
    "nodes",
    "schedule",
    "duration",
    "nodeClassRef",
    "group",
    "taints",
    "effect",
    "expireAfter",
    "role",
    "amiSelectorTerms",
    "tags",
    "status",
]
json_data = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def _paths(data: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, (*prefix, i))


def _replace(data: Any, path: Sequence[Any], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    if isinstance(data, dict):
        return {**data, head: _replace(data[head], rest, value)}
    copy = list(data)
    copy[head] = _replace(data[head], rest, value)
    return copy


VALID_DOCS = [doc.data for doc in documents.parse_yaml_documents(VALID)]


def _check_report(report: documents.ValidationReport, documents_in: int) -> None:
    assert report.documents == documents_in
    for problem in report.problems:
        assert isinstance(problem, documents.Problem)
        assert problem.line >= 1
        assert str(problem)
    if report.ok:
        assert len(report.objects) == documents_in


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_mutation_of_a_valid_template_gives_errors_or_success_never_a_crash(data: st.DataObject) -> None:
    import yaml

    doc = VALID_DOCS[data.draw(st.integers(0, len(VALID_DOCS) - 1))]
    path = data.draw(st.sampled_from(list(_paths(doc))))
    mutated = _replace(doc, path, data.draw(json_data))
    text = yaml.safe_dump(mutated) if mutated is not None else "null\n"
    parsed = documents.parse_yaml_documents(text, source="mutated.yaml")
    report = documents.validate_documents(parsed)
    _check_report(report, len(parsed))


@settings(max_examples=150, deadline=None)
@given(json_data)
def test_any_random_document_gives_errors_or_success_never_a_crash(data: Any) -> None:
    document = documents.YamlDocument(data=data, line=1, source="random.yaml")
    _check_report(documents.validate_documents([document]), 1)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:- \n[]{}&*!|>'\"#?,%@`\t0.")), max_size=60))
def test_any_text_parses_to_documents_or_one_located_error(text: str) -> None:
    try:
        parsed = documents.parse_yaml_documents(text, source="t.yaml")
    except documents.DocumentError as err:
        assert err.problem.line >= 1
        parsed = err.documents
    _check_report(documents.validate_documents(parsed), len(parsed))
