"""Gangs in `provisioner simulate`: the capacity a scenario says offerings have left (`spec.capacity`),
and each gang as the output shows it (members, state, zone, placement, reason; `gangs` in the JSON and a
table), for the static solve and for a timeline run.

What the solver decides for a gang is `provisioner.scheduling.gangs`'; this only reads and reports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from provisioner.api import labels as wk
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import Results
from provisioner.scheduling.gangs import membership
from provisioner.sim.scenario_spec import CapacitySpec
from provisioner.state import ClusterState


def capacity_of(
    specs: Sequence[CapacitySpec], types: Iterable[InstanceType]
) -> dict[OfferingKey, int] | None:
    """Offering -> instances it has left, for each offering some `spec.capacity` entry selects (the last
    one matching wins); None when there is none."""
    if not specs:
        return None
    out: dict[OfferingKey, int] = {}
    for t in types:
        for o in t.offerings:
            for spec in specs:
                if spec.matches(t.name, o):
                    out[o.offering_key(t.name)] = spec.count
    return out


def static_gangs(results: Results) -> list[dict[str, Any]]:
    """Each gang of a static solve: what the solver decided, and what launching its members one at a time
    would have paid for the ones that could start when the gang cannot (`avoidedPerHour`)."""
    out = []
    for g in results.gangs:
        out.append(
            {
                "name": g.name,
                "members": list(g.members),
                "total": g.total,
                "running": g.running,
                "state": g.state,
                "zone": g.zone,
                "nodePool": g.nodepool,
                "newNodes": g.new_nodes,
                "fitting": g.fitting,
                "reason": g.reason,
                "avoidedPerHour": round(g.avoided_per_hour, 6),
            }
        )
    return out


def timeline_gangs(
    state: ClusterState, results: Results | None, placement: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Each gang at the end of a run: its members and where they run, and, for a gang not running whole,
    the last solve's state and reason. `placement`: node name -> the placement group it launched in."""
    outcomes = {g.name: g for g in (results.gangs if results is not None else ())}
    members: dict[str, list[Any]] = {}
    totals: dict[str, int] = {}
    for pod in state.pods.values():
        m = membership(pod)
        if m is None or pod.is_terminal:
            continue
        members.setdefault(m[0], []).append(pod)
        totals[m[0]] = max(totals.get(m[0], 0), m[1])
    nodes = state.nodes
    out = []
    for name in sorted(members):
        pods = sorted(members[name], key=lambda p: p.key)
        bound = [p for p in pods if p.node_name]
        zones = sorted(
            {z for p in bound if (n := nodes.get(p.node_name or "")) and (z := n.labels.get(wk.ZONE))}
        )
        groups = sorted({placement[p.node_name] for p in bound if p.node_name in placement})
        total = totals[name] or len(pods)
        outcome = outcomes.get(name)
        if len(bound) == total:
            state_, reason = "Running", ""
        elif outcome is not None and outcome.state != "Placed":
            state_, reason = outcome.state, outcome.reason
        else:
            state_, reason = "Launching", ""
        out.append(
            {
                "name": name,
                "members": [p.key for p in pods],
                "total": total,
                "running": len(bound),
                "state": state_,
                "zone": zones[0] if len(zones) == 1 else (zones or None),
                "nodes": sorted({p.node_name for p in bound if p.node_name}),
                "placement": groups[0] if len(groups) == 1 else (groups or None),
                "reason": reason,
            }
        )
    return out


def table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The gangs as a table for people: one row each, members, state, zone, placement and why."""
    out = Table(title=f"Gangs: {len(rows)}", title_justify="left", show_lines=True)
    for col in ("Gang", "Members", "State", "Zone", "Placement", "Why"):
        out.add_column(col)
    for g in rows:
        zone = g.get("zone")
        placement = g.get("placement") or g.get("nodePool") or "-"
        fit = f"{g['running']}/{g['total']} running" if "nodes" in g else f"{g['fitting']}/{g['total']} fit"
        why = g.get("reason") or ""
        if g.get("avoidedPerHour"):
            why += f" (one at a time would bill ${g['avoidedPerHour']:.2f}/h for members that cannot start)"
        out.add_row(
            escape(g["name"]),
            f"{len(g['members'])} ({fit})",
            g["state"],
            ", ".join(zone) if isinstance(zone, list) else (zone or "-"),
            escape(", ".join(placement) if isinstance(placement, list) else placement),
            escape(why),
        )
    return out
