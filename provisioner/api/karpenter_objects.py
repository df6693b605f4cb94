"""One Karpenter object converted into ours, field by field: a `karpenter.sh/v1` NodePool into a
`provisioner.sh/v1` NodePool, a NodeClass of one of Karpenter's providers (`karpenter.k8s.aws/v1`
EC2NodeClass) into the NodeClass of our plug-in for that cloud, by the plug-in's conversion
(`ObjectConverter`; the providers are provisioner.api.karpenter_providers'). Every field that cannot be
carried over is dropped with a warning located at its line; what changed meaning or needs checking
becomes a `Note` of the migration report. Which converter a document goes to, the result of a set and
the notes on the fleet as a whole are `provisioner.api.karpenter`'s. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from provisioner.api import karpenter_providers, labels
from provisioner.api.documents import FieldPath, Problem, YamlDocument, format_path, identify
from provisioner.api.karpenter_providers import KarpenterProvider, NameDerived

DEFAULT_POOL_NAME = "default"
"""The pool name that means something here (`provisioner.scheduling.pool_order`) and nothing in Karpenter."""

# Metadata the API server sets: meaningless in a template, dropped with one warning.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "finalizers",
    "ownerReferences",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Section = Literal["changed", "check"]


@dataclass(frozen=True, slots=True)
class Note:
    """One line of the migration report: what changed meaning, or what a person should check."""

    section: Section
    subject: str
    """`Kind/name`, or empty for the fleet as a whole."""
    text: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.text}" if self.subject else self.text


class ObjectConverter:
    """Converts one document; collects its problems located in the source and its notes."""

    def __init__(
        self, document: YamlDocument, *, instance_types: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.document = document
        self.kind, self.name = identify(document)
        self.problems: list[Problem] = []
        self.notes: list[Note] = []
        self.instance_types = instance_types or {}
        """Catalog name -> its instance type names, for the providers' name-derived labels."""
        self.providers = tuple(karpenter_providers.PROVIDERS)
        self.renames = karpenter_providers.LABEL_MAP
        self.domains = karpenter_providers.domains()

    def note(self, section: Section, text: str) -> None:
        self.notes.append(Note(section, f"{self.kind}/{self.name}", text))

    def problem(self, path: FieldPath, message: str, *, severity: str = "warning") -> None:
        self.problems.append(
            Problem(
                self.document.source,
                self.document.line_of(path),
                message,
                kind=self.kind,
                name=self.name,
                path=format_path(path),
                severity="error" if severity == "error" else "warning",
            )
        )

    def dropped(self, path: FieldPath, why: str) -> None:
        self.problem(path, f"not carried over: {why}")

    def copy(self, src: Any, path: FieldPath, allowed: Iterable[str], *, why: str) -> dict[str, Any]:
        """The allowed keys of a mapping; every other key is dropped with a warning."""
        if not isinstance(src, dict):
            return {}
        allowed = set(allowed)
        out = {}
        for key, value in src.items():
            if key in allowed:
                out[key] = value
            else:
                self.dropped((*path, key), why)
        return out

    # --------------------------------------------------------------------------------------- metadata

    def metadata(self, src: Any) -> dict[str, Any]:
        path: FieldPath = ("metadata",)
        if not isinstance(src, dict):
            return {}
        out: dict[str, Any] = {}
        for key, value in src.items():
            if key == "name":
                out["name"] = value
            elif key in ("labels", "annotations") and isinstance(value, dict):
                mapped = self.label_map(value, (*path, key), annotations=key == "annotations")
                if mapped:
                    out[key] = mapped
            elif key in _SERVER_METADATA:
                self.dropped((*path, key), "server-set metadata")
            elif key == "namespace":
                self.dropped((*path, key), "NodePools and NodeClasses are cluster-scoped")
            else:
                self.dropped((*path, key), "not a field a template sets")
        return out

    def label_map(self, src: dict[str, Any], path: FieldPath, *, annotations: bool = False) -> dict[str, Any]:
        """Labels or annotations with Karpenter's keys renamed to ours; other Karpenter keys dropped."""
        out = {}
        for key, value in src.items():
            if annotations and key == _LAST_APPLIED:
                self.dropped((*path, key), "kubectl's record of the last apply")
            elif key in self.renames:
                out[self.renames[key]] = value
            elif key.startswith(self.domains):
                self.dropped((*path, key), "a Karpenter key with no equivalent here")
            else:
                out[key] = value
        return out

    def status(self, data: dict[str, Any]) -> None:
        if "status" in data:
            self.dropped(("status",), "status is written by the controller")

    # -------------------------------------------------------------------------------------- NodePool

    def nodepool(self, data: dict[str, Any]) -> dict[str, Any] | None:
        self.copy(data, (), ("apiVersion", "kind", "metadata", "spec", "status"), why="not a NodePool field")
        self.status(data)
        spec_src: dict[str, Any] = data["spec"] if isinstance(data.get("spec"), dict) else {}
        spec = self.copy(
            spec_src,
            ("spec",),
            ("template", "disruption", "limits", "weight"),
            why="a Karpenter-only field (static replicas and newer fields are not supported)",
        )
        if "disruption" in spec:
            spec["disruption"] = self.copy(
                spec["disruption"],
                ("spec", "disruption"),
                ("consolidationPolicy", "consolidateAfter", "budgets"),
                why="not a disruption field here",
            )
            if spec["disruption"].get("consolidationPolicy") == "WhenUnderutilized":
                # v1beta1 spelling, which some v1 manifests still carry.
                spec["disruption"]["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
                self.problem(
                    ("spec", "disruption", "consolidationPolicy"),
                    "WhenUnderutilized (v1beta1) written as WhenEmptyOrUnderutilized",
                )
        template_src: dict[str, Any] = spec["template"] if isinstance(spec.get("template"), dict) else {}
        template: dict[str, Any] = {}
        tpath: FieldPath = ("spec", "template")
        for key, value in template_src.items():
            if key == "metadata" and isinstance(value, dict):
                meta = self.copy(
                    value, (*tpath, "metadata"), ("labels", "annotations"), why="not a field here"
                )
                for sub in ("labels", "annotations"):
                    if isinstance(meta.get(sub), dict):
                        meta[sub] = self.label_map(
                            meta[sub], (*tpath, "metadata", sub), annotations=sub == "annotations"
                        )
                template["metadata"] = meta
            elif key == "spec":
                template_spec = self.template_spec(value, (*tpath, "spec"))
                if template_spec is None:
                    return None
                template["spec"] = template_spec
            else:
                self.dropped((*tpath, key), "not a NodeClaim template field")
        if "template" in spec:
            spec["template"] = template
        if spec.get("weight") == 0:
            del spec["weight"]
            self.note("changed", "weight 0 written as no weight (the same rank: tried after weighted pools)")
        metadata = self.metadata(data.get("metadata"))
        if metadata.get("name") == DEFAULT_POOL_NAME:
            metadata.setdefault("annotations", {})[labels.DEFAULT_POOL] = "false"
            self.note(
                "changed",
                f"a pool named {DEFAULT_POOL_NAME!r} here takes every pod that names no pool list; annotated "
                f'{labels.DEFAULT_POOL}: "false" so pods try every pool by weight, as under Karpenter',
            )
        return {"apiVersion": labels.API_VERSION, "kind": "NodePool", "metadata": metadata, "spec": spec}

    def template_spec(self, src: Any, path: FieldPath) -> dict[str, Any] | None:
        spec = self.copy(
            src,
            path,
            (
                "nodeClassRef",
                "requirements",
                "taints",
                "startupTaints",
                "expireAfter",
                "terminationGracePeriod",
            ),
            why="kubelet and other Karpenter-only settings are not supported here; set kubelet flags in "
            "the NodeClass userData",
        )
        ref = spec.get("nodeClassRef")
        if isinstance(ref, dict):
            group, kind = ref.get("group"), ref.get("kind")
            for provider in self.providers:
                if group == provider.api_version:
                    # Karpenter's own Windows example spells the group with its version.
                    group = provider.group
            into = [p.into for p in self.providers if group == p.group and kind == p.nodeclass]
            if into:
                spec["nodeClassRef"] = {"group": labels.GROUP, "kind": into[0], "name": ref.get("name")}
            elif group == labels.GROUP:
                pass
            else:
                known = " or ".join(f"{p.group}/{p.nodeclass} becomes {p.into}" for p in self.providers)
                self.problem(
                    (*path, "nodeClassRef"),
                    f"cannot convert a nodeClassRef to {group}/{kind}: only {known}",
                    severity="error",
                )
                return None
        requirements = []
        name_derived: dict[NameDerived, list[tuple[int, dict[str, Any]]]] = {}
        for i, req in enumerate(spec.get("requirements") or []):
            reader = self._name_deriving(req)
            if reader is not None:
                name_derived.setdefault(reader, []).append((i, req))
                continue
            converted = self.requirement(req, (*path, "requirements", i))
            if converted is not None:
                requirements.append(converted)
        for reader, reqs in name_derived.items():
            rewritten = self.name_derived(reader, reqs, (*path, "requirements"))
            if rewritten is not None:
                requirements.append(rewritten)
        if "requirements" in spec:
            spec["requirements"] = requirements
        if any(
            isinstance(r, dict) and r.get("key") == labels.OS and "windows" in (r.get("values") or [])
            for r in requirements
        ):
            self.note(
                "changed",
                "Windows nodes are not launched here (every instance type is labelled kubernetes.io/os=linux): "
                "this pool takes no pod until you run Windows workloads another way",
            )
        for taints in ("taints", "startupTaints"):
            for i, taint in enumerate(spec.get(taints) or []):
                if isinstance(taint, dict) and taint.get("key") in self.renames:
                    self.problem((*path, taints, i, "key"), f"{taint['key']} renamed")
                    taint["key"] = self.renames[taint["key"]]
        return spec

    def _name_deriving(self, req: object) -> NameDerived | None:
        """The provider's reading of type names whose label `req` is on, if any."""
        if isinstance(req, dict):
            for provider in self.providers:
                if provider.name_derived is not None and req.get("key") in provider.name_derived.keys:
                    return provider.name_derived
        return None

    def name_derived(
        self, derived: NameDerived, reqs: list[tuple[int, dict[str, Any]]], path: FieldPath
    ) -> dict[str, Any] | None:
        """A provider's requirements on labels read off type names (EC2's category, generation, size) as
        one list of families or types."""
        types = self.instance_types.get(derived.catalog)
        shown = " and ".join(
            f"{str(r.get('key')).rpartition('/')[2]} {r.get('operator')} {_values(r.get('values'))}".rstrip()
            for _, r in reqs
        )
        found = derived.rewrite([r for _, r in reqs], types) if types else None
        if found is None or found.requirement is None:
            why = found.described if found is not None else "no catalog to read the instance types from"
            for i, req in reqs:
                hint = karpenter_providers.HINTS.get(str(req.get("key")), "no equivalent label here")
                self.dropped(
                    (*path, i, "key"),
                    f"requirement on {req.get('key')} dropped ({why}), so the pool admits more instance "
                    f"types than before ({hint})",
                )
            return None
        self.note("changed", f"{shown} written as {found.described}; {derived.caveat}")
        for i, req in reqs:
            if "minValues" in req:
                self.problem(
                    (*path, i, "minValues"),
                    f"not carried over: minValues {req['minValues']} on {req.get('key')} has no equivalent "
                    f"(put minValues on {found.requirement['key']} instead)",
                )
        return dict(found.requirement)

    def requirement(self, given: object, path: FieldPath) -> object | None:
        if not isinstance(given, dict):
            return given  # validation of the result reports it
        req = self.copy(
            given, path, ("key", "operator", "values", "minValues"), why="not a requirement field"
        )
        key = req.get("key")
        if not isinstance(key, str):
            return req
        if key in self.renames:
            req["key"] = self.renames[key]
            values = req.get("values")
            if req["key"] == labels.GPU_NAME and isinstance(values, list):
                lowered = [v.lower() if isinstance(v, str) else v for v in values]
                if lowered != values:
                    # GPU names are lowercase here on every cloud; an uppercase value would match nothing.
                    self.problem((*path, "values"), f"GPU names lowercased: {values} -> {lowered}")
                    req["values"] = lowered
            return req
        if key.startswith(self.domains):
            hint = karpenter_providers.HINTS.get(key, "no equivalent label here")
            self.dropped(
                (*path, "key"),
                f"requirement on {key} dropped, so the pool admits more instance types than before ({hint})",
            )
            return None
        return req

    # ------------------------------------------------------------------------------------- NodeClass

    def nodeclass(self, data: dict[str, Any], provider: KarpenterProvider) -> dict[str, Any]:
        """A provider's NodeClass as our plug-in's, its spec converted by the plug-in."""
        spec = provider.convert(self, data)
        return {
            "apiVersion": labels.API_VERSION,
            "kind": provider.into,
            "metadata": self.metadata(data.get("metadata")),
            "spec": spec,
        }


def _values(values: object) -> str:
    return f"[{', '.join(map(str, values))}]" if isinstance(values, list) else ""
