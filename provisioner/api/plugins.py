"""The provider plug-ins installed, as the API sees them.

Owns the reading of the entry-point group `provisioner.providers` (a package's `pyproject.toml` line
`[project.entry-points."provisioner.providers"] NAME = "package.module:PLUGIN"`), done once with
`importlib.metadata` and in the plug-ins' name order, and what every room must read of a plug-in from the
bottom of the house: the NodeClass kinds it brings (each a `Kind`: model, names and `kubectl get`
columns of its CRD), the catalog files it ships (`CatalogFile`) and the name its bills carry (FOCUS
ProviderName, by providerID scheme). The whole plug-in (options, how to
build its CloudProvider, chart pieces) is `provisioner.cloudprovider.plugin.ProviderPlugin`;
`provisioner.cloudprovider.registry` reads it.

The core names no cloud: the kinds and catalogs here are whatever the installed plug-ins declare. Reads
package metadata only; never the clock, the environment or the network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

GROUP = "provisioner.providers"
"""The entry-point group a provider plug-in registers itself in."""


class PluginError(RuntimeError):
    """No plug-in installed, or an entry point that does not load a plug-in; the message says which."""


@dataclass(frozen=True)
class PrinterColumn:
    """One column of `kubectl get`."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.priority:
            out["priority"] = self.priority
        if self.description:
            out["description"] = self.description
        return out


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", type="date")
"""The `Age` column every kind shows."""


@dataclass(frozen=True)
class Kind:
    """What a CRD needs beyond the schema: names, scope and columns."""

    model: type[BaseModel]
    kind: str
    plural: str
    short_names: tuple[str, ...]
    columns: tuple[PrinterColumn, ...]


@dataclass(frozen=True)
class CatalogFile:
    """A built-in catalog a plug-in ships as package data: `package`'s file `file`, whose types launch
    pools of the NodeClass kinds `kinds`."""

    package: str
    file: str
    kinds: tuple[str, ...]


class Declares(Protocol):
    """What the API reads of a plug-in (a `ProviderPlugin` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def nodeclasses(self) -> Sequence[Kind]: ...

    @property
    def catalogs(self) -> Mapping[str, CatalogFile]: ...

    @property
    def billing_names(self) -> Mapping[str, str]: ...


@functools.cache
def installed() -> tuple[Declares, ...]:
    """Every installed plug-in, in name order. Raises PluginError when none is (the package's metadata
    is missing: reinstall it) or when an entry point loads something else."""
    points: dict[str, metadata.EntryPoint] = {}
    for point in metadata.entry_points(group=GROUP):
        seen = points.get(point.name)
        if seen is not None and seen.value != point.value:
            raise PluginError(
                f"entry point {GROUP}:{point.name} is registered twice ({seen.value}, {point.value})"
            )
        points[point.name] = point
    if not points:
        raise PluginError(
            f"no provider plug-in is installed (the entry-point group {GROUP} is empty): reinstall the "
            "package (scripts/setup, or pip install -e .)"
        )
    out: list[Declares] = []
    for name in sorted(points):
        plugin = points[name].load()
        if getattr(plugin, "name", None) != name or not hasattr(plugin, "nodeclasses"):
            raise PluginError(
                f"entry point {GROUP}:{name} = {points[name].value} does not load a provider plug-in "
                f"named {name!r}"
            )
        out.append(plugin)
    return tuple(out)


def refresh() -> None:
    """Read the entry points again (after a package was installed into the running interpreter)."""
    installed.cache_clear()


V = TypeVar("V")


class Derived(Mapping[str, V]):
    """A read-only mapping computed from the installed plug-ins on first use, and again after `refresh`.
    Module-level tables (the known kinds) are built this way, so importing the API loads no plug-in."""

    def __init__(self, build: Callable[[tuple[Declares, ...]], Mapping[str, V]]) -> None:
        self._build = build
        self._source: tuple[Declares, ...] | None = None
        self._table: Mapping[str, V] = {}

    def _current(self) -> Mapping[str, V]:
        source = installed()
        if source is not self._source:
            self._table = dict(self._build(source))
            self._source = source
        return self._table

    def __getitem__(self, key: str) -> V:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __contains__(self, key: object) -> bool:
        return key in self._current()

    def __repr__(self) -> str:
        return f"Derived({dict(self._current())!r})"


class DerivedTuple(Sequence[V]):
    """A read-only sequence computed from the installed plug-ins on first use, as `Derived` is."""

    def __init__(self, build: Callable[[tuple[Declares, ...]], Sequence[V]]) -> None:
        self._build = build
        self._source: tuple[Declares, ...] | None = None
        self._items: tuple[V, ...] = ()

    def _current(self) -> tuple[V, ...]:
        source = installed()
        if source is not self._source:
            self._items = tuple(self._build(source))
            self._source = source
        return self._items

    def __getitem__(self, index: Any) -> Any:
        return self._current()[index]

    def __len__(self) -> int:
        return len(self._current())

    def __iter__(self) -> Iterator[V]:
        return iter(self._current())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DerivedTuple):
            return self._current() == other._current()
        return self._current() == other

    def __hash__(self) -> int:
        return hash(self._current())

    def __repr__(self) -> str:
        return f"DerivedTuple({self._current()!r})"


NODECLASS_CRDS: Derived[Kind] = Derived(lambda found: {k.kind: k for p in found for k in p.nodeclasses})
"""NodeClass kind -> its CRD description, over every installed plug-in."""

BILLING_NAMES: Derived[str] = Derived(lambda found: {k: v for p in found for k, v in p.billing_names.items()})
"""providerID scheme (`aws`, `gce`...) -> the FOCUS ProviderName of its cloud, over every installed plug-in."""

CATALOG_FILES: Derived[CatalogFile] = Derived(
    lambda found: {n: f for p in found for n, f in p.catalogs.items()}
)
"""Catalog name -> the file a plug-in ships it in."""
