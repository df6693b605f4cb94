"""Pydantic validation errors as `Problem`s a person can act on: located at the YAML line that gives the
field, the path spelled in camelCase as the user wrote it (`spec.template.spec.requirements[1].operator`),
and for an unknown field the fields that are allowed there.

`located_problems(error, document, ...)`, `format_path(path)`, `allowed_fields(model, path)`, and
`LoadedObject` (a validated object and the document it came from, which later checks locate by). Reading
the YAML is `provisioner.api.yamldoc`'s; which model a document is, `provisioner.api.documents`'. Pure.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from provisioner.api.common import FieldError, FieldErrors
from provisioner.api.yamldoc import FieldPath, Problem, YamlDocument


@dataclass(frozen=True)
class LoadedObject:
    """A validated API object and the document it came from."""

    obj: BaseModel
    document: YamlDocument

    @property
    def kind(self) -> str:
        return str(getattr(self.obj, "kind", type(self.obj).__name__))

    @property
    def name(self) -> str:
        return str(getattr(self.obj, "name", ""))


def format_path(path: Sequence[str | int]) -> str:
    """`("spec", "limits", "nvidia.com/gpu")` -> `spec.limits["nvidia.com/gpu"]`; indexes as `[1]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and all(c.isalnum() or c in "_-" for c in part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def located_problems(
    error: ValidationError,
    document: YamlDocument,
    *,
    kind: str | None = None,
    name: str | None = None,
    base: FieldPath = (),
    model: type[BaseModel] | None = None,
) -> list[Problem]:
    """The errors of `error` as `Problem`s located at their YAML line in `document`.

    `base` is where the validated value sits in the document (empty when the whole document was
    validated; `("nodePools", 2)` when a scenario validated one entry). `model` (the class validated)
    lets an unknown field be answered with the fields that are allowed and a "did you mean".
    Errors that differ only by union branch are merged into one.
    """
    merged: dict[tuple[int, str], tuple[list[str], str]] = {}
    for err in error.errors():
        loc: FieldPath = (*base, *err["loc"])
        ctx_error = (err.get("ctx") or {}).get("error")
        # A validator that found several problems reports each at its own field.
        parts = ctx_error.errors if isinstance(ctx_error, FieldErrors) else [ctx_error]
        for part in parts:
            extra: FieldPath = part.path if isinstance(part, FieldError) else ()
            real, shown = _resolve(document.data, loc, extra, missing=err["type"] == "missing")
            line = document.line_of(real)
            if part is ctx_error:
                message, given = _message(err, shown, model=model, base=base)
            else:
                message, given = str(part), ""
            key = (line, format_path(shown))
            if key in merged:
                if message not in merged[key][0]:
                    merged[key][0].append(message)
            else:
                merged[key] = ([message], given)
    problems = []
    for (line, path_text), (messages, given) in merged.items():
        text = messages[0]
        for more in messages[1:]:
            text += " or " + more.removeprefix("Input should be ")
        text += given
        problems.append(
            Problem(document.source, line, text, kind=kind, name=name, path=path_text, severity="error")
        )
    return problems


def _resolve(data: Any, loc: FieldPath, extra: FieldPath, *, missing: bool) -> tuple[FieldPath, FieldPath]:
    """(the part of the path the document has, the path to show): union tags and `[key]` dropped."""
    real: list[str | int] = []
    shown: list[str | int] = []
    node = data
    found = True
    parts = [(p, "loc") for p in loc] + [(p, "extra") for p in extra]
    for i, (part, origin) in enumerate(parts):
        last_of_loc = origin == "loc" and (i + 1 == len(parts) or parts[i + 1][1] == "extra")
        has, child = _child(node, part) if found else (False, None)
        if has:
            node = child
            real.append(part)
            shown.append(part)
        elif origin == "extra" or (missing and last_of_loc):
            # A field the document lacks: show it, keep the line of the nearest parent it has.
            found = False
            shown.append(part)
        # Anything else is a pydantic union tag (`str`, `int`, `function-after[...]`) or `[key]`.
    return tuple(real), tuple(shown)


def _child(node: Any, part: str | int) -> tuple[bool, Any]:
    if isinstance(node, dict) and isinstance(part, str) and part in node:
        return True, node[part]
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _message(
    err: Any,
    shown: FieldPath,
    *,
    model: type[BaseModel] | None,
    base: FieldPath,
) -> tuple[str, str]:
    """The message for one pydantic error, and what was given (`, got ...`) when worth saying."""
    kind = err["type"]
    given = err.get("input")
    if kind == "value_error":
        ctx_error = (err.get("ctx") or {}).get("error")
        return (str(ctx_error) if ctx_error is not None else err["msg"].removeprefix("Value error, ")), ""
    if kind == "extra_forbidden":
        unknown = str(shown[-1]) if shown else "?"
        text = f"unknown field {unknown!r}"
        if model is not None:
            allowed = allowed_fields(model, tuple(p for p in shown[len(base) : -1]))
            if allowed:
                close = difflib.get_close_matches(unknown, allowed, n=1)
                if close:
                    text += f" (did you mean {close[0]!r}?)"
                text += "; allowed: " + ", ".join(allowed)
        return text, ""
    if kind == "missing":
        return f"required field {str(shown[-1]) if shown else ''!r} is missing", ""
    message = str(err["msg"])
    if kind == "string_type" and isinstance(given, bool | int | float):
        return message, f'; got {json.dumps(given)}, write it quoted if a string is meant: "{given}"'
    if isinstance(given, str | int | float | bool):
        return message, f", got {json.dumps(given)}"
    if isinstance(given, list | dict):
        return message, f", got a {'list' if isinstance(given, list) else 'mapping'}"
    return message, ""


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


def allowed_fields(model: type[BaseModel], path: FieldPath) -> list[str]:
    """The field names (camelCase) the model allows at `path`; empty when unknown or free-form."""
    root = _schema(model)
    defs = root.get("$defs", {})

    def deref(schema: dict[str, Any]) -> dict[str, Any]:
        while True:
            if "$ref" in schema:
                schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
            elif "allOf" in schema and len(schema["allOf"]) == 1:
                schema = schema["allOf"][0]
            elif "anyOf" in schema:
                branches = [s for s in schema["anyOf"] if s.get("type") != "null"]
                objects = [deref(b) for b in branches]
                schema = next(
                    (o for o in objects if "properties" in o or "items" in o), objects[0] if objects else {}
                )
            else:
                return schema

    node = deref(root)
    for part in path:
        if isinstance(part, int):
            node = deref(node.get("items", {}))
        elif part in node.get("properties", {}):
            node = deref(node["properties"][part])
        elif isinstance(node.get("additionalProperties"), dict):
            node = deref(node["additionalProperties"])
        else:
            return []
    return sorted(node.get("properties", {}))
