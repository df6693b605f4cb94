"""Scenario files: loading and checking, not running.

A scenario is multi-document YAML, in one file or several files and folders read as one: our NodePool,
NodeClass, Team and Department documents, Kubernetes Pods, Deployments, ReplicaSets, StatefulSets and Jobs (expanded to
their pods), optional Nodes, DaemonSets and Namespaces, and at most one `provisioner.sh/v1alpha1`
`Scenario` document (catalogs and regions, stockouts, the cluster's default pools, files to include).
Which catalogs serve which NodeClass kinds is `provisioner.sim.catalogs`'.

`load(*paths)` returns a `LoadedScenario` (the objects, the catalogs' instance types per pool with the
stockouts applied, a Snapshot) or raises `ScenarioError` holding every problem found, each located as
`FILE:LINE: Kind/name: field: message`. Running it (`provisioner.sim.static`) is someone else's job, so a
later timeline (`spec.duration`, `spec.timeline`) only extends the `ScenarioSpec` model here.

Longer than most modules (about 800 lines): the checks of each workload kind's fields sit beside the
loader that locates their problems, so a new kind is one function here. What a Scenario document may say
(its models) is `provisioner.sim.scenario_spec`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from provisioner.api import Department, NodePool, Team, documents, durations, key_checks, quantities
from provisioner.api import labels as wk
from provisioner.api.documents import Problem, YamlDocument
from provisioner.api.nodeclass import NODECLASS_KINDS, NodeClass
from provisioner.api.provisioning_request import ProvisioningRequest
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType, Offering, for_template
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.sim import catalogs, priority
from provisioner.sim.catalogs import CatalogUse
from provisioner.sim.gangs import RequestDocuments, capacity_of
from provisioner.sim.scenario_spec import ReservationSpec, Scenario
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget, tolerates_all

WORKLOAD_KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job")
OTHER_KINDS = ("Node", "DaemonSet", "Namespace", "PodDisruptionBudget", "PriorityClass")
REQUEST_KINDS = ("ProvisioningRequest", "PodTemplate")
"""Cluster Autoscaler's ProvisioningRequest and the PodTemplates it names (`provisioner.sim.gangs`)."""


def our_kinds() -> tuple[str, ...]:
    """The provisioner.sh kinds a scenario holds: NodePool, the installed plug-ins' NodeClass kinds, Team,
    Department."""
    return ("NodePool", *NODECLASS_KINDS, "Team", "Department")


def all_kinds() -> tuple[str, ...]:
    """Every kind a scenario may hold."""
    return ("Scenario", *our_kinds(), *WORKLOAD_KINDS, *OTHER_KINDS, *REQUEST_KINDS)


MAX_REPLICAS = 100_000


