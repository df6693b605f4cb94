"""Reading API objects from YAML, and saying precisely what is wrong with them.

Owns three things, each public and reusable (scenario files use the first two):

- `parse_yaml_documents(text, source=...)` / `read_yaml_file(path)`: a multi-document YAML stream as a
  list of `YamlDocument` (plain JSON-like data plus the line of every key and list item). A document
  unpacks as `(data, line)`.
- `located_problems(error, document, ...)`: a pydantic `ValidationError` turned into `Problem`s that print
  as `FILE:LINE: Kind/name: field.path: message`, LINE being where the YAML gives that field and the path
  spelled in camelCase as the user wrote it (`spec.template.spec.requirements[1].operator`).
- `validate_documents` / `validate_paths`: each document into its model by apiVersion/kind, then the
  checks that need the whole set (duplicate names, a nodeClassRef naming no NodeClass) and lint warnings.

Pure: reads only the files it is given, no clock, no environment. Printing is the CLI's business.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ValidationError

from provisioner.api import KINDS, labels
from provisioner.api.common import NODECLASS_KINDS, FieldError
from provisioner.api.nodepool import NodePool

FieldPath = tuple[str | int, ...]
"""A path into a document: mapping keys (camelCase, as written) and list indexes."""

Severity = Literal["error", "warning"]

YAML_SUFFIXES = (".yaml", ".yml")
_MAX_NODES = 200_000
"""Most data nodes one document may expand to: aliases can make a few lines into billions of nodes."""
_MAX_DEPTH = 64
"""Deepest nesting a document may have (Kubernetes objects need about 12); deeper is refused, not recursed."""
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in an input file, located at a line."""

    file: str
    line: int
    message: str
    kind: str | None = None
    """The document's kind (`NodePool`...), when it has one."""
    name: str | None = None
    """The document's `metadata.name`, when it has one."""
    path: str = ""
    """The field, camelCase and dotted: `spec.template.spec.requirements[1].operator`."""
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        parts = [f"{self.file}:{self.line}"]
        if self.kind:
            parts.append(f"{self.kind}/{self.name or '<unnamed>'}")
        if self.path:
            parts.append(self.path)
        parts.append(self.message if self.is_error else f"warning: {self.message}")
        return ": ".join(parts)


@dataclass(frozen=True)
class YamlDocument:
    """One document of a YAML stream: its data (dicts, lists, str, int, float, bool, None) and lines.

    Unpacks as `(data, line)`, `line` being the 1-based line where the document's content starts.
    """

    data: Any
    line: int
    source: str = "<string>"
    """File name (as given) the document was read from."""
    index: int = 0
    """0-based position of the document in its stream."""
    lines: Mapping[FieldPath, int] = field(default_factory=dict, repr=False)
    """1-based line of every mapping key and list item, by path."""

    def __iter__(self) -> Iterator[Any]:
        yield self.data
        yield self.line

    def line_of(self, path: Sequence[str | int]) -> int:
        """The line of the deepest part of `path` the document has (the document's line at worst)."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.line


class DocumentError(ValueError):
    """A stream that could not be read as YAML (syntax, encoding, I/O), located at a line.

    `documents` holds the documents parsed before the failure, so callers may still check them.
    """

    def __init__(self, problem: Problem, documents: Sequence[YamlDocument] = ()) -> None:
        super().__init__(str(problem))
        self.problem = problem
        self.documents = list(documents)


# ---------------------------------------------------------------------------------------------- parsing


def parse_yaml_documents(text: str, *, source: str = "<string>") -> list[YamlDocument]:
    """Every non-empty document of a YAML stream, with the line of each key and list item.

    Data is plain JSON-like Python as Kubernetes reads YAML: timestamps and other tagged scalars stay
    strings, mapping keys become strings. Raises `DocumentError` (with the line) on invalid YAML,
    non-scalar keys, duplicate keys, recursive aliases or alias bombs; `DocumentError.documents` holds
    the documents read before that point.
    """
    documents: list[YamlDocument] = []
    loader = _SafeLoader(text)
    index = 0
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.MarkedYAMLError as err:
                mark = err.problem_mark or err.context_mark
                line = mark.line + 1 if mark is not None else 1
                what = err.problem or err.context or "invalid"
                raise DocumentError(Problem(source, line, f"not valid YAML: {what}"), documents) from None
            except yaml.YAMLError as err:
                raise DocumentError(Problem(source, 1, f"not valid YAML: {err}"), documents) from None
            except RecursionError:
                raise DocumentError(
                    Problem(source, 1, f"document {index + 1} nests too deep to read"), documents
                ) from None
            if node is None:
                continue
            builder = _Builder(loader, source)
            try:
                data = builder.build(node, ())
            except DocumentError as err:
                raise DocumentError(err.problem, documents) from None
            if data is not None:
                documents.append(
                    YamlDocument(
                        data=data,
                        line=node.start_mark.line + 1,
                        source=source,
                        index=index,
                        lines=builder.lines,
                    )
                )
            index += 1
    finally:
        loader.dispose()
    return documents


def read_yaml_file(path: str | Path) -> list[YamlDocument]:
    """`parse_yaml_documents` of a file; unreadable, binary or non-UTF-8 files raise `DocumentError`."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise DocumentError(Problem(source, 1, f"cannot read: {err.strerror or err}")) from None
    if b"\x00" in raw:
        raise DocumentError(Problem(source, 1, "not a text file (it holds NUL bytes); expected YAML"))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DocumentError(Problem(source, line, "not UTF-8 text; expected YAML")) from None
    return parse_yaml_documents(text, source=source)


