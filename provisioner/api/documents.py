"""Reading API objects from YAML, and saying precisely what is wrong with them.

Three rooms, each public and reusable (scenario files use the first two), re-exported here so callers
import one module:

- `provisioner.api.yamldoc`: `parse_yaml_documents(text, source=...)` / `read_yaml_file(path)`, a
  multi-document YAML stream as a list of `YamlDocument` (plain JSON-like data plus the line of every key
  and list item; a document unpacks as `(data, line)`), its `identify` (kind, name), and the `Problem` every
  check reports.
- `provisioner.api.located`: `located_problems(error, document, ...)`, a pydantic `ValidationError`
  turned into `Problem`s that print as `FILE:LINE: Kind/name: field.path: message`, LINE being where the
  YAML gives that field and the path spelled in camelCase as the user wrote it; a `LoadedObject` is a
  validated object with the document it came from.
- here: `validate_documents` / `validate_paths`, each document into its model by apiVersion/kind, then
  the checks that need the whole set (duplicate names, a nodeClassRef naming no NodeClass) and lint
  warnings.

Pure: reads only the files it is given, no clock, no environment. Printing is the CLI's business.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from provisioner.api import KINDS, accelerators, karpenter_providers, key_checks, labels, team_checks
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.located import LoadedObject, allowed_fields, format_path, located_problems
from provisioner.api.nodepool import NodePool
from provisioner.api.yamldoc import (
    YAML_SUFFIXES,
    DocumentError,
    FieldPath,
    Problem,
    Severity,
    YamlDocument,
    identify,
    parse_yaml_documents,
    read_yaml_file,
)

__all__ = [
    "YAML_SUFFIXES",
    "DocumentError",
    "FieldPath",
    "LoadedObject",
    "Problem",
    "Severity",
    "ValidationReport",
    "YamlDocument",
    "allowed_fields",
    "cross_check",
    "expand_lists",
    "expand_paths",
    "format_path",
    "identify",
    "lint",
    "located_problems",
    "parse_yaml_documents",
    "read_yaml_file",
    "validate_document",
    "validate_documents",
    "validate_paths",
]


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
    if isinstance(api_version, str) and api_version in karpenter_providers.API_VERSIONS:
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
    documents: Iterable[YamlDocument],
    *,
    allow_oversubscription: bool = False,
    resources: Collection[str] | None = None,
) -> ValidationReport:
    """Validate each document and its keys (`provisioner.api.key_checks`, shown even when the document
    does not validate; `resources`: what the catalogs' instance types offer), then the checks across the
    set: duplicate names (an error), a NodePool's `nodeClassRef` naming no NodeClass of the set (a
    warning: it may exist in the cluster), and the Teams' and Departments' (`provisioner.api.team_checks`:
    over-subscription is an error unless `allow_oversubscription`).

    A `kind: List` document counts as its items."""
    report = ValidationReport()
    for document in expand_lists(documents):
        report.documents += 1
        obj, problems = validate_document(document)
        report.problems.extend(problems)
        report.problems.extend(key_checks.check(document, resources=resources))
        if obj is not None:
            report.objects.append(LoadedObject(obj, document))
            report.problems.extend(lint(obj, document))
    report.problems.extend(cross_check(report.objects))
    report.problems.extend(team_checks.check(report.objects, allow_oversubscription=allow_oversubscription))
    return report


def validate_paths(
    paths: Sequence[str | Path],
    *,
    stdin: str | None = None,
    allow_oversubscription: bool = False,
    resources: Collection[str] | None = None,
) -> ValidationReport:
    """Validate files and folders (every *.yaml / *.yml below a folder, in name order) as one set.

    A path `-` stands for `stdin`, the text the caller read from standard input; `resources`: see
    `validate_documents`."""
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
    checked = validate_documents(
        documents, allow_oversubscription=allow_oversubscription, resources=resources
    )
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
        ours = karpenter_providers.LABEL_MAP.get(req.key)
        if ours is not None:
            warn((*base, i, "key"), f"{req.key} is Karpenter's label; nodes here carry {ours}")
        elif req.key.startswith(karpenter_providers.domains()):
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
    asks_for_gpus = any(
        req.key in (labels.GPU_NAME, labels.GPU_COUNT, labels.GPU_MEMORY, labels.GPU_MANUFACTURER)
        and req.operator.value in ("In", "Gt", "Exists")
        for req in spec.template.spec.requirements
    )
    # Any accelerator's taint keeps CPU pods out (`amd.com/gpu`, `aws.amazon.com/neuron` on those pools).
    if asks_for_gpus and not any(accelerators.is_accelerator(t.key) for t in spec.template.spec.taints):
        warn(
            ("spec", "template", "spec", "requirements"),
            f"a GPU pool without a {labels.GPU_RESOURCE} taint lets CPU-only pods land on its costly nodes; "
            f"add taints: [{{key: {labels.GPU_RESOURCE}, value: 'true', effect: NoSchedule}}]",
        )
    budgets = spec.disruption.budgets
    if budgets and all(b.nodes in ("0", "0%") and b.schedule is None for b in budgets):
        warn(
            ("spec", "disruption", "budgets"),
            "every budget is 0 at all times: no node of this pool is ever disrupted voluntarily "
            "(expired nodes still go: expiration is forceful)",
        )
    return problems


# Labels whose values are integers (so In/NotIn values must be digits).
_INTEGER_LABELS = frozenset(
    {labels.GPU_COUNT, labels.GPU_MEMORY, labels.INSTANCE_CPU, labels.INSTANCE_MEMORY}
)