class ScenarioError(Exception):
    """A scenario that cannot run; `problems` says where and why (file, line, document, field)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class LoadedScenario:
    """Everything a run needs, checked."""

    source: str
    scenario: Scenario
    nodepools: list[NodePool]
    nodeclasses: dict[tuple[str, str], NodeClass]
    """(kind, name) -> NodeClass: the scenario's, plus a default one for every nodeClassRef naming none."""
    default_nodeclasses: set[tuple[str, str]]
    pods: list[Pod]
    """Pods to schedule (not bound to a node)."""
    nodes: list[Node]
    bound: dict[str, list[Pod]]
    """Node name -> pods running on it (bound pods of the file, plus daemonset pods)."""
    daemonsets: list[DaemonSet]
    namespaces: dict[str, dict[str, str]]
    instance_types: dict[str, list[InstanceType]]
    """Pool name -> the types its NodeClass can launch, stockouts flagged unavailable."""
    catalogs: list[CatalogUse] = field(default_factory=list)
    """The catalogs the pools launch from: one per NodeClass kind (or one for every kind)."""
    document: YamlDocument | None = None
    """The Scenario document as read (its lines locate timeline problems)."""
    pdb_documents: list[dict[str, Any]] = field(default_factory=list)
    """PodDisruptionBudgets as written (the timeline runner applies them to its cluster)."""
    teams: list[Team] = field(default_factory=list)
    departments: list[Department] = field(default_factory=list)
    priorities: priority.PriorityClasses = field(default_factory=priority.PriorityClasses)
    """The scenario's PriorityClasses (pods' `spec.priority` is set from them as they are loaded)."""
    provisioning_requests: list[ProvisioningRequest] = field(default_factory=list)
    """ProvisioningRequests (autoscaling.x-k8s.io/v1), by namespace and name."""
    pod_templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`namespace/name` -> PodTemplate document (what the requests' pod sets name)."""
    warnings: list[Problem] = field(default_factory=list)
    """What `templates validate` warns of (a typo'd `provisioner.sh/` key, a GPU pool without a taint,
    quotas promising more than a pool holds): the run goes on, and `simulate` prints them first."""

    @property
    def catalog_types(self) -> list[InstanceType]:
        """Every type of every catalog (their names never clash: each cloud names its own)."""
        return [t for use in self.catalogs for t in use.types]

    @property
    def zones(self) -> list[str]:
        return [z for use in self.catalogs for z in use.zones]

    @property
    def where(self) -> str:
        """The catalogs and their regions, for people: `aws us-east-1 + gcp us-central1`."""
        return " + ".join(f"{use.name} {use.region}" for use in self.catalogs)

    @property
    def pool_defaults(self) -> ClusterDefaults:
        """The scenario's `spec.defaultNodePools`, as the solver takes them."""
        given = self.scenario.spec.default_node_pools
        return ClusterDefaults.of(cpu=given.cpu, gpu=given.gpu)

    def zones_of(self, kind: str) -> list[str]:
        """The zones the catalog serving this NodeClass kind offers."""
        return next((use.zones for use in self.catalogs if kind in use.kinds), [])

    @property
    def pdbs(self) -> list[PodDisruptionBudget]:
        return [PodDisruptionBudget.from_dict(d) for d in self.pdb_documents]

    def snapshot(self) -> Snapshot:
        nodes = tuple(
            StateNode(name=n.name, node=n, pods=tuple(self.bound.get(n.name, ()))) for n in self.nodes
        )
        return Snapshot(
            nodes=nodes,
            pending_pods=tuple(sorted(self.pods, key=lambda p: p.key)),
            daemonsets=tuple(self.daemonsets),
            pdbs=tuple(self.pdbs),
            nodepools=tuple(self.nodepools),
            nodeclasses=dict(self.nodeclasses),
            namespaces={k: dict(v) for k, v in self.namespaces.items()},
            teams=tuple(sorted(self.teams, key=lambda t: t.name)),
            departments=tuple(sorted(self.departments, key=lambda d: d.name)),
        )

    @property
    def capacity(self) -> dict[OfferingKey, int] | None:
        """Instances each offering has left (`spec.capacity`, the last selector matching an offering
        wins), None when the scenario sets none."""
        return capacity_of(self.scenario.spec.capacity, self.catalog_types)

    def find_pod(self, key: str) -> Pod | None:
        namespace, _, name = key.rpartition("/")
        namespace = namespace or "default"
        return next((p for p in self.pods if p.namespace == namespace and p.name == name), None)


def _check_reservation(
    out: _Collector,
    doc: YamlDocument,
    r: ReservationSpec,
    path: tuple[str | int, ...],
    *,
    known: set[str],
    zones: Sequence[str],
) -> None:
    """A reservation names a type of the catalog, a zone of the region and a duration as its end."""
    if r.instance_type not in known:
        out.add(doc, f"instance type {r.instance_type!r} is not in the catalog", (*path, "instanceType"))
    if r.zone not in zones:
        out.add(doc, f"zone {r.zone!r} is not in the region; allowed: {', '.join(zones)}", (*path, "zone"))
    if r.ends_at is not None:
        try:
            durations.parse_duration(r.ends_at)
        except durations.DurationError as err:
            out.add(doc, f"endsAt: {err} (a duration after the start, such as 20h)", (*path, "endsAt"))


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def add(self, document: YamlDocument, message: str, path: Sequence[str | int] = ()) -> None:
        kind, name = documents.identify(document)
        self.problems.append(
            Problem(
                document.source,
                document.line_of(tuple(path)),
                message,
                kind=kind,
                name=name,
                path=documents.format_path(tuple(path)),
            )
        )


def load(*paths: str | Path) -> LoadedScenario:
    """Read and check a scenario: one file, or several files and folders (every *.yaml / *.yml below a
    folder, in name order) read as one set, such as `nodepool_templates/` beside a file of pods, plus what
    a Scenario document's `spec.include` names. Raises `ScenarioError` with every problem found."""
    docs: list[YamlDocument] = []
    problems: list[Problem] = []
    for path in paths:
        files = documents.expand_paths([path])
        if not files:
            missing = not Path(path).exists()
            problems.append(Problem(str(path), 1, "no such file or folder" if missing else "no YAML files"))
        for file in files:
            found = _read(file, problems)
            docs.extend(found)
            for doc, target, where in _includes(file, found):
                included = documents.expand_paths([target])
                if not included:
                    problems.append(
                        Problem(
                            doc.source,
                            doc.line_of(where),
                            f"includes {target}, which is no file or folder holding YAML",
                            kind="Scenario",
                            path=documents.format_path(where),
                        )
                    )
                for extra in included:
                    docs.extend(_read(extra, problems))
    if problems:
        raise ScenarioError(problems)
    return load_documents(docs, source=" ".join(str(p) for p in paths))


def _read(file: Path, problems: list[Problem]) -> list[YamlDocument]:
    try:
        found = documents.read_yaml_file(file)
    except documents.DocumentError as err:
        problems.append(err.problem)
        return []
    if not found:
        problems.append(Problem(str(file), 1, "file holds no YAML documents"))
    return found


def _includes(
    file: Path, found: Sequence[YamlDocument]
) -> list[tuple[YamlDocument, Path, tuple[str | int, ...]]]:
    """(Scenario document, path, field path) for each `spec.include` entry of the file, resolved against
    the file's folder. Malformed entries are left to the model's check."""
    out: list[tuple[YamlDocument, Path, tuple[str | int, ...]]] = []
    for doc in found:
        data = doc.data
        if not isinstance(data, dict) or data.get("kind") != "Scenario":
            continue
        spec = data.get("spec")
        entries = spec.get("include") if isinstance(spec, dict) else None
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, str):
                out.append((doc, file.parent / entry, ("spec", "include", i)))
    return out


