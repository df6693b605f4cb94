"""CustomResourceDefinitions generated from the API models.

Owns the translation from a pydantic JSON schema to a structural `openAPIV3Schema` (apiextensions.k8s.io/v1):
`$ref`s inlined, `X | None` written as a plain optional field, `str | int` quantities as
`x-kubernetes-int-or-string`, `additionalProperties: false` dropped (structural schemas prune unknown
fields instead), descriptions taken from the field docstrings, the models' `x-kubernetes-validations`
(CEL) and list types kept, the top-level `metadata` left to the API server (`type: object` only), plus
the names, scope, status subresource and printer columns of each kind (each column reads a field some
controller sets: NodeClasses have no Ready column, as no controller writes their conditions yet). `charts/provisioner/crds/` holds the output; a test keeps it in step.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml
from pydantic import BaseModel

from provisioner.api import labels
from provisioner.api import provisioning_request as pr
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodepool import NodePool
from provisioner.api.plugins import AGE, NODECLASS_CRDS, Kind, PrinterColumn
from provisioner.api.team import Department, Team

_QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
# JSON-schema keywords a structural schema may carry (apiextensions.k8s.io/v1 JSONSchemaProps, minus the
# ones we never emit); anything else pydantic writes (title, const, propertyNames, $defs) is dropped.
_KEPT = {
    "type",
    "format",
    "description",
    "default",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "anyOf",
    "nullable",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}


def _escaped(key: str) -> str:
    return key.replace(".", "\\.")


_READY = PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status')
_AGE = AGE
_GPU = _escaped(labels.GPU_RESOURCE)
_QUOTA_COLUMNS = (
    PrinterColumn("GPU-Quota", f".status.total.quota.{_GPU}", description="GPUs promised, over all pools"),
    PrinterColumn("GPU-Used", f".status.total.allocated.{_GPU}", description="GPUs admitted pods request"),
    PrinterColumn("GPU-Over", f".status.total.overQuota.{_GPU}", description="GPUs borrowed beyond quota"),
    PrinterColumn("Waiting", ".status.waiting", type="integer", description="Pods waiting for admission"),
    _AGE,
    PrinterColumn("CPU-Quota", ".status.total.quota.cpu", priority=1),
    PrinterColumn("CPU-Used", ".status.total.allocated.cpu", priority=1),
)

_CORE = (
    Kind(
        model=NodePool,
        kind="NodePool",
        plural="nodepools",
        short_names=("np",),
        columns=(
            PrinterColumn("NodeClass", ".spec.template.spec.nodeClassRef.name"),
            PrinterColumn("Nodes", ".status.resources.nodes"),
            PrinterColumn("Weight", ".spec.weight", type="integer"),
            PrinterColumn("GPUs", f".status.resources.{_escaped(labels.GPU_RESOURCE)}"),
            _READY,
            _AGE,
            PrinterColumn("Kind", ".spec.template.spec.nodeClassRef.kind", priority=1),
            PrinterColumn("CPU", ".status.resources.cpu", priority=1),
            PrinterColumn("Memory", ".status.resources.memory", priority=1),
        ),
    ),
    Kind(
        model=NodeClaim,
        kind="NodeClaim",
        plural="nodeclaims",
        short_names=("nc",),
        columns=(
            PrinterColumn("Type", ".status.instanceType"),
            PrinterColumn("Capacity", ".status.capacityType"),
            PrinterColumn("Zone", ".status.zone"),
            PrinterColumn("Node", ".status.nodeName"),
            _READY,
            _AGE,
            PrinterColumn("ID", ".status.providerID", priority=1),
            PrinterColumn("NodePool", f".metadata.labels.{_escaped(labels.NODEPOOL)}", priority=1),
            PrinterColumn("Price", ".status.pricePerHour", type="number", priority=1),
        ),
    ),
    Kind(
        model=Department,
        kind="Department",
        plural="departments",
        short_names=("dept",),
        columns=_QUOTA_COLUMNS,
    ),
    Kind(
        model=Team,
        kind="Team",
        plural="teams",
        short_names=("tm",),
        columns=(PrinterColumn("Department", ".spec.department"), *_QUOTA_COLUMNS),
    ),
)


def _description(text: str) -> str:
    # Docstrings are wrapped at 110 columns: join wrapped lines, keep blank-line paragraph breaks.
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as a structural openAPIV3Schema (no $ref, no null, no titles)."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = schema.pop("$defs", {})
    root = _convert(schema, defs, depth=0)
    # Top-level metadata is Kubernetes' ObjectMeta: the API server owns its schema and refuses a CRD that
    # says anything about it beyond `type: object` (not even a description).
    root["properties"]["metadata"] = {"type": "object"}
    for name in ("apiVersion", "kind"):
        root["properties"][name] = {
            "type": "string",
            "description": {
                "apiVersion": "APIVersion defines the versioned schema of this representation of an object.",
                "kind": "Kind is a string value representing the REST resource this object represents.",
            }[name],
        }
    root["required"] = [r for r in root.get("required", []) if r not in ("apiVersion", "kind")]
    if not root["required"]:
        del root["required"]
    return _ordered(root)


def _convert(schema: dict[str, Any], defs: dict[str, Any], *, depth: int) -> dict[str, Any]:
    if depth > 40:  # pragma: no cover - our models are not recursive
        raise ValueError("schema nests too deep; is a model recursive?")
    own_description = schema.get("description")
    own_default = schema.get("default")
    schema = _deref(schema, defs)
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        types = {_deref(b, defs).get("type") for b in branches}
        if types == {"string", "integer"}:
            out: dict[str, Any] = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
                "pattern": _QUANTITY_PATTERN,
            }
        elif len(branches) == 1:
            out = _convert(branches[0], defs, depth=depth + 1)
        else:
            raise ValueError(f"cannot express the union {schema['anyOf']} in a structural schema")
        for key in ("description", "default"):
            if key in schema and key not in out:
                out[key] = schema[key]
    else:
        out = {}
        for key, value in schema.items():
            if key not in _KEPT:
                continue
            if key == "properties":
                out[key] = {name: _convert(sub, defs, depth=depth + 1) for name, sub in value.items()}
            elif key == "items":
                out[key] = _convert(value, defs, depth=depth + 1)
            elif key == "additionalProperties":
                if isinstance(value, dict):
                    out[key] = _convert(value, defs, depth=depth + 1)
                # `false` (extra="forbid") is not allowed next to properties; pruning does its job.
                # `true` would be free-form data; our models have none below the top-level metadata.
            else:
                out[key] = copy.deepcopy(value)
        if isinstance(out.get("exclusiveMinimum"), int | float) and not isinstance(
            out.get("exclusiveMinimum"), bool
        ):
            out["minimum"], out["exclusiveMinimum"] = out["exclusiveMinimum"], True
        if isinstance(out.get("exclusiveMaximum"), int | float) and not isinstance(
            out.get("exclusiveMaximum"), bool
        ):
            out["maximum"], out["exclusiveMaximum"] = out["exclusiveMaximum"], True
        if "enum" in out and "type" not in out:
            out["type"] = "string"
        if "properties" in out and "type" not in out:
            out["type"] = "object"
    # The field's own docstring beats the class docstring it refers to.
    if own_description:
        out["description"] = own_description
    if own_default is not None:
        out["default"] = own_default
    elif "default" in out and out["default"] is None:
        del out["default"]
    if "description" in out:
        out["description"] = _description(out["description"])
    if isinstance(out.get("default"), list | dict):
        del out["default"]  # only scalar defaults: the API server applies them, keep that predictable
    return _ordered(out)


_ORDER = {"type": 0, "description": 1, "format": 2, "properties": 9, "items": 9, "additionalProperties": 9}


def _ordered(schema: dict[str, Any]) -> dict[str, Any]:
    # type and description first, nested schemas last: the generated YAML reads top-down.
    return dict(sorted(schema.items(), key=lambda item: _ORDER.get(item[0], 5)))


def _deref(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in schema:
            target = defs[schema["$ref"].rsplit("/", 1)[-1]]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        elif "allOf" in schema and len(schema["allOf"]) == 1:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            schema = {**schema["allOf"][0], **rest}
        else:
            return schema


def crd(kind: Kind) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    schema = structural_schema(kind.model)
    if kind.model.__doc__:
        schema["description"] = _description(kind.model.__doc__)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{labels.GROUP}"},
        "spec": {
            "group": labels.GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": list(kind.short_names),
                "categories": ["provisioner"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": labels.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.to_dict() for c in kind.columns],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def kinds() -> tuple[Kind, ...]:
    """Every kind with a CRD, in a fixed order: NodePool, NodeClaim, the installed plug-ins' NodeClass
    kinds (in the plug-ins' name order: AWSNodeClass, GCPNodeClass), Department, Team."""
    return (*_CORE[:2], *NODECLASS_CRDS.values(), *_CORE[2:])


def provisioning_request_crd() -> dict[str, Any]:
    """The CustomResourceDefinition (namespaced, group `autoscaling.x-k8s.io`), from the model."""
    schema = structural_schema(pr.ProvisioningRequest)
    schema["description"] = _description(pr.ProvisioningRequest.__doc__ or "")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"provisioningrequests.{pr.GROUP}"},
        "spec": {
            "group": pr.GROUP,
            "names": {
                "kind": "ProvisioningRequest",
                "listKind": "ProvisioningRequestList",
                "plural": "provisioningrequests",
                "singular": "provisioningrequest",
                "shortNames": ["provreq", "provreqs"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": pr.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Class", "type": "string", "jsonPath": ".spec.provisioningClassName"},
                        {
                            "name": "Provisioned",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Provisioned")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    """Every CRD, in the order of `kinds`."""
    return [crd(kind) for kind in kinds()]


HEADER = (
    "# Generated from provisioner/api by `provisioner crds --write charts/provisioner/crds`. Do not edit.\n"
)


class _NoAliasDumper(yaml.SafeDumper):
    """Writes shared sub-objects out in full: anchors and aliases have no place in a CRD."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(document: dict[str, Any]) -> str:
    """One CRD as YAML, stable byte for byte (the committed files are compared with it)."""
    return HEADER + yaml.dump(document, Dumper=_NoAliasDumper, sort_keys=False, width=120, allow_unicode=True)


def files() -> dict[str, str]:
    """File name (`provisioner.sh_nodepools.yaml`) -> content, for charts/provisioner/crds/; with the
    ProvisioningRequest CRD (`autoscaling.x-k8s.io`), for clusters without Cluster Autoscaler's."""
    out = {f"{labels.GROUP}_{c['spec']['names']['plural']}.yaml": to_yaml(c) for c in all_crds()}
    out[f"{pr.GROUP}_provisioningrequests.yaml"] = to_yaml(provisioning_request_crd())
    return out


def multi_document_yaml() -> str:
    """Every CRD as one multi-document YAML stream (what `provisioner crds` prints)."""
    return "---\n".join(files().values())
