"""What a real API server does with a CustomResourceDefinition and with the objects sent to it, written
from the Kubernetes documentation ("Specifying a structural schema", "Defaulting", "Field pruning",
"Validation rules", "Validation" of apiextensions.k8s.io/v1) for the subset of OpenAPI v3 a CRD may use.

- `structural_problems(crd)`: why a real server would refuse the CRD (every rule of a structural schema,
  the top-level `metadata` rule, list types, defaults that must validate and survive pruning, CEL rules
  that must compile and be bounded, printer column types). Empty when it would accept it.
- `admit(obj, schema)`: what the server stores for a custom object: unknown fields pruned, defaults
  filled, then validated (types, formats, enums, patterns, bounds, required, list types, CEL rules).
  Raises `Invalid` with every problem, each naming the field path, as the server's 422 does.

Used by the CRD tests and by the strict test API server (testkit/controllers/kube_server.py).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

_TYPES = ("object", "array", "string", "integer", "number", "boolean")
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_NOT_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")


class Invalid(ValueError):
    """The object breaks its schema: `problems` as `path: what` lines (a real server answers 422)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (`.spec.weight`, `[]` for items, `{}` for map values)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


# The CRD ------------------------------------------------------------------------------------------------


def structural_problems(crd: dict[str, Any]) -> list[str]:
    """Why a real API server would refuse this CRD; [] when it would accept it."""
    problems: list[str] = []
    for version in crd["spec"]["versions"]:
        where = f"{crd['metadata']['name']}/{version['name']}"
        schema = version["schema"]["openAPIV3Schema"]
        problems += [f"{where}: {p}" for p in _schema_problems(schema)]
        for column in version.get("additionalPrinterColumns", []):
            if column.get("type") not in _COLUMN_TYPES:
                problems.append(f"{where}: printer column {column.get('name')}: type {column.get('type')}")
            if not str(column.get("jsonPath", "")).startswith("."):
                problems.append(f"{where}: printer column {column.get('name')}: jsonPath must start with .")
    return problems


