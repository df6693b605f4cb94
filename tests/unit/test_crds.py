"""The CRDs in charts/provisioner/crds are exactly what the models generate, and are structural."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from providers.aws.model import AWSNodeClass
from provisioner.api import crds
from provisioner.api.common import Model
from provisioner.api.nodepool import NodePool
from provisioner.cli.main import app
from testkit.builders import aws_node_class_manifest, node_pool_manifest, req
from testkit.controllers.crd_schema import Invalid, admit, structural_problems

CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "provisioner" / "crds"
KINDS = ("NodePool", "NodeClaim", "AWSNodeClass", "GCPNodeClass", "Department", "Team")


@functools.cache
def by_kind() -> dict[str, dict[str, Any]]:
    return {c["spec"]["names"]["kind"]: c for c in crds.all_crds()}


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = by_kind()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(schema: dict[str, Any], path: str = "") -> Iterator[Any]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def test_committed_crds_equal_the_generated_ones() -> None:
    committed = {p.name: p.read_text() for p in CRD_DIR.glob("*.yaml")}
    generated = crds.files()
    assert sorted(committed) == sorted(generated), "run: provisioner crds --write charts/provisioner/crds"
    for name, text in generated.items():
        assert committed[name] == text, (
            f"{name} is stale; run: provisioner crds --write charts/provisioner/crds"
        )


def test_crd_files_use_no_yaml_anchors_or_aliases() -> None:
    for name, text in crds.files().items():
        assert "&id" not in text and "*id" not in text, name


def test_the_crds_command_prints_every_crd_as_multi_document_yaml() -> None:
    result = CliRunner().invoke(app, ["crds"])
    assert result.exit_code == 0
    assert result.stdout == crds.multi_document_yaml()
    printed = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["spec"]["names"]["kind"] for d in printed] == [*KINDS, "ProvisioningRequest"]


def test_the_provisioning_request_crd_is_cluster_autoscalers_namespaced_v1() -> None:
    [crd] = [
        d
        for d in yaml.safe_load_all(crds.multi_document_yaml())
        if d and d["spec"]["names"]["kind"] == "ProvisioningRequest"
    ]
    assert crd["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1" and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["podSets", "provisioningClassName"]
    pod_set = spec["properties"]["podSets"]["items"]
    assert set(pod_set["properties"]) == {"podTemplateRef", "count"}
    assert pod_set["properties"]["count"]["minimum"] == 1


def test_crds_write_puts_one_file_per_crd_in_the_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["crds", "--write", str(tmp_path / "out")])
    assert result.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(crds.files())


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_cluster_scoped_served_stored_with_a_status_subresource(kind: str) -> None:
    crd = by_kind()[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["group"] == "provisioner.sh"
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.provisioner.sh"
    assert crd["spec"]["names"]["shortNames"]
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", KINDS)
def test_schemas_are_structural(kind: str) -> None:
    for path, node in walk(schema_of(kind)):
        where = f"{kind}{path}"
        assert "$ref" not in node and "$defs" not in node and "allOf" not in node, where
        assert "title" not in node and "const" not in node, where
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], where
        else:
            assert "anyOf" not in node, where
            assert node.get("type") in ("object", "array", "string", "integer", "number", "boolean"), where
        assert not ("properties" in node and "additionalProperties" in node), where
        assert not isinstance(node.get("additionalProperties"), bool), where
        assert "null" not in str(node.get("type")), where
        assert set(node.get("required", [])) <= set(node.get("properties", {})), where
        if path and path != ".metadata" and not path.endswith(("[]", "{}")):  # every field is documented
            assert node.get("description"), f"{where} has no description"


def test_limits_are_int_or_string_quantities_and_only_top_metadata_is_free_form() -> None:
    limits = schema_of("NodePool")["properties"]["spec"]["properties"]["limits"]
    assert limits["type"] == "object"
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert "pattern" in limits["additionalProperties"]
    preserved = [
        f"{kind}{path}"
        for kind in KINDS
        for path, node in walk(schema_of(kind))
        if node.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert preserved == []
    for kind in KINDS:  # a real API server refuses anything else there, even a description
        assert schema_of(kind)["properties"]["metadata"] == {"type": "object"}


def test_field_docstrings_become_descriptions_and_enums_are_listed() -> None:
    spec = schema_of("NodePool")["properties"]["spec"]["properties"]
    assert spec["weight"]["description"].startswith("Priority among pools, 1-100")
    assert (spec["weight"]["minimum"], spec["weight"]["maximum"]) == (1, 100)
    operator = spec["template"]["properties"]["spec"]["properties"]["requirements"]["items"]["properties"][
        "operator"
    ]
    assert operator["enum"] == ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    assert "\n" not in spec["disruption"]["description"]


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        pytest.param("NodePool", ["NodeClass", "Nodes", "Weight", "GPUs", "Ready", "Age"], id="nodepool"),
        pytest.param("NodeClaim", ["Type", "Capacity", "Zone", "Node", "Ready", "Age"], id="nodeclaim"),
    ],
)
def test_printer_columns_shown_by_default(kind: str, columns: list[str]) -> None:
    printed = by_kind()[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in printed if not c.get("priority")] == columns
    for column in printed:
        assert column["jsonPath"].startswith(".")
    age = next(c for c in printed if c["name"] == "Age")
    assert (age["type"], age["jsonPath"]) == ("date", ".metadata.creationTimestamp")


def test_printer_columns_point_at_fields_the_schema_has() -> None:
    for kind in KINDS:
        schema = schema_of(kind)
        for column in by_kind()[kind]["spec"]["versions"][0]["additionalPrinterColumns"]:
            parts = column["jsonPath"].lstrip(".").split("[")[0].replace("\\.", "\0").split(".")
            node = schema
            for part in (p.replace("\0", ".") for p in parts):
                if part == "metadata" or "properties" not in node:
                    break  # metadata and free-form maps (labels, resources) are not described further
                assert part in node["properties"], f"{kind}: {column['jsonPath']}"
                node = node["properties"][part]


def conforms(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What the API server would refuse or prune in `value` under a structural schema (the subset we emit)."""
    import re

    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: not int-or-string"]
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{path}: {value!r} does not match the quantity pattern"]
        return []
    kind = cast(str, schema.get("type"))
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    if not checks[kind](value):
        return [f"{path}: not {kind}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in enum")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{path}: below minimum")
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(f"{path}: above maximum")
    if kind == "object":
        problems += [f"{path}.{r}: required" for r in schema.get("required", []) if r not in value]
        for key, sub in value.items():
            if key in schema.get("properties", {}):
                problems += conforms(sub, schema["properties"][key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += conforms(sub, schema["additionalProperties"], f"{path}.{key}")
            elif "properties" in schema:
                problems.append(f"{path}.{key}: unknown, would be pruned")
    if kind == "array":
        for i, item in enumerate(value):
            problems += conforms(item, schema["items"], f"{path}[{i}]")
    return problems


def test_every_bundled_template_is_accepted_by_the_crd_schema_without_pruning() -> None:
    from provisioner.api import documents

    templates = Path(__file__).resolve().parents[2] / "nodepool_templates"
    report = documents.validate_paths([templates])
    assert report.ok and report.objects
    for loaded in report.objects:
        schema = schema_of(loaded.kind)
        assert conforms(loaded.document.data, schema) == [], (
            f"{loaded.document.source}: {loaded.kind}/{loaded.name}"
        )
        # What the models write back (defaults filled in) must be accepted as well.
        assert conforms(cast(Model, loaded.obj).to_dict(), schema) == [], (
            f"{loaded.kind}/{loaded.name} as dumped"
        )


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_in_the_schemas_is_valid_for_its_own_field(kind: str) -> None:
    for path, node in walk(schema_of(kind)):
        if "default" in node:
            assert conforms(node["default"], node, f"{kind}{path}") == []


# What a real API server checks (testkit/controllers/crd_schema.py, from the Kubernetes documentation) -----


def chart_copies() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]


@pytest.mark.parametrize("source", ["generated", "chart"])
def test_every_crd_passes_every_structural_rule(source: str) -> None:
    generated = [*crds.all_crds(), crds.provisioning_request_crd()]
    documents = generated if source == "generated" else chart_copies()
    assert len(documents) == len(KINDS) + 1  # ours and the ProvisioningRequest CRD
    for crd in documents:
        assert structural_problems(crd) == [], crd["metadata"]["name"]


def _nodepool_crd() -> dict[str, Any]:
    return copy.deepcopy(by_kind()["NodePool"])


def _mutated(change: Any) -> list[str]:
    crd = _nodepool_crd()
    change(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return structural_problems(crd)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            lambda s: s["properties"]["metadata"].update(description="Standard object metadata."),
            "metadata: must not specify anything other than type: object",
            id="metadata-description",  # the defect a real v1.36 server reported on every CRD
        ),
        pytest.param(lambda s: s["properties"]["spec"].pop("type"), ".spec: type must be", id="no-type"),
        pytest.param(
            lambda s: s["properties"]["spec"].update(additionalProperties={"type": "string"}),
            "mutually exclusive",
            id="properties-and-additionalProperties",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"]["properties"]["limits"].update(additionalProperties=False),
            "cannot be set to false",
            id="additionalProperties-false",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"].update(anyOf=[{"properties": {"x": {"type": "string"}}}]),
            "not specified outside it",
            id="field-only-in-anyOf",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"].update(anyOf=[{"description": "no"}]),
            "anyOf must not set description",
            id="description-in-anyOf",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"]["properties"]["weight"].update(default=1000),
            "default 1000 is invalid",
            id="default-out-of-range",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"][
                "requirements"
            ].pop("maxItems"),
            "a list above a CEL rule needs maxItems",
            id="unbounded-list-above-rule",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"].update({"x-kubernetes-validations": [{"rule": "self.a >"}]}),
            "does not compile",
            id="rule-does-not-compile",
        ),
        pytest.param(
            lambda s: s["properties"]["spec"].update(uniqueItems=True), "uniqueItems", id="unique-items"
        ),
        pytest.param(
            lambda s: s["properties"]["spec"]["properties"].update({"x": {"$ref": "#/d"}}),
            "$ref is not allowed",
            id="ref",
        ),
    ],
)
def test_the_structural_check_finds_each_rule_broken(change: Any, expected: str) -> None:
    problems = _mutated(change)
    assert any(expected in p for p in problems), problems


