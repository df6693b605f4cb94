"""Which built-in catalogs a scenario launches from: one per NodeClass kind (each installed plug-in's
catalog serves its kinds: aws for AWSNodeClass pools, gcp for GCPNodeClass pools; karpenter-benchmark
serves any), each read in its own region, so pools of several clouds run together in one scenario as they
do under one controller (`--cloud aws,gcp`).

Owns the choice (`spec.catalogs`, else `spec.catalog`, else one per kind the pools use), the checks of
stockout selectors against the chosen catalogs, and the zones of a catalog a NodeClass launches in (with
the NodeClass a pool gets when the scenario writes none). Reading the scenario file is `scenario`'s job;
problems are returned as (message, field path) for it to locate.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provisioner.api.nodeclass import NODECLASS_MODELS, NodeClass
from provisioner.api.plugins import CATALOG_FILES
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import InstanceType

if TYPE_CHECKING:
    from provisioner.sim.scenario_spec import Unavailable

FieldPath = tuple[str | int, ...]
Found = list[tuple[str, FieldPath]]


def served_kinds(name: str) -> tuple[str, ...]:
    """The NodeClass kinds a catalog launches pools of: its plug-in's (karpenter-benchmark: every kind)."""
    if name == catalog.BENCHMARK:
        return tuple(NODECLASS_MODELS)
    return CATALOG_FILES[name].kinds


def catalog_for(kind: str) -> str:
    """The catalog that serves pools of `kind`: its plug-in's, else karpenter-benchmark."""
    return next((name for name, f in CATALOG_FILES.items() if kind in f.kinds), catalog.BENCHMARK)


@dataclass
class CatalogUse:
    """One catalog a scenario launches from, read in its region, with the stockouts applied."""

    name: str
    region: str
    kinds: tuple[str, ...]
    """NodeClass kinds it serves: `AWSNodeClass` (aws), `GCPNodeClass` (gcp), all (karpenter-benchmark)."""
    zones: list[str]
    types: list[InstanceType]


def choose(
    *,
    single: str | None,
    region: str | None,
    listed: Sequence[tuple[str, str | None]],
    pool_kinds: Collection[str],
    nodeclasses: Mapping[tuple[str, str], NodeClass],
) -> tuple[list[CatalogUse], Found]:
    """The catalogs to read, and the problems: `listed` (`spec.catalogs` as (name, region)), else
    `single` (`spec.catalog`) in `region`, else one per NodeClass kind in `pool_kinds` (the first
    plug-in's catalog, aws, when none)."""
    refs: list[tuple[str, str | None, FieldPath]]
    if listed:
        if single is not None or region is not None:
            return [], [
                (
                    "give either spec.catalog (and spec.region) or spec.catalogs, not both",
                    ("spec", "catalogs"),
                )
            ]
        refs = [(name, reg, ("spec", "catalogs", i)) for i, (name, reg) in enumerate(listed)]
    elif single is not None:
        refs = [(single, region, ("spec",))]
    else:
        kinds = set(pool_kinds) or set(next(iter(CATALOG_FILES.values())).kinds)
        names = [c for c, f in CATALOG_FILES.items() if kinds & set(f.kinds)]
        if region is not None and len(names) > 1:
            message = (
                f"spec.region applies to one catalog, but the pools need {' and '.join(names)}: "
                "give spec.catalogs with a region each"
            )
            return [], [(message, ("spec", "region"))]
        refs = [(name, region, ("spec",)) for name in names]
    return _read(refs, nodeclasses)


def _read(
    refs: Sequence[tuple[str, str | None, FieldPath]], nodeclasses: Mapping[tuple[str, str], NodeClass]
) -> tuple[list[CatalogUse], Found]:
    uses: list[CatalogUse] = []
    found: Found = []
    served: dict[str, str] = {}
    for name, given, path in refs:
        kinds = served_kinds(name)
        clash = next((k for k in kinds if k in served), None)
        if clash is not None:
            found.append(
                (
                    f"{clash} pools are already served by the {served[clash]} catalog; one catalog per kind",
                    path,
                )
            )
            continue
        served.update(dict.fromkeys(kinds, name))
        region = given or _nodeclass_region(name, nodeclasses) or catalog.default_region(name)
        allowed = catalog.regions(name)
        if region not in allowed:
            found.append(
                (
                    f"region {region!r} is not in the {name} catalog; allowed: {', '.join(allowed)}",
                    (*path, "region"),
                )
            )
            continue
        uses.append(
            CatalogUse(
                name=name,
                region=region,
                kinds=kinds,
                zones=catalog.zones(name, region),
                types=catalog.load(name, region),
            )
        )
    return uses, found


def _nodeclass_region(name: str, nodeclasses: Mapping[tuple[str, str], NodeClass]) -> str | None:
    """The region the scenario's NodeClasses of the kinds a plug-in's catalog serves all name (GCPNodeClass
    `spec.region`); None when they name none or differ (then the catalog's default region, or
    spec.catalogs, decides), and for karpenter-benchmark."""
    if name == catalog.BENCHMARK:
        return None
    kinds = served_kinds(name)
    found = {r for nc in nodeclasses.values() if nc.kind in kinds and (r := nc.named_region()) is not None}
    return found.pop() if len(found) == 1 else None


def unavailable_problems(
    selectors: Sequence[Unavailable], uses: Sequence[CatalogUse], base: FieldPath
) -> Found:
    """(message, field path) for each stockout naming a type or a zone no catalog of the scenario has."""
    known = {t.name for use in uses for t in use.types}
    zones = [z for use in uses for z in use.zones]
    names = " + ".join(use.name for use in uses)
    regions = ", ".join(use.region for use in uses)
    found: Found = []
    for i, sel in enumerate(selectors):
        if sel.instance_type is not None and sel.instance_type not in known:
            found.append(
                (
                    f"instance type {sel.instance_type!r} is not in the {names} catalog",
                    (*base, i, "instanceType"),
                )
            )
        if sel.zone is not None and sel.zone not in zones:
            found.append(
                (
                    f"zone {sel.zone!r} is not in region {regions}; allowed: {', '.join(zones)}",
                    (*base, i, "zone"),
                )
            )
    return found


def default_nodeclass(kind: str, name: str, zones: Sequence[str]) -> NodeClass:
    """What a pool gets when its nodeClassRef names no document: every zone of the region (its plug-in's
    model says how: `NodeClass.simulated`)."""
    return NODECLASS_MODELS[kind].simulated(name, zones)


def nodeclass_zones(nc: NodeClass, zones: Sequence[str]) -> list[str]:
    """The zones of `zones` the NodeClass launches in (`NodeClass.launch_zones`)."""
    return nc.launch_zones(zones)


def types_for(nc: NodeClass, types: Sequence[InstanceType], zones: Sequence[str]) -> list[InstanceType]:
    """The catalog's types with only the offerings in the NodeClass's zones."""
    allowed = set(nodeclass_zones(nc, zones))
    if allowed == set(zones):
        return list(types)
    return [t.with_offerings(tuple(o for o in t.offerings if o.zone in allowed)) for t in types]