def load_documents(docs: Sequence[YamlDocument], *, source: str) -> LoadedScenario:
    out = _Collector()
    scenarios: list[tuple[Scenario, YamlDocument]] = []
    nodepools: list[tuple[NodePool, YamlDocument]] = []
    nodeclasses: dict[tuple[str, str], NodeClass] = {}
    quota_objects: list[documents.LoadedObject] = []
    pods: list[Pod] = []
    nodes: list[Node] = []
    daemonsets: list[DaemonSet] = []
    pdb_documents: list[dict[str, Any]] = []
    namespaces: dict[str, dict[str, str]] = {}
    requests = RequestDocuments()
    seen: dict[tuple[str, str], YamlDocument] = {}
    priorities, priority_problems = priority.collect(docs)
    out.problems.extend(priority_problems)

    for doc in docs:
        data = doc.data
        if not isinstance(data, dict):
            out.add(
                doc, f"document {doc.index + 1} is not a mapping; expected apiVersion, kind, metadata, spec"
            )
            continue
        kind = data.get("kind")
        known_kinds = all_kinds()
        if not isinstance(kind, str) or kind not in known_kinds:
            out.add(
                doc,
                f"kind {json.dumps(kind)} is not known in a scenario; allowed: {', '.join(known_kinds)}",
                ("kind",),
            )
            continue
        if kind != "Scenario":
            meta = data.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(meta, dict) or not isinstance(name, str) or not name:
                out.add(doc, "metadata.name is required", ("metadata", "name"))
                continue
            cluster_scoped = ("Node", "Namespace", "PriorityClass", *our_kinds())
            ns = meta.get("namespace") or "default" if kind not in cluster_scoped else ""
            key = (kind, f"{ns}/{name}" if ns else name)
            if key in seen:
                out.add(doc, f"{kind} {key[1]} is defined twice (also at line {seen[key].line})")
                continue
            seen[key] = doc
        if kind == "Scenario":
            try:
                scenarios.append((Scenario.model_validate_json(json.dumps(data), strict=True), doc))
            except ValidationError as err:
                out.problems.extend(documents.located_problems(err, doc, kind="Scenario", model=Scenario))
        elif kind in REQUEST_KINDS:
            for message, path in requests.add(doc, kind):
                out.add(doc, message, path)
            out.problems.extend(requests.problems)
            requests.problems.clear()
        elif kind in NODECLASS_KINDS or kind in ("NodePool", "Team", "Department"):
            obj, problems = documents.validate_document(doc)
            out.problems.extend(problems)
            for key_problem in key_checks.check(doc):
                (out.problems if key_problem.is_error else out.warnings).append(key_problem)
            if obj is not None:
                out.warnings.extend(documents.lint(obj, doc))
            if isinstance(obj, NodePool):
                nodepools.append((obj, doc))
            elif isinstance(obj, NodeClass):
                nodeclasses[(obj.kind, obj.name)] = obj
            if obj is not None:
                quota_objects.append(documents.LoadedObject(obj, doc))
        else:
            _load_kube(
                doc,
                kind,
                out,
                pods=pods,
                nodes=nodes,
                daemonsets=daemonsets,
                pdb_documents=pdb_documents,
                namespaces=namespaces,
                priorities=priorities,
            )

    for _, doc in scenarios[1:]:
        out.add(doc, f"a scenario holds one Scenario document; the first is at line {scenarios[0][1].line}")
    if not nodepools and not out.problems:
        out.problems.append(Problem(source, 1, "no NodePool document: nothing could launch a node"))
    scenario = scenarios[0][0] if scenarios else Scenario()
    spec = scenario.spec
    from provisioner.api import team_checks

    for p in team_checks.check(quota_objects, allow_oversubscription=spec.allow_oversubscription):
        (out.problems if p.is_error else out.warnings).append(p)
    scenario_doc = scenarios[0][1] if scenarios else None
    uses, found = catalogs.choose(
        single=spec.catalog,
        region=spec.region,
        listed=[(ref.name, ref.region) for ref in spec.catalogs],
        pool_kinds={p.spec.template.spec.node_class_ref.kind for p, _ in nodepools},
        nodeclasses=nodeclasses,
    )
    for message, path in found:
        if scenario_doc is not None:
            out.add(scenario_doc, message, path)
        else:
            out.problems.append(Problem(source, 1, message))
    if out.problems:
        raise ScenarioError(out.problems)

    if scenario_doc is not None:
        for message, path in catalogs.unavailable_problems(spec.unavailable, uses, ("spec", "unavailable")):
            out.add(scenario_doc, message, path)
        for message, path in catalogs.unavailable_problems(spec.capacity, uses, ("spec", "capacity")):
            out.add(scenario_doc, message, path)
        known = {t.name for use in uses for t in use.types}
        zones = [z for use in uses for z in use.zones]
        for i, r in enumerate(spec.reservations):
            _check_reservation(out, scenario_doc, r, ("spec", "reservations", i), known=known, zones=zones)
    if out.problems:
        raise ScenarioError(out.problems)
    if spec.unavailable or spec.capacity:
        for use in uses:
            left = capacity_of(spec.capacity, use.types) or {}
            use.types[:] = [
                t.with_offerings(
                    tuple(
                        Offering(o.zone, o.capacity_type, o.price, False)
                        if any(sel.matches(t.name, o) for sel in spec.unavailable)
                        or left.get(o.offering_key(t.name)) == 0
                        else o
                        for o in t.offerings
                    )
                )
                for t in use.types
            ]

    pool_names = sorted(p.name for p, _ in nodepools)
    for group in ("cpu", "gpu"):
        for i, name in enumerate(getattr(spec.default_node_pools, group)):
            if name not in pool_names and scenario_doc is not None:
                out.add(
                    scenario_doc,
                    f"NodePool {name!r} is not in the scenario; allowed: {', '.join(pool_names)}",
                    ("spec", "defaultNodePools", group, i),
                )
    by_kind = {kind: use for use in uses for kind in use.kinds}
    for pool, doc in nodepools:
        ref = pool.spec.template.spec.node_class_ref
        if ref.kind not in by_kind:
            served_by = " + ".join(u.name for u in uses)
            wanted = catalogs.catalog_for(ref.kind)
            out.add(
                doc,
                f"kind {ref.kind!r} cannot launch from the {served_by} catalog; use "
                f"{' or '.join(sorted(by_kind))}, or add {{name: {wanted}}} to spec.catalogs of the Scenario",
                ("spec", "template", "spec", "nodeClassRef", "kind"),
            )
    if out.problems:
        raise ScenarioError(out.problems)

    defaults: set[tuple[str, str]] = set()
    per_pool: dict[str, list[InstanceType]] = {}
    for pool, _doc in nodepools:
        ref = pool.spec.template.spec.node_class_ref
        key = (ref.kind, ref.name)
        use = by_kind[ref.kind]
        if key not in nodeclasses:
            nodeclasses[key] = _default_nodeclass(ref.kind, ref.name, use.zones)
            defaults.add(key)
        per_pool[pool.name] = for_template(
            pool.spec.template.metadata.labels, _types_for(nodeclasses[key], use.types, use.zones)
        )

    types = [t for use in uses for t in use.types]
    by_type = {t.name: t for t in types}
    nodes = [_fill_node(n, by_type) for n in nodes]
    bound: dict[str, list[Pod]] = {}
    pending: list[Pod] = []
    node_names = {n.name for n in nodes}
    for pod in pods:
        if pod.node_name:
            if pod.node_name not in node_names:
                raise ScenarioError(
                    [
                        Problem(
                            source,
                            1,
                            f"pod {pod.key} is bound to node {pod.node_name!r}, which the scenario does not define",
                        )
                    ]
                )
            bound.setdefault(pod.node_name, []).append(pod)
        elif not pod.is_terminal:
            pending.append(pod)
    for n in nodes:
        for ds in daemonsets:
            ds_pod = ds.pod
            if tolerates_all(ds_pod.tolerations, n.taints) is not None:
                continue
            if any(k not in n.labels or n.labels[k] != v for k, v in ds_pod.node_selector.items()):
                continue
            if ds_pod.required_node_terms and not any(
                all(r.matches(n.labels) for r in term) for term in ds_pod.required_node_terms
            ):
                continue
            bound.setdefault(n.name, []).append(_ds_pod_on(ds, n.name))

    return LoadedScenario(
        source=source,
        scenario=scenario,
        nodepools=[p for p, _ in nodepools],
        nodeclasses=nodeclasses,
        default_nodeclasses=defaults,
        pods=pending,
        nodes=nodes,
        bound=bound,
        daemonsets=daemonsets,
        pdb_documents=pdb_documents,
        namespaces=namespaces,
        instance_types=per_pool,
        catalogs=uses,
        document=scenario_doc,
        teams=[o.obj for o in quota_objects if isinstance(o.obj, Team)],
        departments=[o.obj for o in quota_objects if isinstance(o.obj, Department)],
        priorities=priorities,
        provisioning_requests=sorted(requests.requests, key=lambda r: r.key),
        pod_templates=requests.templates,
        warnings=sorted(out.warnings, key=lambda p: (p.file, p.line, p.path)),
    )