class _Builder:
    """Turns one composed YAML node tree into plain data, recording the line of every key and item."""

    def __init__(self, loader: Any, source: str) -> None:
        self.loader = loader
        self.source = source
        self.lines: dict[FieldPath, int] = {}
        self.count = 0
        self.active: set[int] = set()

    def fail(self, node: yaml.Node, message: str) -> DocumentError:
        return DocumentError(Problem(self.source, node.start_mark.line + 1, message))

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        self.count += 1
        if self.count > _MAX_NODES:
            raise self.fail(node, f"document expands to more than {_MAX_NODES} values (alias bomb?)")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        if len(path) >= _MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {_MAX_DEPTH} levels")
        if id(node) in self.active:
            raise self.fail(node, "recursive alias: a node contains itself")
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                items = []
                for i, child in enumerate(node.value):
                    self.lines[(*path, i)] = child.start_mark.line + 1
                    items.append(self.build(child, (*path, i)))
                return items
            if isinstance(node, yaml.MappingNode):
                return self.mapping(node, path)
        finally:
            self.active.discard(id(node))
        raise self.fail(node, "unsupported YAML node")  # pragma: no cover - nodes are one of three kinds

    def scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag in _PLAIN_TAGS:
            try:
                value = self.loader.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError) as err:
                raise self.fail(node, f"bad scalar {node.value!r}: {err}") from None
            # JSON has no NaN or infinity: keep the text, so validation says "not a number" clearly.
            if isinstance(value, float) and not math.isfinite(value):
                return node.value
            return value
        # Timestamps, binary and custom tags stay the text the user wrote, as Kubernetes reads them.
        return str(node.value)

    def mapping(self, node: yaml.MappingNode, path: FieldPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: list[dict[str, Any]] = []
        explicit: dict[FieldPath, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise self.fail(source, "a merge key (<<) takes a mapping or a list of mappings")
                    merged.append(self.build(source, path))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, "mapping keys must be strings, not lists or mappings")
            key = str(key_node.value)
            if key in out:
                raise self.fail(key_node, f"duplicate key {key!r} (first at line {explicit[(*path, key)]})")
            explicit[(*path, key)] = key_node.start_mark.line + 1
            self.lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, (*path, key))
        # Keys given here win over merged ones, and so do their lines.
        self.lines.update(explicit)
        for extra in merged:
            for key, value in extra.items():
                out.setdefault(key, value)
        return out