def _admit_pool(**kw: Any) -> dict[str, Any]:
    admitted: dict[str, Any] = admit(node_pool_manifest("gpu", **kw), schema_of("NodePool"), root=True)
    return admitted


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        pytest.param({"weight": 1000}, ".spec.weight: Invalid value: 1000", id="weight-above-100"),
        pytest.param({"requirements": [req("a", "In")]}, "need at least one value", id="in-without-values"),
        pytest.param({"requirements": [req("a", "Exists", "x")]}, "take no values", id="exists-with-values"),
        pytest.param({"requirements": [req("a", "Gt", "x")]}, "exactly one integer", id="gt-not-integer"),
        pytest.param({"requirements": [req("a", "Gt", "1", "2")]}, "exactly one integer", id="gt-two-values"),
        pytest.param(
            {"requirements": [{**req("a", "In", "x"), "minValues": 2}]},
            "minValues must not be more",
            id="min-values-over-values",
        ),
        pytest.param(
            {"requirements": [{**req("a", "DoesNotExist"), "minValues": 1}]},
            "not allowed with operator DoesNotExist",
            id="min-values-with-does-not-exist",
        ),
        pytest.param(
            {"requirements": [req("a", "Near", "x")]}, "Unsupported value: 'Near'", id="unknown-operator"
        ),
        pytest.param(
            {"disruption": {"budgets": [{"nodes": "1", "schedule": "@daily"}]}},
            "schedule and duration must be given together",
            id="schedule-without-duration",
        ),
        pytest.param({"limits": {"cpu": "1x"}}, ".spec.limits.cpu: Invalid value: '1x'", id="bad-quantity"),
    ],
)
def test_the_crd_schema_refuses_what_the_model_refuses(kw: dict[str, Any], expected: str) -> None:
    # The API server itself refuses a bad NodePool (`kubectl apply` fails), not only `templates validate`.
    with pytest.raises(Invalid) as err:
        _admit_pool(**kw)
    assert any(expected in p for p in err.value.problems), err.value.problems
    with pytest.raises(ValidationError):
        NodePool.model_validate(node_pool_manifest("gpu", **kw))