def _default_nodeclass(kind: str, name: str, zones: Sequence[str]) -> NodeClass:
    """What a pool gets when its nodeClassRef names no document: every zone of the region."""
    return NODECLASS_KINDS[kind].simulated(name, zones)


def nodeclass_zones(nc: NodeClass, zones: Sequence[str]) -> list[str]:
    """The zones of `zones` the NodeClass launches in."""
    return nc.launch_zones(zones)


def _types_for(nc: NodeClass, types: Sequence[InstanceType], zones: Sequence[str]) -> list[InstanceType]:
    allowed = set(nodeclass_zones(nc, zones))
    if allowed == set(zones):
        return list(types)
    return [t.with_offerings(tuple(o for o in t.offerings if o.zone in allowed)) for t in types]


def _fill_node(n: Node, by_type: Mapping[str, InstanceType]) -> Node:
    """A Node without capacity gets its instance type's, from the catalog."""
    if n.allocatable:
        return n
    it = by_type.get(n.labels.get(wk.INSTANCE_TYPE, ""))
    if it is None:
        return n
    from dataclasses import replace

    alloc = dict(it.allocatable)
    alloc.setdefault(quantities.PODS, it.max_pods)
    return replace(n, capacity=dict(it.capacity), allocatable=alloc)


def _ds_pod_on(ds: DaemonSet, node: str) -> Pod:
    from dataclasses import replace

    return replace(ds.pod, name=f"{ds.name}-{node}", namespace=ds.namespace, node_name=node, phase="Running")


