"""A scenario's timeline, checked and expanded: `spec.duration` and the steps of `spec.timeline`, each at a
virtual time, with its manifests expanded to pods the way the scenario's own workloads are.

Checking only, no running (`provisioner.sim.runner` runs it). Every problem is located as the scenario
loader locates its own (`FILE:LINE: Scenario/name: spec.timeline[2].at: message`) and raised together in
one `ScenarioError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from provisioner.api import documents, durations
from provisioner.api.documents import Problem, YamlDocument
from provisioner.api.team import Department, Team
from provisioner.sim import catalogs
from provisioner.sim.findings import Findings
from provisioner.sim.kube_documents import read_kube_document
from provisioner.sim.loaded import LoadedScenario, ScenarioError
from provisioner.sim.scenario_spec import (
    TIMELINE_QUOTA_KINDS,
    TIMELINE_WORKLOAD_KINDS,
    CapacitySpec,
    DeleteRef,
    InterruptSelector,
    ReservationSpec,
    TimelineStep,
    Unavailable,
)
from provisioner.state.objects import Pod

STEP_ACTIONS = (
    "apply",
    "delete",
    "unavailable",
    "available",
    "capacity",
    "interrupt",
    "reservations",
    "end_reservations",
)
DEFAULT_TAIL = timedelta(hours=1)
"""How long a timeline without `spec.duration` runs after its last step."""
OWNER_KIND = {"Deployment": "ReplicaSet"}
"""The owner kind the expansion writes on a workload's pods (a Deployment's pods belong to its ReplicaSet)."""


@dataclass
class LoadedStep:
    """One step of the timeline as loaded and checked (from its `TimelineStep`): when, and what it does."""

    index: int
    at: timedelta
    line: int
    pods: list[Pod] = field(default_factory=list)
    """The pods its `apply` manifests expand to."""
    workloads: list[tuple[str, str, str]] = field(default_factory=list)
    """(kind, namespace, name) of every manifest applied."""
    pod_keys: list[tuple[str, str, str]] = field(default_factory=list)
    """("Pod", namespace, name) of every pod they expand to."""
    delete: list[DeleteRef] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)
    available: list[Unavailable] = field(default_factory=list)
    capacity: list[CapacitySpec] = field(default_factory=list)
    interrupt: list[InterruptSelector] = field(default_factory=list)
    reservations: list[ReservationSpec] = field(default_factory=list)
    end_reservations: list[str] = field(default_factory=list)
    quota_objects: list[Team | Department] = field(default_factory=list)
    """Teams and Departments its `apply` creates or replaces."""

    def describe(self) -> str:
        parts = []
        applied = [f"{k}/{n}" for k, _, n in self.workloads] + [
            f"{o.kind}/{o.name}" for o in self.quota_objects
        ]
        if applied:
            parts.append("apply " + ", ".join(applied))
        if self.delete:
            parts.append("delete " + ", ".join(f"{d.kind}/{d.name}" for d in self.delete))
        for word, selectors in (("unavailable", self.unavailable), ("available", self.available)):
            if selectors:
                parts.append(f"{word} " + ", ".join(offering_text(s) for s in selectors))
        if self.capacity:
            parts.append("capacity " + ", ".join(f"{offering_text(c)}={c.count}" for c in self.capacity))
        if self.interrupt:
            parts.append(
                "interrupt "
                + ", ".join(
                    "/".join(x for x in (s.node_pool, s.capacity_type) if x) or "every node"
                    for s in self.interrupt
                )
            )
        if self.reservations:
            parts.append(
                "reserve "
                + ", ".join(f"{r.id} ({r.count}x {r.instance_type} in {r.zone})" for r in self.reservations)
            )
        if self.end_reservations:
            parts.append("end reservation " + ", ".join(self.end_reservations))
        return "; ".join(parts)


@dataclass
class Timeline:
    steps: list[LoadedStep]
    """In time order (steps at the same time in file order)."""
    duration: timedelta


def offering_text(sel: Unavailable) -> str:
    return "/".join(x or "*" for x in (sel.instance_type, sel.zone, sel.capacity_type))


def matches_workload(pod: Pod, kind: str, name: str) -> bool:
    """Whether a pod belongs to the workload `kind/name`. A Pod is itself, whoever owns it: deleting one
    pod of a Job is that pod finishing (it is not created again)."""
    if kind == "Pod":
        return pod.name == name
    return pod.owner_name == name and pod.owner_kind == OWNER_KIND.get(kind, kind)


def _sub_document(doc: YamlDocument, prefix: tuple[str | int, ...], data: Any) -> YamlDocument:
    """The part of `doc` at `prefix`, as a document of its own (its lines kept), so the scenario's
    workload checks locate problems in a manifest nested inside the timeline."""
    lines = {path[len(prefix) :]: line for path, line in doc.lines.items() if path[: len(prefix)] == prefix}
    return YamlDocument(data=data, line=doc.line_of(prefix), source=doc.source, index=doc.index, lines=lines)


def load(loaded: LoadedScenario) -> Timeline | None:
    """The scenario's timeline, checked; None when it has none. Raises ScenarioError with every problem."""
    spec = loaded.scenario.spec
    doc = loaded.document
    name = loaded.scenario.metadata.name
    problems: list[Problem] = []

    def add(message: str, path: Sequence[str | int]) -> None:
        line = doc.line_of(tuple(path)) if doc is not None else 1
        problems.append(
            Problem(
                loaded.source,
                line,
                message,
                kind="Scenario",
                name=name,
                path=_path_text(path),
            )
        )

    if not spec.timeline and spec.duration is None:
        return None

    duration: timedelta | None = None
    if spec.duration is not None:
        try:
            duration = durations.parse_duration(spec.duration, allow_never=False)
        except durations.DurationError as err:
            add(str(err), ("spec", "duration"))
        else:
            if duration is not None and duration <= timedelta(0):
                add(f"duration must be longer than 0, got {spec.duration!r}", ("spec", "duration"))

    pools = {p.name for p in loaded.nodepools}
    workloads: set[tuple[str, str, str]] = set()
    for pod in [*loaded.pods, *(p for pods in loaded.bound.values() for p in pods)]:
        workloads.add(("Pod", pod.namespace, pod.name))
        if pod.owner_kind is not None:
            owner = next((k for k, v in OWNER_KIND.items() if v == pod.owner_kind), pod.owner_kind)
            workloads.add((owner, pod.namespace, pod.owner_name or ""))
            if pod.owner_kind == "ReplicaSet":
                workloads.add(("ReplicaSet", pod.namespace, pod.owner_name or ""))

    steps: list[LoadedStep] = []
    for i, raw in enumerate(spec.timeline):
        base: tuple[str | int, ...] = ("spec", "timeline", i)
        try:
            at = durations.parse_duration(raw.at, allow_never=False)
        except durations.DurationError as err:
            add(str(err), (*base, "at"))
            continue
        assert at is not None
        if duration is not None and at > duration:
            add(
                f"at {raw.at} is after the end of the run (spec.duration {spec.duration})",
                (*base, "at"),
            )
        if not any(getattr(raw, a) for a in STEP_ACTIONS):
            names = (TimelineStep.model_fields[a].alias or a for a in STEP_ACTIONS)
            add(f"a step needs at least one of {', '.join(names)}", base)
            continue
        step = LoadedStep(
            index=i,
            at=at,
            line=doc.line_of(base) if doc is not None else 1,
            delete=list(raw.delete),
            unavailable=list(raw.unavailable),
            available=list(raw.available),
            capacity=list(raw.capacity),
            interrupt=list(raw.interrupt),
            reservations=list(raw.reservations),
            end_reservations=list(raw.end_reservations),
        )
        for word in ("unavailable", "available", "capacity"):
            for message, path in catalogs.unavailable_problems(
                getattr(raw, word), loaded.catalogs, (*base, word)
            ):
                add(message, path)
        for j, sel in enumerate(raw.interrupt):
            if sel.node_pool is not None and sel.node_pool not in pools:
                add(
                    f"NodePool {sel.node_pool!r} is not in the scenario; allowed: {', '.join(sorted(pools))}",
                    (*base, "interrupt", j, "nodePool"),
                )
        for j, manifest in enumerate(raw.apply):
            path = (*base, "apply", j)
            kind = manifest.get("kind")
            if kind in TIMELINE_QUOTA_KINDS:
                sub = _sub_document(doc, path, manifest) if doc is not None else YamlDocument(manifest, 1)
                obj, found = documents.validate_document(sub)
                for problem in found:
                    problems.append(
                        Problem(
                            problem.file,
                            problem.line,
                            problem.message,
                            kind="Scenario",
                            name=name,
                            path=_path_text(path) + (f".{problem.path}" if problem.path else ""),
                        )
                    )
                if isinstance(obj, Team | Department):
                    step.quota_objects.append(obj)
                continue
            if not isinstance(kind, str) or kind not in TIMELINE_WORKLOAD_KINDS:
                add(
                    f"kind {json.dumps(kind)} cannot be applied in a timeline; allowed: "
                    f"{', '.join((*TIMELINE_WORKLOAD_KINDS, *TIMELINE_QUOTA_KINDS))}",
                    (*path, "kind"),
                )
                continue
            meta = manifest.get("metadata")
            wname = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(wname, str) or not wname:
                add("metadata.name is required", (*path, "metadata", "name"))
                continue
            namespace = (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
            sub = _sub_document(doc, path, manifest) if doc is not None else YamlDocument(manifest, 1)
            collector = Findings()
            pods: list[Pod] = []
            read_kube_document(
                sub,
                kind,
                collector,
                pods=pods,
                nodes=[],
                daemonsets=[],
                pdb_documents=[],
                namespaces={},
                priorities=loaded.priorities,
            )
            for problem in collector.problems:
                problems.append(
                    Problem(
                        problem.file,
                        problem.line,
                        problem.message,
                        kind="Scenario",
                        name=name,
                        path=_path_text(path) + (f".{problem.path}" if problem.path else ""),
                    )
                )
            step.pods.extend(pods)
            step.workloads.append((kind, namespace, wname))
            step.pod_keys.extend(("Pod", p.namespace, p.name) for p in pods)
        steps.append(step)

    # A delete must name something in the scenario or applied by a step at or before its time (steps
    # may be listed out of time order).
    # An apply must not name a workload that exists then (its pods would replace the running ones):
    # deletes of a step run before its applies, so delete-then-apply in one step replaces it.
    steps.sort(key=lambda s: (s.at, s.index))
    quota_objects: list[Team | Department] = [*loaded.teams, *loaded.departments]
    workloads |= {(o.kind, "", o.name) for o in quota_objects}
    seen = set(workloads)
    alive = {w for w in workloads if w[0] != "Pod"}
    for step in steps:
        seen.update(step.pod_keys)
        seen.update((o.kind, "", o.name) for o in step.quota_objects)
        for j, ref in enumerate(step.delete):
            key = (ref.kind, "" if ref.kind in TIMELINE_QUOTA_KINDS else ref.namespace, ref.name)
            if key not in seen and key not in step.workloads:
                where = ref.name if ref.kind in TIMELINE_QUOTA_KINDS else f"{ref.namespace}/{ref.name}"
                add(
                    f"{ref.kind} {where} is not in the scenario nor applied by an earlier step",
                    ("spec", "timeline", step.index, "delete", j),
                )
            alive.discard(key)
        for j, workload in enumerate(step.workloads):
            if workload[0] != "Pod" and workload in alive:
                add(
                    f"{workload[0]} {workload[1]}/{workload[2]} already exists at {durations.format_duration(step.at)}; "
                    "delete it in this step or an earlier one to replace it",
                    ("spec", "timeline", step.index, "apply", j, "metadata", "name"),
                )
            alive.add(workload)
        seen.update(step.workloads)
    if problems:
        raise ScenarioError(problems)
    last = max((s.at for s in steps), default=timedelta(0))
    return Timeline(steps=steps, duration=duration if duration is not None else last + DEFAULT_TAIL)


def _path_text(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out