def test_the_crd_schema_accepts_a_good_pool_prunes_unknown_fields_and_fills_defaults() -> None:
    doc = node_pool_manifest("gpu", weight=10, requirements=[{**req("a", "In", "x", "y"), "minValues": 2}])
    doc["spec"]["typo"] = True
    stored = admit(doc, schema_of("NodePool"), root=True)
    assert "typo" not in stored["spec"]
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert stored["spec"]["weight"] == 10


def test_teams_refuse_a_repeated_pool_or_namespace_as_the_model_does() -> None:
    doc = {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Team",
        "metadata": {"name": "vision"},
        "spec": {
            "namespaces": ["vision", "vision"],
            "quotas": [{"nodePool": "a"}, {"nodePool": "a"}],
        },
    }
    with pytest.raises(Invalid) as err:
        admit(doc, schema_of("Team"), root=True)
    assert [p.split(":")[0] for p in err.value.problems] == [".spec.namespaces[1]", ".spec.quotas[1]"]


@pytest.mark.parametrize(
    ("term", "ok"),
    [
        pytest.param({"id": "subnet-1"}, True, id="id"),
        pytest.param({"tags": {"a": "b"}}, True, id="tags"),
        pytest.param({}, False, id="empty"),
        pytest.param({"id": "subnet-1", "tags": {"a": "b"}}, False, id="id-and-tags"),
        pytest.param({"alias": "al2023@latest", "name": "x"}, False, id="alias-and-name"),
    ],
)
def test_selector_term_rules_agree_with_the_model(term: dict[str, Any], ok: bool) -> None:
    doc = aws_node_class_manifest("default")
    doc["spec"]["subnetSelectorTerms"] = [term]
    schema = schema_of("AWSNodeClass")
    if ok:
        admit(doc, schema, root=True)
        AWSNodeClass.model_validate(doc)
    else:
        with pytest.raises(Invalid):
            admit(doc, schema, root=True)
        with pytest.raises(ValidationError):
            AWSNodeClass.model_validate(doc)


def test_every_bundled_template_passes_the_crd_rules_as_a_server_would() -> None:
    from provisioner.api import documents

    templates = Path(__file__).resolve().parents[2] / "nodepool_templates"
    report = documents.validate_paths([templates])
    for loaded in report.objects:
        admit(loaded.document.data, schema_of(loaded.kind), root=True)
