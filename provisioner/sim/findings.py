"""`Findings`: the problems and warnings found while reading a scenario's documents, each located as
`FILE:LINE: Kind/name: field: message` by the document and field path it concerns. The scenario loader,
its Kubernetes documents' checks and the timeline's all add to one."""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.api import documents
from provisioner.api.documents import Problem, YamlDocument


class Findings:
    """Problems (the scenario cannot run) and warnings (it runs; `simulate` prints them first)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def add(self, document: YamlDocument, message: str, path: Sequence[str | int] = ()) -> None:
        """A problem at `path` of `document`, located at the line of that field."""
        kind, name = documents.identify(document)
        self.problems.append(
            Problem(
                document.source,
                document.line_of(tuple(path)),
                message,
                kind=kind,
                name=name,
                path=documents.format_path(tuple(path)),
            )
        )
