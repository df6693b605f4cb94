"""Checks on the keys a person types, read from the raw document so they show whether or not the rest of
the object validates: requirement keys and labels under our own `provisioner.sh/` prefix that are none of
our well-known keys, and pool limits or team/department quota resources (`resources`, `borrowingLimit`,
`lendingLimit`) that no instance type offers.

A requirement on `provisioner.sh/gpu_name` can never be meant (no node carries it, so the pool would
match anything or nothing): an error with the nearest well-known key. A template label under our prefix
is a warning (it is only put on nodes). Limits and quotas name resources; which resources exist comes
from the catalogs, which the caller passes (this room reads none): an unknown one is an error with "did
you mean". Without that set only misspellings of the common resources (GPU, CPU, memory...) are
flagged, as warnings. Other checks on the validated models live in `provisioner.api.documents.lint`. Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator
from typing import Any

from provisioner.api import labels
from provisioner.api.located import format_path
from provisioner.api.yamldoc import FieldPath, Problem, YamlDocument, identify

PREFIX = f"{labels.GROUP}/"

WELL_KNOWN_KEYS = (*labels.NODE_LABELS, labels.CAPACITY_RESERVATION_ID, labels.CAPACITY_RESERVATION_TYPE)
"""Every `provisioner.sh/` label a node can carry, so every key under our prefix a requirement may name."""

POOL_ONLY_RESOURCES = ("nodes",)
"""Resources a pool's limits may name that are not a node's capacity (`nodes`: the node count)."""

_COMMON_RESOURCES = (
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    labels.GPU_RESOURCE,
    labels.AMD_GPU_RESOURCE,
)
"""Resources every catalog has: a name one letter from one of these is a misspelling even without the
catalogs (`nvidia.com/gpuu`)."""

# Resource names people write for GPUs, CPU and memory, and what they mean.
_RESOURCE_TYPOS = {
    "gpu": labels.GPU_RESOURCE,
    "gpus": labels.GPU_RESOURCE,
    "nvidia.com/gpus": labels.GPU_RESOURCE,
    "nvidia/gpu": labels.GPU_RESOURCE,
    "nvidia-gpu": labels.GPU_RESOURCE,
    "mem": "memory",
    "cpus": "cpu",
}


def check(document: YamlDocument, *, resources: Collection[str] | None = None) -> list[Problem]:
    """The key problems of one document (NodePool, Team or Department; others have none).

    `resources`: every resource some instance type of the catalogs offers (`cpu`, `nvidia.com/gpu`...);
    None to check only for well-known misspellings."""
    data = document.data
    if not isinstance(data, dict) or data.get("apiVersion") != labels.API_VERSION:
        return []
    kind, name = identify(document)
    problems: list[Problem] = []

    def add(path: FieldPath, message: str, *, error: bool) -> None:
        problems.append(
            Problem(
                document.source,
                document.line_of(path),
                message,
                kind=kind,
                name=name,
                path=format_path(path),
                severity="error" if error else "warning",
            )
        )

    spec = _mapping(data.get("spec"))
    if kind == "NodePool":
        template = _mapping(spec.get("template"))
        base: FieldPath = ("spec", "template", "spec", "requirements")
        for i, req in enumerate(_list(_mapping(template.get("spec")).get("requirements"))):
            key = _mapping(req).get("key")
            why = unknown_key(key) if isinstance(key, str) else None
            if why is not None:
                add((*base, i, "key"), why, error=True)
        for key in _mapping(_mapping(template.get("metadata")).get("labels")):
            why = unknown_key(key) if isinstance(key, str) else None
            if why is not None:
                add(("spec", "template", "metadata", "labels", key), why, error=False)
        allowed = None if resources is None else {*resources, *POOL_ONLY_RESOURCES}
        for resource in _mapping(spec.get("limits")):
            why = unknown_resource(resource, allowed)
            if why is not None:
                add(("spec", "limits", resource), why, error=allowed is not None)
    elif kind in ("Team", "Department"):
        for path, resource in _quota_resources(spec):
            why = unknown_resource(resource, resources)
            if why is not None:
                add(path, why, error=resources is not None)
    return problems


def unknown_key(key: str) -> str | None:
    """Why a key under `provisioner.sh/` is none of ours (a typo such as `gpu_name`), with the nearest of
    ours; None for our keys and keys of other prefixes."""
    if not key.startswith(PREFIX) or key in WELL_KNOWN_KEYS:
        return None
    names = [k.removeprefix(PREFIX) for k in WELL_KNOWN_KEYS]
    close = difflib.get_close_matches(key.removeprefix(PREFIX).replace("_", "-"), names, n=1, cutoff=0.7)
    hint = f"did you mean {PREFIX + close[0]!r}?" if close else "ours are " + ", ".join(WELL_KNOWN_KEYS)
    return f"{key} is not one of the provisioner's well-known labels ({hint})"


def unknown_resource(resource: object, allowed: Collection[str] | None) -> str | None:
    """Why no node could ever count toward this resource, or None. With `allowed` None, only the
    well-known misspellings are caught."""
    if not isinstance(resource, str):
        return None
    if allowed is None:
        guess = _RESOURCE_TYPOS.get(resource)
        if guess is None and resource not in _COMMON_RESOURCES:
            close = difflib.get_close_matches(resource, _COMMON_RESOURCES, n=1, cutoff=0.85)
            guess = close[0] if close else None
        return None if guess is None else f"no node has a resource {resource!r}; did you mean {guess!r}?"
    if resource in allowed:
        return None
    close = [_RESOURCE_TYPOS[resource]] if _RESOURCE_TYPOS.get(resource) in allowed else []
    close = close or difflib.get_close_matches(resource, sorted(allowed), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"offered: {', '.join(sorted(allowed))}"
    return f"no instance type in the catalogs offers a resource {resource!r}; {hint}"


def _quota_resources(spec: dict[str, Any]) -> Iterator[tuple[FieldPath, Any]]:
    for i, entry in enumerate(_list(spec.get("quotas"))):
        for field in ("resources", "borrowingLimit", "lendingLimit"):
            for resource in _mapping(_mapping(entry).get(field)):
                yield ("spec", "quotas", i, field, resource), resource


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
