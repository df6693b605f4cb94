"""Converting Karpenter's objects into ours: `karpenter.sh/v1` NodePool -> `provisioner.sh/v1` NodePool, and
a NodeClass of Karpenter's provider for a cloud (`karpenter.k8s.aws/v1` EC2NodeClass) -> the NodeClass of
our plug-in for that cloud, as the plug-in declares (provisioner.api.karpenter_providers).

Field names already match (that is the point of the API's design); what changes is the group, the
NodeClass kind and the label prefixes (`karpenter_providers.LABEL_MAP`). Everything that cannot be carried
over (kubelet settings, Karpenter-only fields and labels, AMI families we lack, server-set metadata,
status) is dropped with a warning naming the field and its line, never silently.

The fleet must route as it did under Karpenter, where pool names mean nothing and pools are tried by
weight: a pool named `default` is annotated `provisioner.sh/default-pool: "false"` (else it would take
every pod that names no list), a weight of 0 becomes no weight, and requirements on labels a provider
reads off type names (EC2's instance category, generation, size) become the instance families or types
they select in its catalog (`NameDerived`). What changed meaning and what to check goes in the
migration report (`Conversion.notes`). Pure: data in, data and problems out; reading files, the catalog
and writing results is the CLI's business.

This module owns which conversion each document gets (by apiVersion and kind), the result of a set
(`Conversion`) and the notes on the converted fleet as a whole; converting one object, field by field, is
`provisioner.api.karpenter_objects`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.api import karpenter_providers, labels
from provisioner.api.documents import Problem, YamlDocument, expand_lists
from provisioner.api.karpenter_objects import Note, ObjectConverter
from provisioner.api.karpenter_providers import NODEPOOL_API_VERSION


@dataclass
class Conversion:
    """What converting a set of documents gave: our objects (as dicts, in input order) and problems."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    """The migration report: what changed meaning, what to check (dropped fields are `problems`)."""
    converted: int = 0
    """How many Karpenter objects were converted (documents passed through unchanged not counted)."""

    @property
    def ok(self) -> bool:
        return not any(p.is_error for p in self.problems)


InstanceTypes = Mapping[str, Sequence[str]]
"""Catalog name -> its instance type names: what a provider's name-derived requirements are read
against (`NameDerived.catalog`; a catalog not given: they are dropped)."""


def convert_document(
    document: YamlDocument, *, instance_types: InstanceTypes | None = None
) -> tuple[dict[str, Any] | None, list[Problem], bool]:
    """One document: (our object or None, problems, whether it was a Karpenter object converted).

    Our own objects pass through unchanged; anything else is skipped with a warning. `instance_types`:
    see `InstanceTypes`.
    """
    obj, converter, converted = _convert(document, instance_types=instance_types)
    return obj, converter.problems, converted


def _convert(
    document: YamlDocument, *, instance_types: InstanceTypes | None
) -> tuple[dict[str, Any] | None, ObjectConverter, bool]:
    converter = ObjectConverter(document, instance_types=instance_types)
    data = document.data
    if not isinstance(data, dict):
        converter.problem((), "skipped: not a Kubernetes object (expected a mapping)", severity="error")
        return None, converter, False
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version == NODEPOOL_API_VERSION and kind == "NodePool":
        return converter.nodepool(data), converter, True
    providers = converter.providers
    for provider in providers:
        if api_version == provider.api_version and kind == provider.nodeclass:
            return converter.nodeclass(data, provider), converter, True
    if api_version == labels.API_VERSION:
        return data, ObjectConverter(document), False
    if isinstance(api_version, str) and api_version.startswith(converter.domains):
        *others, last = [
            f"{NODEPOOL_API_VERSION} NodePools",
            *(f"{p.api_version} {p.nodeclass}es" for p in providers),
        ]
        supported = f"{', '.join(others)} and {last}" if others else last
        converter.problem(
            ("apiVersion",),
            f"{api_version} {kind} is not supported: convert {supported} (upgrade older objects to Karpenter v1 first)",
            severity="error",
        )
        return None, converter, False
    kinds = " or ".join(["NodePool", *(p.nodeclass for p in providers)])
    converter.problem((), f"skipped: {api_version}/{kind} is not a Karpenter {kinds}")
    return None, converter, False


def convert_documents(
    documents: Iterable[YamlDocument], *, instance_types: InstanceTypes | None = None
) -> Conversion:
    """Every document converted (or passed through / skipped), in order; `kind: List` counts as its items.
    `instance_types`: see `convert_document`."""
    result = Conversion()
    for document in expand_lists(documents):
        obj, converter, converted = _convert(document, instance_types=instance_types)
        result.problems.extend(converter.problems)
        result.notes.extend(converter.notes)
        if obj is not None:
            result.objects.append(obj)
            result.converted += converted
    result.notes.extend(fleet_notes(result.objects) if result.converted else [])
    return result


def fleet_notes(objects: Sequence[dict[str, Any]]) -> list[Note]:
    """What to check about the converted pools as a whole: ties in weight, and what pods must change."""
    notes: list[Note] = []
    by_weight: dict[int, list[str]] = {}
    for obj in objects:
        if obj.get("kind") == "NodePool" and isinstance(obj.get("spec"), dict):
            weight = obj["spec"].get("weight") or 0
            by_weight.setdefault(weight, []).append(str((obj.get("metadata") or {}).get("name")))
    for weight, names in sorted(by_weight.items(), reverse=True):
        if len(names) > 1:
            notes.append(
                Note(
                    "check",
                    "",
                    f"pools {', '.join(sorted(names))} share weight {weight}: here they are tried in name "
                    "order, where Karpenter's order between them is unspecified; give them distinct weights "
                    "if a pod can fit more than one",
                )
            )
    spot_pools = sorted(
        str((obj.get("metadata") or {}).get("name"))
        for obj in objects
        if obj.get("kind") == "NodePool" and _allows_spot(obj)
    )
    if spot_pools:
        notes.append(
            Note(
                "check",
                "",
                f"spot-to-spot consolidation is on here (Karpenter's SpotToSpotConsolidation feature gate is off "
                f"by default): nodes of {', '.join(spot_pools)} may be replaced by cheaper spot nodes when enough "
                "cheaper spot types are offered; set consolidationPolicy: WhenEmpty where that is unwanted",
            )
        )
    notes.append(
        Note(
            "check",
            "",
            "pods that select Karpenter's labels (nodeSelector, affinity, topologySpreadConstraints) or carry "
            "karpenter.sh/do-not-disrupt must use ours: "
            + ", ".join(f"{k} -> {v}" for k, v in karpenter_providers.label_map_shown()),
        )
    )
    notes.extend(
        Note("check", "", text) for provider in karpenter_providers.PROVIDERS for text in provider.notes
    )
    return notes


def _allows_spot(pool: dict[str, Any]) -> bool:
    """Whether the converted pool may launch spot here (a pool silent on capacity type may)."""
    spec = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
    for req in spec.get("requirements") or []:
        if isinstance(req, dict) and req.get("key") == labels.CAPACITY_TYPE and req.get("operator") == "In":
            return labels.CAPACITY_TYPE_SPOT in (req.get("values") or [])
    return True
