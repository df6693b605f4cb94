"""PriorityClasses in a scenario (`scheduling.k8s.io/v1`), and a pod's priority from them as the API
server's Priority admission plugin sets it: `priorityClassName` names a class and `spec.priority` becomes
its `value`; a pod naming none gets the `globalDefault` class's value, else 0. Kubernetes' two built-in
classes (`system-cluster-critical`, `system-node-critical`) are known without a document. A name no
class has is a problem at load, as the API server refuses such a pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.api.yamldoc import Problem, YamlDocument

BUILT_IN = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
"""Kubernetes' own classes, there in every cluster."""
USER_MAX = 1000000000
"""The highest value a class of ours may have (higher ones are reserved for the built-in classes)."""


@dataclass
class PriorityClasses:
    values: dict[str, int] = field(default_factory=lambda: dict(BUILT_IN))
    default: str | None = None
    """The class with `globalDefault: true`, if any."""

    def resolve(self, spec: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The pod spec with `priority` set from its class (a copy; the same spec when nothing changes),
        or (None, why) when it names a class no document defines."""
        name = spec.get("priorityClassName")
        if name is None:
            if self.default is None:
                return dict(spec), None
            return {**spec, "priorityClassName": self.default, "priority": self.values[self.default]}, None
        if not isinstance(name, str) or name not in self.values:
            known = ", ".join(sorted(self.values))
            return None, f"priorityClassName {name!r}: no PriorityClass of that name; known: {known}"
        return {**spec, "priority": self.values[name]}, None


def collect(docs: Sequence[YamlDocument]) -> tuple[PriorityClasses, list[Problem]]:
    """The scenario's PriorityClasses, and the problems of their documents."""
    found = PriorityClasses()
    problems: list[Problem] = []

    def add(doc: YamlDocument, message: str, path: tuple[str | int, ...]) -> None:
        name = (doc.data.get("metadata") or {}).get("name")
        problems.append(
            Problem(
                doc.source,
                doc.line_of(path),
                message,
                kind="PriorityClass",
                name=name if isinstance(name, str) else None,
                path=".".join(map(str, path)),
            )
        )

    for doc in docs:
        data = doc.data
        if not isinstance(data, dict) or data.get("kind") != "PriorityClass":
            continue
        name = (data.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            continue  # the loader says metadata.name is required
        value = data.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            add(doc, f"value must be an integer, got {value!r}", ("value",))
            continue
        if name in BUILT_IN:
            add(
                doc, f"{name} is a class Kubernetes defines itself; choose another name", ("metadata", "name")
            )
            continue
        if not -(2**31) <= value <= USER_MAX:
            add(doc, f"value {value} is out of range; allowed: -2147483648 to {USER_MAX}", ("value",))
            continue
        found.values[name] = value
        default = data.get("globalDefault", False)
        if not isinstance(default, bool):
            add(doc, f"globalDefault must be true or false, got {default!r}", ("globalDefault",))
        elif default:
            if found.default is not None:
                add(
                    doc,
                    f"PriorityClass {found.default} is the globalDefault already; only one may be",
                    ("globalDefault",),
                )
            else:
                found.default = name
    return found, problems
