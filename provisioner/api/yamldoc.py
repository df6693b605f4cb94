"""Reading YAML with lines: a multi-document stream as `YamlDocument`s (plain JSON-like data plus the
line of every key and list item), and the `Problem` every input check reports, located at a line.

`parse_yaml_documents(text, source=...)` / `read_yaml_file(path)`; a document unpacks as `(data, line)`,
and `identify(document)` gives its kind and name when they are text.
Bounded: aliases may not expand a document past `_MAX_NODES` nodes, nor nest it past `_MAX_DEPTH`.
Turning validation errors into located problems is `provisioner.api.located`'s; validating documents,
`provisioner.api.documents`'. Pure: reads only the files it is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

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


def identify(document: YamlDocument) -> tuple[str | None, str | None]:
    """The document's (kind, metadata.name) when they are strings, for locating its problems."""
    data = document.data
    if not isinstance(data, dict):
        return None, None
    kind = data.get("kind") if isinstance(data.get("kind"), str) else None
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return kind, name if isinstance(name, str) else None


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
            except (yaml.YAMLError, RecursionError) as err:
                raise DocumentError(_unreadable(text, source, index, err), documents) from None
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


def _unreadable(text: str, source: str, index: int, err: Exception) -> Problem:
    """The problem of a stream the YAML library could not compose at document `index`.

    YAML libraries refuse deep nesting at limits and in words of their own (or overflow the stack), so
    nesting past our own `_MAX_DEPTH` is looked for first and reported in our words.
    """
    too_deep = _first_too_deep(text)
    if too_deep is not None and too_deep[0] <= index:
        return Problem(source, too_deep[1], f"nesting deeper than {_MAX_DEPTH} levels")
    if isinstance(err, RecursionError):
        return Problem(source, 1, f"document {index + 1} nests too deep to read")
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 1
        return Problem(source, line, f"not valid YAML: {err.problem or err.context or 'invalid'}")
    return Problem(source, 1, f"not valid YAML: {err}")


def _first_too_deep(text: str) -> tuple[int, int] | None:
    """(document index, line) of the first collection nested deeper than `_MAX_DEPTH`, or None.

    Read with the pure-Python parser, a state machine over events that neither recurses nor looks far
    ahead (libyaml's scanner reads a whole flow collection ahead and stops at its own depth first). A
    stream that breaks before any such collection gives None.
    """
    depth = 0
    index = -1
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.DocumentStartEvent):
                index += 1
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > _MAX_DEPTH:
                    mark = event.start_mark
                    return index, mark.line + 1 if mark is not None else 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


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
