"""Gangs in `provisioner simulate`: the capacity a scenario says offerings have left (`spec.capacity`),
and each gang as the output shows it (members, state, zone, placement, reason; `gangs` in the JSON and a
table), for the static solve and for a timeline run.

What the solver decides for a gang is `provisioner.scheduling.gangs`'; this only reads and reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from provisioner.api import labels as wk
from provisioner.api import provisioning_request as pr
from provisioner.api.documents import Problem, YamlDocument, located_problems
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import Results
from provisioner.scheduling.gangs import membership
from provisioner.sim.scenario_spec import CapacitySpec
from provisioner.state import ClusterState
from provisioner.state import provisioning_requests as provreq


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


class RequestDocuments:
    """The ProvisioningRequests and PodTemplates of a scenario, checked as they are read."""

    def __init__(self) -> None:
        self.requests: list[pr.ProvisioningRequest] = []
        self.templates: dict[str, dict[str, Any]] = {}
        self.problems: list[Problem] = []

    def add(self, doc: YamlDocument, kind: str) -> list[tuple[str, tuple[str | int, ...]]]:
        """Read one document; (message, field path) for each problem (a request the model refuses adds
        its located problems to `problems`)."""
        data = doc.data
        if kind == "PodTemplate":
            template = data.get("template")
            spec = template.get("spec") if isinstance(template, dict) else None
            if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
                return [
                    (
                        "template.spec.containers is required (the pods' containers and requests)",
                        ("template",),
                    )
                ]
            meta = data["metadata"]
            self.templates[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = data
            return []
        if data.get("apiVersion") != pr.API_VERSION:
            return [
                (
                    f"apiVersion {data.get('apiVersion')!r} is not known; allowed: {pr.API_VERSION}",
                    ("apiVersion",),
                )
            ]
        try:
            request = pr.ProvisioningRequest.model_validate(data)
        except ValidationError as err:
            name = data["metadata"]["name"]
            self.problems.extend(
                located_problems(
                    err, doc, kind="ProvisioningRequest", name=name, model=pr.ProvisioningRequest
                )
            )
            return []
        if request.spec.provisioning_class_name not in pr.CLASSES:
            allowed = ", ".join(pr.CLASSES)
            return [
                (
                    f"provisioningClassName {request.spec.provisioning_class_name!r} is not served here; allowed: {allowed}",
                    ("spec", "provisioningClassName"),
                )
            ]
        self.requests.append(request)
        return []


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


def booked_pods(loaded: Any) -> list[Any]:
    """The pods of the scenario's atomic ProvisioningRequests, to solve with its pending pods (less the
    scenario's pods consuming each request)."""
    out = []
    for request in loaded.provisioning_requests:
        if request.spec.provisioning_class_name != pr.BEST_EFFORT_ATOMIC_SCALE_UP:
            continue
        taken = provreq.consumers(request, [*loaded.pods, *(p for ps in loaded.bound.values() for p in ps)])
        out.extend(provreq.request_pods(request, loaded.pod_templates, consumed=len(taken)))
    return out


def static_requests(
    loaded: Any, results: Results, check: Callable[[list[Any]], Results]
) -> list[dict[str, Any]]:
    """Each ProvisioningRequest of a static solve with the condition it would get: an atomic request
    `Provisioned` when its gang is placed (its nodes would launch together), a check-capacity request
    `Provisioned` when its pods fit on the scenario's nodes (`check` solves them alone)."""
    gangs = {g.name: g for g in results.gangs}
    out = []
    for request in loaded.provisioning_requests:
        klass = request.spec.provisioning_class_name
        missing = provreq.missing_templates(request, loaded.pod_templates)
        if missing:
            state, reason, message = (
                "Failed",
                "PodTemplateNotFound",
                f"PodTemplate {', '.join(missing)} not found",
            )
        elif klass == pr.BEST_EFFORT_ATOMIC_SCALE_UP:
            g = gangs.get(provreq.gang_name(request))
            if g is None or g.state == "Placed":
                state, reason = "Provisioned", "Provisioned"
                message = (
                    f"{g.new_nodes} new nodes in {g.zone}, launched together" if g else "nothing left to book"
                )
            else:
                state, reason, message = "NotProvisioned", "CapacityIsNotFound", g.reason
        else:
            pods = provreq.request_pods(request, loaded.pod_templates)
            alone = check(pods)
            if not alone.new_claims and not alone.unschedulable:
                state, reason, message = (
                    "Provisioned",
                    "CapacityIsFound",
                    f"its {len(pods)} pods fit on the nodes",
                )
            else:
                state, reason = "NotProvisioned", "CapacityIsNotFound"
                message = f"{len(alone.new_claims)} new nodes would be needed; check-capacity launches none"
        out.append(
            {
                "name": request.key,
                "provisioningClassName": klass,
                "pods": request.total,
                "state": state,
                "reason": reason,
                "message": message,
            }
        )
    return out


def requests_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The ProvisioningRequests as a table for people: class, pods, the Provisioned condition and why."""
    out = Table(title=f"ProvisioningRequests: {len(rows)}", title_justify="left", show_lines=True)
    for col in ("ProvisioningRequest", "Class", "Pods", "State", "Reason", "Message"):
        out.add_column(col)
    for r in rows:
        out.add_row(
            escape(r["name"]),
            r["provisioningClassName"],
            str(r["pods"]),
            r["state"],
            r["reason"],
            escape(r["message"]),
        )
    return out
