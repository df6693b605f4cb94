"""Karpenter's cloud providers, as `templates import-karpenter` learns them from our provider plug-ins.

Karpenter itself (`karpenter.sh`: NodePools, its labels) is the core's to convert; what Karpenter's
provider for a cloud adds (`karpenter.k8s.aws`: the EC2NodeClass, its well-known labels, labels read off
instance type names) is declared by our plug-in for that cloud (`ProviderPlugin.karpenter`, a
`KarpenterProvider`), so the import names no cloud. Owns that declaration, what a plug-in's conversion
may use of the converter (`Converting`), and the tables over every installed plug-in's declaration:
Karpenter's labels and ours (`label_map`), its key prefixes (`domains`), its API versions
(`api_versions`). Pure; reads the installed plug-ins (provisioner.api.plugins) on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from provisioner.api import labels, plugins
from provisioner.api.yamldoc import FieldPath

NODEPOOL_API_VERSION = "karpenter.sh/v1"
KARPENTER_DOMAIN = "karpenter.sh/"

# Karpenter's own keys and the ones they become here.
_CORE_LABELS = {
    "karpenter.sh/nodepool": labels.NODEPOOL,
    "karpenter.sh/capacity-type": labels.CAPACITY_TYPE,
    "karpenter.sh/do-not-disrupt": labels.DO_NOT_DISRUPT,
    "karpenter.sh/disrupted": labels.DISRUPTED_TAINT,
}


class Converting(Protocol):
    """What a plug-in's NodeClass conversion uses of the object converter
    (provisioner.api.karpenter_objects.ObjectConverter): keep allowed keys, drop the rest with a warning
    located at its line, drop status."""

    def copy(self, src: Any, path: FieldPath, allowed: Iterable[str], *, why: str) -> dict[str, Any]: ...

    def dropped(self, path: FieldPath, why: str) -> None: ...

    def status(self, data: dict[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class Rewrite:
    """The requirement that replaces a pool's name-derived requirements, or why none can."""

    requirement: dict[str, object] | None
    """`{key, operator: In, values}` on our labels (e.g. instance-family or instance-type)."""
    described: str
    """What was selected, in words for the migration report (or why nothing was)."""


@dataclass(frozen=True)
class NameDerived:
    """Karpenter labels read off instance type names (EC2's category, generation, size), which have no
    label here: a pool's requirements on them become one list of what they select in a catalog."""

    keys: tuple[str, ...]
    """The Karpenter keys it rewrites."""
    catalog: str
    """The built-in catalog whose instance type names they are read against."""
    rewrite: Callable[[Sequence[dict[str, object]], Iterable[str]], Rewrite]
    """The requirements (ANDed, as Karpenter does) and the catalog's type names -> one requirement."""
    caveat: str
    """What the rewrite cannot promise, for the report (types the cloud adds later)."""


@dataclass(frozen=True, eq=False)
class KarpenterProvider:
    """Karpenter's provider for a plug-in's cloud, as the import converts what it adds to Karpenter."""

    api_version: str
    """Its NodeClass's apiVersion in Karpenter v1: `karpenter.k8s.aws/v1`."""
    nodeclass: str
    """Its NodeClass kind: `EC2NodeClass`."""
    into: str
    """Our NodeClass kind it becomes (the plug-in's own): `AWSNodeClass`."""
    convert: Callable[[Converting, dict[str, Any]], dict[str, Any]]
    """One NodeClass object (a mapping) -> our spec; fields that cannot be carried over dropped with the
    converter's warnings (the core converts metadata and writes apiVersion and kind)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Its well-known labels -> ours."""
    hints: Mapping[str, str] = field(default_factory=dict)
    """Its labels with no equivalent here -> what to narrow with instead (for the warning)."""
    name_derived: NameDerived | None = None
    shown: tuple[str, str] | None = None
    """How the report sums up its labels for pods that select them: (`karpenter.k8s.aws/instance-*`,
    `provisioner.sh/instance-* and gpu-*`)."""
    notes: tuple[str, ...] = ()
    """What to check about any converted fleet (the migration report's "To check")."""

    @property
    def group(self) -> str:
        """`karpenter.k8s.aws`."""
        return self.api_version.partition("/")[0]


def _declared(found: tuple[plugins.Declares, ...]) -> tuple[KarpenterProvider, ...]:
    out = []
    for plugin in found:
        declared = getattr(plugin, "karpenter", None)
        if declared is not None:
            if not isinstance(declared, KarpenterProvider):
                raise plugins.PluginError(
                    f"provider plug-in {plugin.name!r}: karpenter is not a KarpenterProvider"
                )
            out.append(declared)
    return tuple(out)


PROVIDERS: plugins.DerivedTuple[KarpenterProvider] = plugins.DerivedTuple(_declared)
"""Every installed plug-in's Karpenter provider, in the plug-ins' name order."""

LABEL_MAP: plugins.Derived[str] = plugins.Derived(
    lambda found: {**_CORE_LABELS, **{k: v for p in _declared(found) for k, v in p.labels.items()}}
)
"""Karpenter's keys (its own and its providers') -> ours."""

HINTS: plugins.Derived[str] = plugins.Derived(
    lambda found: {k: v for p in _declared(found) for k, v in p.hints.items()}
)
"""Karpenter provider keys with no label here -> what to use instead."""

API_VERSIONS: plugins.Derived[str] = plugins.Derived(
    lambda found: {
        NODEPOOL_API_VERSION: "NodePool",
        "karpenter.sh/v1beta1": "NodePool",
        **{v: p.nodeclass for p in _declared(found) for v in (p.api_version, f"{p.group}/v1beta1")},
    }
)
"""Karpenter's apiVersions (v1 and v1beta1) -> the kind written in them."""


def domains() -> tuple[str, ...]:
    """The key prefixes of Karpenter and its providers: `karpenter.sh/`, `karpenter.k8s.aws/`."""
    return (KARPENTER_DOMAIN, *(f"{p.group}/" for p in PROVIDERS))


def label_map_shown() -> list[tuple[str, str]]:
    """The renames the report shows for pods that select Karpenter's labels."""
    core = [(k, v) for k, v in _CORE_LABELS.items() if k != "karpenter.sh/disrupted"]
    return core + [p.shown for p in PROVIDERS if p.shown is not None]
