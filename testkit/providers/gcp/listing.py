"""The Compute stand-in's read side: zones, machine types and accelerator types as the catalog
describes them, list paging (`maxResults`, `pageToken`, the stand-in's page size cap), aggregated lists
regrouped by `zones/ZONE` scope, and the subset of Compute's list filter language the provider uses.
"""

from __future__ import annotations

import re
from typing import Any

from testkit.providers.gcp.state import API, ApiError, State

_FILTER_TERM = re.compile(r'\(?\s*([\w.\-]+)\s*(=|!=|eq|ne)\s*(?:"([^"]*)"|([^\s)]+))\s*\)?')


def _zones(st: State) -> list[dict[str, Any]]:
    return [
        {
            "kind": "compute#zone",
            "name": z,
            "region": f"{API}/projects/{st.catalog.project}/regions/{r}",
            "status": "UP",
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{z}",
        }
        for z, r in sorted(st.catalog.zones.items())
    ]


def _machine_types(st: State, zone: str) -> list[dict[str, Any]]:
    out = []
    for spec in st.catalog.machines:
        if zone not in spec.zones:
            continue
        mt: dict[str, Any] = {
            "kind": "compute#machineType",
            "id": str(abs(hash(spec.name)) % 10**12),
            "name": spec.name,
            "description": f"{spec.cpus} vCPUs, {spec.memory_mb / 1024:g} GB RAM",
            "guestCpus": spec.cpus,
            "memoryMb": spec.memory_mb,
            "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168",
            "zone": zone,
            "isSharedCpu": spec.shared_cpu,
            "architecture": spec.architecture,
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{zone}/machineTypes/{spec.name}",
        }
        if spec.accelerators:
            mt["accelerators"] = [
                {"guestAcceleratorType": t, "guestAcceleratorCount": c} for t, c in spec.accelerators
            ]
        out.append(mt)
    return out


def _accelerator_types(st: State, zone: str) -> list[dict[str, Any]]:
    return [
        {
            "kind": "compute#acceleratorType",
            "id": str(abs(hash(a.name)) % 10**12),
            "name": a.name,
            "description": a.description,
            "maximumCardsPerInstance": a.max_cards,
            "zone": f"{API}/projects/{st.catalog.project}/zones/{zone}",
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{zone}/acceleratorTypes/{a.name}",
        }
        for a in st.catalog.accelerators
        if zone in a.zones
    ]


def _aggregated(st: State, collection: str, query: dict[str, str]) -> dict[str, Any]:
    """Aggregated lists page over the flattened items and regroup each page by `zones/ZONE` scope."""
    makers = {
        "machineTypes": ("machineTypes", "compute#machineTypeAggregatedList", _machine_types),
        "acceleratorTypes": ("acceleratorTypes", "compute#acceleratorTypeAggregatedList", _accelerator_types),
        "instances": ("instances", "compute#instanceAggregatedList", _zone_instances),
    }
    if collection == "instances" and st.stale_aggregated:
        makers["instances"] = ("instances", "compute#instanceAggregatedList", lambda st, zone: [])
    if collection not in makers:
        raise ApiError(404, f"aggregated/{collection} is not served by the stand-in", "notFound")
    key, kind, make = makers[collection]
    flat = [(z, item) for z in sorted(st.catalog.zones) for item in make(st, z)]
    flat = [(z, item) for z, item in flat if _matches(item, query.get("filter", ""))]
    start, end, token = _window(st, len(flat), query)
    items: dict[str, Any] = {}
    for z, item in flat[start:end]:
        items.setdefault(f"zones/{z}", {key: []})[key].append(item)
    out: dict[str, Any] = {"kind": kind, "id": f"projects/{st.catalog.project}/aggregated/{collection}"}
    out["items"] = items
    if token:
        out["nextPageToken"] = token
    return out


def _page(st: State, kind: str, items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
    items = [i for i in items if _matches(i, query.get("filter", ""))]
    start, end, token = _window(st, len(items), query)
    out: dict[str, Any] = {"kind": kind, "items": items[start:end]}
    if token:
        out["nextPageToken"] = token
    return out


def _window(st: State, total: int, query: dict[str, str]) -> tuple[int, int, str | None]:
    size = min(int(query.get("maxResults") or 500), st.max_page_size)
    try:
        start = int(query.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "Invalid value for field 'pageToken'", "invalid") from None
    end = start + size
    return start, end, (str(end) if end < total else None)


def _matches(item: dict[str, Any], expression: str) -> bool:
    """The subset of Compute's filter language the provider uses: `field = "v"`, `field != v`,
    `labels.KEY = "v"`, terms joined by AND or spaces, each optionally in parentheses."""
    expression = expression.strip()
    if not expression:
        return True
    terms = _FILTER_TERM.findall(re.sub(r"\bAND\b", " ", expression))
    if not terms:
        raise ApiError(400, f"Invalid list filter expression '{expression}'.", "invalid")
    for path, op, quoted, bare in terms:
        want = quoted if quoted else bare
        value: Any = item
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        got = "" if value is None else str(value)
        if isinstance(value, bool):
            got = str(value).lower()
        equal = got == want or (want.endswith("*") and got.startswith(want[:-1]))
        if (op in ("=", "eq")) != equal:
            return False
    return True


def _zone_instances(st: State, zone: str) -> list[dict[str, Any]]:
    return [i for (z, _), i in sorted(st.instances.items()) if z == zone]
