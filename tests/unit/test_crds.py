"""The CRDs in charts/provisioner/crds are exactly what the models generate, and are structural."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.api import crds
from provisioner.cli.main import app

CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "provisioner" / "crds"
KINDS = ("NodePool", "NodeClaim", "AWSNodeClass", "GCPNodeClass", "Department", "Team")


@functools.cache
def by_kind() -> dict[str, dict[str, Any]]:
    return {c["spec"]["names"]["kind"]: c for c in crds.all_crds()}


def schema_of(kind: str) -> dict[str, Any]:
    return by_kind()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def walk(schema: dict[str, Any], path: str = ""):
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
        if path and not path.endswith(("[]", "{}")):  # every field is documented (the root's metadata too)
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
    assert schema_of("NodePool")["properties"]["metadata"]["type"] == "object"


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
    kind = schema.get("type")
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
        assert conforms(loaded.obj.to_dict(), schema) == [], f"{loaded.kind}/{loaded.name} as dumped"


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_in_the_schemas_is_valid_for_its_own_field(kind: str) -> None:
    for path, node in walk(schema_of(kind)):
        if "default" in node:
            assert conforms(node["default"], node, f"{kind}{path}") == []