def _schema_problems(root: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if root.get("type") != "object":
        problems.append("the root must be type: object")
    metadata = (root.get("properties") or {}).get("metadata")
    if metadata is not None:
        extra = set(metadata) - {"type", "properties"}
        if metadata.get("type") != "object" or extra:
            problems.append(f"metadata: must not specify anything other than type: object ({sorted(extra)})")
        if set(metadata.get("properties") or {}) - {"name", "generateName"}:
            problems.append("metadata: only name and generateName may be specified")
    bounded: list[str] = []  # paths of unbounded lists above the node walked (for the CEL cost estimate)
    for path, node in nodes(root):
        problems += [f"{path or '<root>'}: {p}" for p in _node_problems(node, path, root)]
        if "x-kubernetes-validations" in node:
            for rule in node["x-kubernetes-validations"]:
                problems += [f"{path or '<root>'}: {p}" for p in _rule_problems(rule)]
            bounded += _unbounded_above(root, path)
    problems += [f"{p}: a list above a CEL rule needs maxItems" for p in sorted(set(bounded))]
    return problems


def _node_problems(node: dict[str, Any], path: str, root: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "$ref" in node:
        out.append("$ref is not allowed")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and preserve is not True:
        out.append("x-kubernetes-preserve-unknown-fields must be true if set")
    if int_or_string:
        if "type" in node:
            out.append("x-kubernetes-int-or-string must not carry a type")
        if "anyOf" in node and node["anyOf"] != _INT_OR_STRING:
            out.append("x-kubernetes-int-or-string allows only anyOf: [{type: integer}, {type: string}]")
    elif node.get("type") not in _TYPES and not preserve:
        out.append(f"type must be one of {', '.join(_TYPES)} (got {node.get('type')!r})")
    for junctor in _JUNCTORS:
        if junctor not in node or (int_or_string and junctor == "anyOf"):
            continue
        branches = node[junctor] if isinstance(node[junctor], list) else [node[junctor]]
        for branch in branches:
            for key in _NOT_IN_JUNCTORS:
                if key in branch:
                    out.append(f"{junctor} must not set {key}")
            for name in branch.get("properties") or {}:
                if name not in (node.get("properties") or {}):
                    out.append(f"{junctor} names {name}, which is not specified outside it")
    if "properties" in node and "additionalProperties" in node:
        out.append("properties and additionalProperties are mutually exclusive")
    if node.get("additionalProperties") is False:
        out.append("additionalProperties cannot be set to false")
    if node.get("uniqueItems") is True:
        out.append("uniqueItems cannot be set to true (use x-kubernetes-list-type: set)")
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        out.append("an array needs items: one schema")
    if node.get("x-kubernetes-embedded-resource") and node.get("type") != "object":
        out.append("x-kubernetes-embedded-resource needs type: object")
    for key in ("minimum", "maximum"):
        if key in node and not isinstance(node[key], int | float):
            out.append(f"{key} must be a number")
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if key in node and not isinstance(node[key], bool):
            out.append(f"{key} must be a boolean in OpenAPI v3.0")
    if "pattern" in node:
        try:
            re.compile(node["pattern"])
        except re.error as err:
            out.append(f"pattern does not compile: {err}")
    out += _list_type_problems(node)
    if "default" in node:
        if path.startswith(".metadata"):
            out.append("defaults under metadata are not allowed")
        if node["default"] is None and not node.get("nullable"):
            out.append("default null needs nullable: true")
        else:
            try:
                pruned = admit(node["default"], node, rules=False)
            except Invalid as err:
                out.append(f"default {node['default']!r} is invalid: {err}")
            else:
                if pruned != node["default"]:
                    out.append(f"default {node['default']!r} is changed by pruning")
    required = node.get("required") or []
    if required and "properties" in node and set(required) - set(node["properties"]):
        out.append(
            f"required names fields not in properties: {sorted(set(required) - set(node['properties']))}"
        )
    return out


def _list_type_problems(node: dict[str, Any]) -> list[str]:
    kind = node.get("x-kubernetes-list-type")
    if kind is None:
        return (
            ["x-kubernetes-list-map-keys needs x-kubernetes-list-type: map"]
            if ("x-kubernetes-list-map-keys" in node)
            else []
        )
    if node.get("type") != "array":
        return ["x-kubernetes-list-type is for arrays"]
    items = node.get("items") or {}
    if kind == "atomic":
        return []
    if kind == "set":
        return (
            []
            if items.get("type") in ("string", "integer", "number", "boolean")
            else ["x-kubernetes-list-type: set needs scalar items"]
        )
    if kind == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        if items.get("type") != "object" or not keys:
            return ["x-kubernetes-list-type: map needs object items and x-kubernetes-list-map-keys"]
        out = []
        for key in keys:
            sub = (items.get("properties") or {}).get(key)
            if sub is None or sub.get("type") not in ("string", "integer", "number", "boolean"):
                out.append(f"list map key {key} must be a scalar property of the items")
            elif key not in (items.get("required") or []) and "default" not in sub:
                out.append(f"list map key {key} must be required or defaulted")
        return out
    return [f"x-kubernetes-list-type must be atomic, set or map (got {kind!r})"]


def _rule_problems(rule: dict[str, Any]) -> list[str]:
    text = rule.get("rule")
    if not isinstance(text, str) or not text.strip():
        return ["a validation needs a rule"]
    out = []
    try:
        _program(text)
    except CELParseError as err:
        out.append(f"rule {text!r} does not compile: {err}")
    message = rule.get("message", "")
    if "\n" in message or len(message) > 2048:
        out.append(f"rule {text!r}: message must be one line")
    return out


def _unbounded_above(root: dict[str, Any], path: str) -> list[str]:
    # The server estimates a rule's cost times the most elements every list above it can hold; without
    # maxItems that is what 3 MiB of request allows, and the CRD is refused ("estimated rule cost exceeds
    # budget"). We keep every list above a rule bounded.
    out = []
    node = root
    walked = ""
    for step in re.findall(r"\.[^.\[{]+|\[\]|\{\}", path):
        if step == "[]":
            if "maxItems" not in node:
                out.append(walked)
            node, walked = node["items"], walked + step
        elif step == "{}":
            if "maxProperties" not in node:
                out.append(walked)
            node, walked = node["additionalProperties"], walked + step
        else:
            node, walked = node["properties"][step[1:]], walked + step
    return out


@functools.cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


# The objects --------------------------------------------------------------------------------------------


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON document (its dicts and lists new; anything else shared, as immutable):
    several times cheaper than copy.deepcopy, which the server paid on every write."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    return copy.deepcopy(value) if kind not in _IMMUTABLE else value


_IMMUTABLE = (str, int, float, bool, type(None))


def admit(value: Any, schema: dict[str, Any], *, rules: bool = True, root: bool = False) -> Any:
    """The value as the server stores it (pruned, defaulted), or Invalid with every problem."""
    value = copy_json(value)
    problems: list[str] = []
    value = _prune_and_default(value, schema, top=root)
    _validate(value, schema, "", problems, rules=rules, top=root)
    if problems:
        raise Invalid(problems)
    return value


def _prune_and_default(value: Any, schema: dict[str, Any], *, top: bool = False) -> Any:
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        if props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            keep = set(props) | ({"apiVersion", "kind", "metadata"} if top else set())
            for key in [k for k in value if k not in keep]:
                del value[key]
        for key, sub in (props or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value and not (top and key == "metadata"):
                value[key] = _prune_and_default(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                value[key] = _prune_and_default(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune_and_default(v, schema["items"]) for v in value]
    return value


def _is(kind: str, value: Any) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def _validate(
    value: Any, schema: dict[str, Any], path: str, out: list[str], *, rules: bool, top: bool = False
) -> None:
    at = path or "<root>"
    if value is None:
        if not schema.get("nullable"):
            out.append(f"{at}: Invalid value: null")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is("integer", value) or _is("string", value)):
            out.append(f"{at}: Invalid value: must be an integer or a string")
            return
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{at}: Invalid value: {value!r}: should match {schema['pattern']!r}")
    elif "type" in schema and not _is(schema["type"], value):
        out.append(f"{at}: Invalid value: {type(value).__name__}: must be of type {schema['type']}")
        return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: Unsupported value: {value!r}: supported values: {schema['enum']}")
    if isinstance(value, str) and not schema.get("x-kubernetes-int-or-string"):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{at}: Invalid value: {value!r}: should match {schema['pattern']!r}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{at}: Too long: may not be more than {schema['maxLength']} characters")
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"{at}: Invalid value: should be at least {schema['minLength']} characters")
        if schema.get("format") == "date-time" and not _date_time(value):
            out.append(f"{at}: Invalid value: {value!r}: must be a date-time (RFC 3339)")
    if _is("number", value):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and (value < low or (schema.get("exclusiveMinimum") and value == low)):
            out.append(f"{at}: Invalid value: {value}: must be greater than or equal to {low}")
        if high is not None and (value > high or (schema.get("exclusiveMaximum") and value == high)):
            out.append(f"{at}: Invalid value: {value}: must be less than or equal to {high}")
    if isinstance(value, list):
        _validate_list(value, schema, path, out, rules=rules)
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                out.append(f"{path}.{key}: Required value")
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub_value in value.items():
            if top and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key) if key in props else extra if isinstance(extra, dict) else None
            if sub is not None:
                _validate(sub_value, sub, f"{path}.{key}", out, rules=rules)
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            out.append(f"{at}: Too many: must have at most {schema['maxProperties']} items")
    if rules and schema.get("x-kubernetes-validations"):
        for rule in schema["x-kubernetes-validations"]:
            if not _holds(rule["rule"], value):
                out.append(f"{at}: Invalid value: {rule.get('message') or 'failed rule: ' + rule['rule']}")


def _validate_list(
    value: list[Any], schema: dict[str, Any], path: str, out: list[str], *, rules: bool
) -> None:
    at = path or "<root>"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(f"{at}: Too many: {len(value)}: must have at most {schema['maxItems']} items")
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(f"{at}: Invalid value: must have at least {schema['minItems']} items")
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", out, rules=rules)
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                out.append(f"{path}[{i}]: Duplicate value: {item!r}")
            seen.append(item)
    elif kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        found: list[tuple[Any, ...]] = []
        for i, item in enumerate(value):
            key = tuple(item.get(k) for k in keys) if isinstance(item, dict) else (item,)
            if key in found:
                out.append(f"{path}[{i}]: Duplicate value: {dict(zip(keys, key, strict=True))}")
            found.append(key)


def _holds(rule: str, value: Any) -> bool:
    # A rule reads only `self`: one answer per (rule, value). The interpreted CEL costs milliseconds a
    # rule, where the real server's compiled CEL costs microseconds, and every NodeClaim a batch writes
    # carries the same requirements: without this the fixture, not the controller, was what
    # bench/controller.py timed.
    return _holds_text(rule, json.dumps(value, sort_keys=True))


@functools.lru_cache(maxsize=4096)
def _holds_text(rule: str, text: str) -> bool:
    try:
        result = _program(rule).evaluate({"self": json_to_cel(json.loads(text))})
    except CELEvalError:
        return False
    return bool(result)


def _date_time(text: str) -> bool:
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text or "t" in text