RUNS_FOR = "sim.provisioner.sh/runs-for"
"""Pod annotation, for simulations with time: the pod finishes this long after it starts running (a
duration such as `8h`), and its Job does not create it again. Ignored without time."""


def _check_runs_for(doc: YamlDocument, out: _Collector, meta: Any, base: tuple[str | int, ...]) -> bool:
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(RUNS_FOR) if isinstance(annotations, dict) else None
    if value is None:
        return True
    from provisioner.api import durations

    try:
        parsed = durations.parse_duration(str(value), allow_never=False)
    except durations.DurationError as err:
        out.add(doc, str(err), (*base, "annotations", RUNS_FOR))
        return False
    if parsed is None or parsed.total_seconds() <= 0:
        out.add(doc, f"must be longer than 0, got {value!r}", (*base, "annotations", RUNS_FOR))
        return False
    return True


def _pod_template(
    doc: YamlDocument, out: _Collector, data: Mapping[str, Any], kind: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    spec = data.get("spec")
    if not isinstance(spec, dict):
        out.add(doc, f"spec is required for a {kind}", ("spec",))
        return None
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        out.add(doc, "spec.template.spec is required (the pod template)", ("spec", "template"))
        return None
    return spec, template


def _check_pod_spec(
    doc: YamlDocument,
    out: _Collector,
    spec: Any,
    base: tuple[str | int, ...],
    *,
    negative_is_error: bool = False,
) -> bool:
    """Whether the pod spec can be read. A request that is not a quantity is an error; a negative one only
    with `negative_is_error` (a DaemonSet): a pod with one is loaded and reported unschedulable with the
    reason, as the controller does with one in a cluster."""
    if not isinstance(spec, dict):
        out.add(doc, "a pod spec (mapping) is required", base)
        return False
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        out.add(doc, "containers must be a non-empty list", (*base, "containers"))
        return False
    ok = True
    for group in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(group) or ()):
            if not isinstance(c, dict):
                out.add(doc, "a container must be a mapping", (*base, group, i))
                ok = False
                continue
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                for rname, value in (res.get(part) or {}).items():
                    try:
                        negative = quantities.parse_quantity(value) < 0
                    except quantities.QuantityError as err:
                        out.add(doc, str(err), (*base, group, i, "resources", part, rname))
                        ok = False
                        continue
                    if negative and negative_is_error:
                        out.add(
                            doc,
                            f"{value!r} is negative; a request must be 0 or more",
                            (*base, group, i, "resources", part, rname),
                        )
                        ok = False
    for i, t in enumerate(spec.get("topologySpreadConstraints") or ()):
        if not isinstance(t, dict) or "topologyKey" not in t:
            out.add(doc, "topologyKey is required", (*base, "topologySpreadConstraints", i))
            ok = False
        elif t.get("whenUnsatisfiable", "DoNotSchedule") not in ("DoNotSchedule", "ScheduleAnyway"):
            out.add(
                doc,
                f"whenUnsatisfiable {t.get('whenUnsatisfiable')!r} is not known; allowed: DoNotSchedule, ScheduleAnyway",
                (*base, "topologySpreadConstraints", i, "whenUnsatisfiable"),
            )
            ok = False
    affinity = spec.get("affinity") or {}
    for section in ("podAffinity", "podAntiAffinity"):
        sec = affinity.get(section) or {}
        for i, t in enumerate(sec.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
            if not isinstance(t, dict) or "topologyKey" not in t:
                out.add(
                    doc,
                    "topologyKey is required",
                    (*base, "affinity", section, "requiredDuringSchedulingIgnoredDuringExecution", i),
                )
                ok = False
    node_aff = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for i, term in enumerate(node_aff.get("nodeSelectorTerms") or ()):
        for j, expr in enumerate((term or {}).get("matchExpressions") or ()):
            path = (
                *base,
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
                i,
                "matchExpressions",
                j,
            )
            key = (expr or {}).get("key")
            if not isinstance(key, str) or not key:
                out.add(doc, f"key is required: a label key, not {key!r}", (*path, "key"))
                ok = False
            op = (expr or {}).get("operator")
            if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                out.add(
                    doc,
                    f"operator {op!r} is not known; allowed: In, NotIn, Exists, DoesNotExist, Gt, Lt",
                    (*path, "operator"),
                )
                ok = False
    return ok


def _load_kube(
    doc: YamlDocument,
    kind: str,
    out: _Collector,
    *,
    pods: list[Pod],
    nodes: list[Node],
    daemonsets: list[DaemonSet],
    pdb_documents: list[dict[str, Any]],
    namespaces: dict[str, dict[str, str]],
    priorities: priority.PriorityClasses | None = None,
) -> None:
    data = doc.data
    meta = data.get("metadata") or {}
    name = meta["name"]
    namespace = meta.get("namespace") or "default"
    classes = priorities or priority.PriorityClasses()
    try:
        if kind == "PriorityClass":
            return  # read first, by `priority.collect`
        if kind == "Namespace":
            namespaces[name] = dict(meta.get("labels") or {})
        elif kind == "Node":
            nodes.append(Node.from_dict(data))
        elif kind == "Pod":
            if _check_pod_spec(doc, out, data.get("spec"), ("spec",)) and _check_runs_for(
                doc, out, meta, ("metadata",)
            ):
                spec, why = classes.resolve(data["spec"])
                if spec is None:
                    out.add(doc, str(why), ("spec", "priorityClassName"))
                    return
                pods.append(Pod.from_dict({**data, "spec": spec}))
        elif kind == "PodDisruptionBudget":
            if _check_pdb(doc, out, data.get("spec")):
                pdb_documents.append(data)
        elif kind == "DaemonSet":
            found = _pod_template(doc, out, data, kind)
            if found and _check_pod_spec(
                doc, out, found[1]["spec"], ("spec", "template", "spec"), negative_is_error=True
            ):
                daemonsets.append(DaemonSet.from_dict(data))
        else:
            found = _pod_template(doc, out, data, kind)
            if not found or not _check_pod_spec(doc, out, found[1]["spec"], ("spec", "template", "spec")):
                return
            spec, template = found
            pod_spec, why = classes.resolve(template["spec"])
            if pod_spec is None:
                out.add(doc, str(why), ("spec", "template", "spec", "priorityClassName"))
                return
            template = {**template, "spec": pod_spec}
            field_name = "parallelism" if kind == "Job" else "replicas"
            count = spec.get(field_name, 1)
            if kind == "Job" and isinstance(spec.get("completions"), int) and isinstance(count, int):
                count = min(count, spec["completions"])
            if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_REPLICAS:
                out.add(
                    doc,
                    f"{field_name} must be an integer 0-{MAX_REPLICAS}, got {count!r}",
                    ("spec", field_name),
                )
                return
            tmeta = template.get("metadata") or {}
            if not _check_runs_for(doc, out, tmeta, ("spec", "template", "metadata")):
                return
            owner_kind = {"Deployment": "ReplicaSet"}.get(kind, kind)
            # One of each per workload, shared by its pods (as the spec is): documents are only read, and
            # a workload of 1,000 pods would otherwise hold 1,000 copies. The first pod's parse of the
            # spec is shared the same way.
            labels = dict(tmeta.get("labels") or {})
            annotations = dict(tmeta.get("annotations") or {})
            owners = [{"kind": owner_kind, "name": name, "controller": True}]
            first: tuple[Pod, ...] = ()
            for i in range(count):
                pod_doc = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{i}",
                        "namespace": namespace,
                        "labels": labels,
                        "annotations": annotations,
                        "ownerReferences": owners,
                    },
                    "spec": template["spec"],
                }
                pods.append(Pod.from_dict(pod_doc, like=first))
                first = first or (pods[-1],)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        out.add(doc, f"cannot read this {kind}: {err}")


def _check_pdb(doc: YamlDocument, out: _Collector, spec: Any) -> bool:
    """A PDB needs a selector and exactly one of minAvailable and maxUnavailable (a count or a percent)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("selector"), dict):
        out.add(doc, "a PodDisruptionBudget needs spec.selector (matchLabels or matchExpressions)", ("spec",))
        return False
    given = [k for k in ("minAvailable", "maxUnavailable") if k in spec]
    if len(given) != 1:
        out.add(doc, "give exactly one of spec.minAvailable and spec.maxUnavailable", ("spec",))
        return False
    value = spec[given[0]]
    if isinstance(value, bool) or not (
        (isinstance(value, int) and value >= 0)
        or (isinstance(value, str) and re.fullmatch(r"(100|\d{1,2})%", value))
    ):
        out.add(
            doc,
            f"{given[0]} must be a count >= 0 or a percent such as 50%, got {value!r}",
            ("spec", given[0]),
        )
        return False
    return True