# ------------------------------------------------------------------------------------ error conversion


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
        extra: FieldPath = ctx_error.path if isinstance(ctx_error, FieldError) else ()
        real, shown = _resolve(document.data, loc, extra, missing=err["type"] == "missing")
        line = document.line_of(real)
        message, given = _message(err, shown, model=model, base=base)
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


# ------------------------------------------------------------------------------------------- validation


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


@dataclass
class ValidationReport:
    """What validating files or documents found: the objects that validated and every problem."""

    objects: list[LoadedObject] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: int = 0
    documents: int = 0

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors

    def sorted_problems(self) -> list[Problem]:
        return sorted(self.problems, key=lambda p: (p.file, p.line, p.severity != "error", p.path))


KARPENTER_API_VERSIONS = {
    "karpenter.sh/v1": "NodePool",
    "karpenter.sh/v1beta1": "NodePool",
    "karpenter.k8s.aws/v1": "EC2NodeClass",
    "karpenter.k8s.aws/v1beta1": "EC2NodeClass",
}


def identify(document: YamlDocument) -> tuple[str | None, str | None]:
    """The document's (kind, metadata.name) when they are strings, for locating its problems."""
    data = document.data
    if not isinstance(data, dict):
        return None, None
    kind = data.get("kind") if isinstance(data.get("kind"), str) else None
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return kind, name if isinstance(name, str) else None


