"""Gangs in `provisioner simulate`: the capacity a scenario says offerings have left (`spec.capacity`),
each gang as the output shows it (members, state, zone, placement, reason; `gangs` in the JSON and a
table) for the static solve and for a timeline run, what all-or-nothing avoided over a run
(`AvoidedMeter`), and the scenario's ProvisioningRequests (read, solved, shown).

What the solver decides for a gang is `provisioner.scheduling.gangs`'; this only reads and reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    state: ClusterState,
    results: Results | None,
    placement: Mapping[str, str],
    avoided: Mapping[str, Avoided] | None = None,
) -> list[dict[str, Any]]:
    """Each gang at the end of a run: its members and where they run, and, for a gang not running whole,
    the last solve's state and reason. `placement`: node name -> the placement group it launched in;
    `avoided`: what a one-at-a-time launch would have billed for it (`AvoidedMeter`)."""
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
                "avoided": (avoided or {}).get(name, Avoided()).to_dict(),
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
        avoided = g.get("avoided") or {}
        if avoided.get("cost"):
            why += (
                f"{'; ' if why else ''}all-or-nothing avoided ${avoided['cost']:.2f}: one at a time would have "
                f"billed {avoided['nodes']} nodes (${avoided['perHour']:.2f}/h) for {avoided['hours']:.2f} h "
                "without their gang"
            )
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


@dataclass
class Avoided:
    """What launching a gang's nodes one at a time would have billed while the gang could not start."""

    per_hour: float = 0.0
    """The most $/h at any moment: the nodes a one-at-a-time launch would have started, at their price."""
    nodes: int = 0
    """The most such nodes at any moment."""
    seconds: float = 0.0
    """How long they would have been billed, waiting for the rest of their gang."""
    cost: float = 0.0
    """$ over the run."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "perHour": round(self.per_hour, 6),
            "nodes": self.nodes,
            "hours": round(self.seconds / 3600, 4),
            "cost": round(self.cost, 4),
        }


class AvoidedMeter:
    """Over a timeline run, per gang, what a one-at-a-time launch (Karpenter's, one NodeClaim after
    another) would have billed for members that could not start: while a gang has no node and its
    planned offering has room for some but not all of its nodes (the fake cloud's remaining count, in
    the zone with the most), those nodes at the offering's price, for as long as that lasts."""

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.planned: dict[str, tuple[str, str, int]] = {}
        """Gang -> (instance type, capacity type, nodes) of its last group launch."""
        self.avoided: dict[str, Avoided] = {}
        self._last: Any = None

    def saw(self, results: Results | None) -> None:
        """Remember the offering each gang's new nodes were planned on (the provisioning solve's)."""
        for claim in results.new_claims if results is not None else ():
            if claim.gang:
                self.planned[claim.gang] = (
                    claim.instance_type.name,
                    claim.offering.capacity_type,
                    claim.gang_size,
                )

    def tick(self, now: Any, state: ClusterState) -> None:
        last, self._last = self._last, now
        if last is None or not self.planned:
            return
        seconds = (now - last).total_seconds()
        running = {
            c.metadata.annotations.get(wk.GANG)
            for c in state.claims.values()
            if c.status.provider_id and c.metadata.deletion_timestamp is None
        }
        for gang, (type_, capacity_type, size) in self.planned.items():
            if gang in running or size < 2:
                continue
            left = [
                self.fake.remaining(instance_type=type_, zone=z, capacity_type=capacity_type)
                for z in self.fake.zones
            ]
            if any(n is None for n in left):
                continue  # room somewhere for all of it: no shortage to count
            nodes = min(max(left, default=0), size - 1)
            if nodes <= 0:
                continue
            price = self._price(type_, capacity_type)
            a = self.avoided.setdefault(gang, Avoided())
            a.per_hour = max(a.per_hour, nodes * price)
            a.nodes = max(a.nodes, nodes)
            a.seconds += seconds
            a.cost += nodes * price * seconds / 3600

    def _price(self, type_: str, capacity_type: str) -> float:
        for t in self.fake.catalog:
            if t.name == type_:
                prices = [o.price for o in t.offerings if o.capacity_type == capacity_type]
                return min(prices, default=0.0)
        return 0.0