def validate_document(document: YamlDocument) -> tuple[BaseModel | None, list[Problem]]:
    """One document into its model (chosen by apiVersion and kind): the object, or the problems.

    Validation is strict in the way the Kubernetes API server is: `weight: "50"` is not an integer and
    `nodes: 5` is not a string.
    """
    kind, name = identify(document)
    data = document.data

    def problem(message: str, path: FieldPath = ()) -> Problem:
        return Problem(
            document.source,
            document.line_of(path),
            message,
            kind=kind,
            name=name,
            path=format_path(path),
        )

    if not isinstance(data, dict):
        shape = "a list" if isinstance(data, list) else f"the scalar {json.dumps(data, default=str)[:60]}"
        return None, [
            Problem(
                document.source,
                document.line,
                f"document {document.index + 1} is {shape}; expected a mapping with apiVersion, kind, "
                "metadata and spec",
            )
        ]
    api_version = data.get("apiVersion")
    if "apiVersion" not in data:
        return None, [problem(f"apiVersion is missing; expected {labels.API_VERSION}")]
    if isinstance(api_version, str) and api_version in KARPENTER_API_VERSIONS:
        return None, [
            problem(
                f"{api_version} is Karpenter's API; convert it with "
                "`provisioner templates import-karpenter FILE`",
                ("apiVersion",),
            )
        ]
    if api_version != labels.API_VERSION:
        return None, [
            problem(
                f"apiVersion {json.dumps(api_version)} is not known; allowed: {labels.API_VERSION}",
                ("apiVersion",),
            )
        ]
    if "kind" not in data:
        return None, [problem(f"kind is missing; allowed: {', '.join(KINDS)}")]
    if not isinstance(data["kind"], str) or data["kind"] not in KINDS:
        close = difflib.get_close_matches(str(data["kind"]), list(KINDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return None, [
            problem(
                f"kind {json.dumps(data['kind'])} is not known{hint}; allowed: {', '.join(KINDS)}",
                ("kind",),
            )
        ]
    model = KINDS[data["kind"]]
    try:
        obj = model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as err:
        return None, located_problems(err, document, kind=kind, name=name, model=model)
    return obj, []


def expand_lists(documents: Iterable[YamlDocument]) -> list[YamlDocument]:
    """Documents with every `kind: List` (what `kubectl get -o yaml` prints) replaced by its items, each
    a document of its own whose lines still point into the file."""
    out: list[YamlDocument] = []
    for document in documents:
        data = document.data
        if not (
            isinstance(data, dict)
            and data.get("kind") == "List"
            and data.get("apiVersion") == "v1"
            and isinstance(data.get("items"), list)
        ):
            out.append(document)
            continue
        for i, item in enumerate(data["items"]):
            prefix = ("items", i)
            lines = {path[2:]: line for path, line in document.lines.items() if path[:2] == prefix}
            out.append(
                YamlDocument(
                    data=item,
                    line=document.lines.get(prefix, document.line),
                    source=document.source,
                    index=document.index,
                    lines=lines,
                )
            )
    return out


def validate_documents(
    documents: Iterable[YamlDocument], *, allow_oversubscription: bool = False
) -> ValidationReport:
    """Validate each document, then the checks across the set: duplicate names (an error), a
    NodePool's `nodeClassRef` naming no NodeClass of the set (a warning: it may exist in the cluster),
    and the Teams' and Departments' (`provisioner.api.team_checks`: over-subscription is an error unless
    `allow_oversubscription`).

    A `kind: List` document counts as its items."""
    from provisioner.api import team_checks

    report = ValidationReport()
    for document in expand_lists(documents):
        report.documents += 1
        obj, problems = validate_document(document)
        report.problems.extend(problems)
        if obj is not None:
            report.objects.append(LoadedObject(obj, document))
            report.problems.extend(lint(obj, document))
    report.problems.extend(cross_check(report.objects))
    report.problems.extend(team_checks.check(report.objects, allow_oversubscription=allow_oversubscription))
    return report


def validate_paths(
    paths: Sequence[str | Path], *, stdin: str | None = None, allow_oversubscription: bool = False
) -> ValidationReport:
    """Validate files and folders (every *.yaml / *.yml below a folder, in name order) as one set.

    A path `-` stands for `stdin`, the text the caller read from standard input."""
    report = ValidationReport()
    documents: list[YamlDocument] = []
    for path in paths:
        if str(path) == "-":
            report.files += 1
            try:
                documents.extend(parse_yaml_documents(stdin or "", source="<stdin>"))
            except DocumentError as err:
                report.problems.append(err.problem)
                documents.extend(err.documents)
            continue
        files = expand_paths([path])
        if not files:
            report.problems.append(
                Problem(
                    str(path), 1, "no such file or folder" if not Path(path).exists() else "no YAML files"
                )
            )
        for file in files:
            report.files += 1
            try:
                found = read_yaml_file(file)
            except DocumentError as err:
                report.problems.append(err.problem)
                found = err.documents
            else:
                if not found:
                    report.problems.append(Problem(str(file), 1, "file holds no YAML documents"))
            documents.extend(found)
    checked = validate_documents(documents, allow_oversubscription=allow_oversubscription)
    report.objects = checked.objects
    report.problems.extend(checked.problems)
    report.documents = checked.documents
    return report


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; folders as the *.yaml and *.yml files below them, sorted."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES and p.is_file()))
        elif path.exists():
            out.append(path)
    return out


def cross_check(objects: Sequence[LoadedObject]) -> list[Problem]:
    """Duplicate (kind, name) pairs, and NodePools whose nodeClassRef names no NodeClass of the set."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str], LoadedObject] = {}
    for loaded in objects:
        key = (loaded.kind, loaded.name)
        first = seen.get(key)
        if first is not None:
            doc = loaded.document
            problems.append(
                Problem(
                    doc.source,
                    doc.line_of(("metadata", "name")),
                    f"duplicate name: {loaded.kind} {loaded.name!r} is also defined at "
                    f"{first.document.source}:{first.document.line_of(('metadata', 'name'))}",
                    kind=loaded.kind,
                    name=loaded.name,
                    path="metadata.name",
                )
            )
        else:
            seen[key] = loaded
    classes = {(kind, name) for kind, name in seen if kind in NODECLASS_KINDS}
    for loaded in objects:
        if loaded.kind != "NodePool":
            continue
        ref = loaded.obj.spec.template.spec.node_class_ref  # type: ignore[attr-defined]
        if (ref.kind, ref.name) not in classes:
            path: FieldPath = ("spec", "template", "spec", "nodeClassRef", "name")
            problems.append(
                Problem(
                    loaded.document.source,
                    loaded.document.line_of(path),
                    f"no {ref.kind} named {ref.name!r} among the files checked (fine if it exists in the "
                    "cluster)",
                    kind=loaded.kind,
                    name=loaded.name,
                    path=format_path(path),
                    severity="warning",
                )
            )
    return problems


def lint(obj: BaseModel, document: YamlDocument) -> list[Problem]:
    """Warnings for objects that are valid but probably not what was meant."""
    if not isinstance(obj, NodePool):
        return []
    problems: list[Problem] = []

    def warn(path: FieldPath, message: str) -> None:
        problems.append(
            Problem(
                document.source,
                document.line_of(path),
                message,
                kind="NodePool",
                name=obj.name,
                path=format_path(path),
                severity="warning",
            )
        )

    base: FieldPath = ("spec", "template", "spec", "requirements")
    for i, req in enumerate(obj.spec.template.spec.requirements):
        ours = labels.KARPENTER_LABEL_MAP.get(req.key)
        if ours is not None:
            warn((*base, i, "key"), f"{req.key} is Karpenter's label; nodes here carry {ours}")
        elif req.key.startswith(("karpenter.sh/", "karpenter.k8s.aws/")):
            warn((*base, i, "key"), f"{req.key} is a Karpenter label no node launched here will carry")
        if req.key == labels.GPU_NAME:
            for j, value in enumerate(req.values):
                if value not in labels.GPU_NAMES:
                    hint = (
                        f"; did you mean {value.lower()!r}?"
                        if value.lower() in labels.GPU_NAMES
                        else f"; known: {', '.join(labels.GPU_NAMES)}"
                    )
                    warn((*base, i, "values", j), f"GPU name {value!r} is not a known model{hint}")
        if req.key in _INTEGER_LABELS and req.operator.value in ("In", "NotIn"):
            for j, value in enumerate(req.values):
                if not value.isdigit():
                    warn(
                        (*base, i, "values", j),
                        f"{req.key} values are whole numbers; {value!r} matches no node",
                    )
    spec = obj.spec
    for name in spec.limits:
        if name in _LIMIT_TYPOS:
            warn(
                ("spec", "limits", name),
                f"no node has a resource {name!r}; did you mean {_LIMIT_TYPOS[name]!r}?",
            )
    asks_for_gpus = any(
        req.key in (labels.GPU_NAME, labels.GPU_COUNT, labels.GPU_MEMORY, labels.GPU_MANUFACTURER)
        and req.operator.value in ("In", "Gt", "Exists")
        for req in spec.template.spec.requirements
    )
    if asks_for_gpus and not any(t.key == labels.GPU_RESOURCE for t in spec.template.spec.taints):
        warn(
            ("spec", "template", "spec", "requirements"),
            f"a GPU pool without a {labels.GPU_RESOURCE} taint lets CPU-only pods land on its costly nodes; "
            f"add taints: [{{key: {labels.GPU_RESOURCE}, value: 'true', effect: NoSchedule}}]",
        )
    budgets = spec.disruption.budgets
    if budgets and all(b.nodes in ("0", "0%") and b.schedule is None for b in budgets):
        warn(
            ("spec", "disruption", "budgets"),
            "every budget is 0 at all times: no node of this pool is ever disrupted (not even expired ones)",
        )
    return problems


# Labels whose values are integers (so In/NotIn values must be digits).
_INTEGER_LABELS = frozenset(
    {labels.GPU_COUNT, labels.GPU_MEMORY, labels.INSTANCE_CPU, labels.INSTANCE_MEMORY}
)
# Resource names people write for GPUs and mean `nvidia.com/gpu`.
_LIMIT_TYPOS = {
    "gpu": labels.GPU_RESOURCE,
    "gpus": labels.GPU_RESOURCE,
    "nvidia.com/gpus": labels.GPU_RESOURCE,
    "nvidia/gpu": labels.GPU_RESOURCE,
    "nvidia-gpu": labels.GPU_RESOURCE,
    "mem": "memory",
    "cpus": "cpu",
}
