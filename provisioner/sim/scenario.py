"""Scenario files: reading and checking them, not running them.

A scenario is multi-document YAML, in one file or several files and folders read as one: our NodePool,
NodeClass, Team and Department documents, Kubernetes Pods, Deployments, ReplicaSets, StatefulSets and Jobs (expanded to
their pods), optional Nodes, DaemonSets and Namespaces, and at most one `provisioner.sh/v1alpha1`
`Scenario` document (catalogs and regions, stockouts, the cluster's default pools, files to include).

`load(*paths)` returns a `LoadedScenario` (the objects, the catalogs' instance types per pool with the
stockouts applied, a Snapshot) or raises `ScenarioError` holding every problem found, each located as
`FILE:LINE: Kind/name: field: message`. This module owns the reading of files and includes, the dispatch
of each document by kind, and the checks across documents (one Scenario, pools against catalogs,
reservations, bound pods against nodes); the Kubernetes documents' own checks are
`provisioner.sim.kube_documents`', which catalogs serve which NodeClass kinds `provisioner.sim.catalogs`',
what a Scenario document may say `provisioner.sim.scenario_spec`'s, and running it
`provisioner.sim.static`'s and the runner's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from provisioner.api import (
    Department,
    NodePool,
    Team,
    documents,
    durations,
    key_checks,
    quantities,
)
from provisioner.api import labels as wk
from provisioner.api.documents import Problem, YamlDocument
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.types import InstanceType, Offering, for_template
from provisioner.sim import catalogs, priority
from provisioner.sim.findings import Findings
from provisioner.sim.gangs import RequestDocuments, capacity_of
from provisioner.sim.kube_documents import OTHER_KINDS, WORKLOAD_KINDS, read_kube_document
from provisioner.sim.loaded import LoadedScenario, ScenarioError
from provisioner.sim.scenario_spec import ReservationSpec, Scenario
from provisioner.state.objects import DaemonSet, Node, Pod, tolerates_all

REQUEST_KINDS = ("ProvisioningRequest", "PodTemplate")
"""Cluster Autoscaler's ProvisioningRequest and the PodTemplates it names (`provisioner.sim.gangs`)."""


def our_kinds() -> tuple[str, ...]:
    """The provisioner.sh kinds a scenario holds: NodePool, the installed plug-ins' NodeClass kinds, Team,
    Department."""
    return ("NodePool", *NODECLASS_KINDS, "Team", "Department")


def all_kinds() -> tuple[str, ...]:
    """Every kind a scenario may hold."""
    return ("Scenario", *our_kinds(), *WORKLOAD_KINDS, *OTHER_KINDS, *REQUEST_KINDS)


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
    out = Findings()
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
            read_kube_document(
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
            nodeclasses[key] = catalogs.default_nodeclass(ref.kind, ref.name, use.zones)
            defaults.add(key)
        per_pool[pool.name] = for_template(
            pool.spec.template.metadata.labels, catalogs.types_for(nodeclasses[key], use.types, use.zones)
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


def _check_reservation(
    out: Findings,
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


def _fill_node(n: Node, by_type: Mapping[str, InstanceType]) -> Node:
    """A Node without capacity gets its instance type's, from the catalog."""
    if n.allocatable:
        return n
    it = by_type.get(n.labels.get(wk.INSTANCE_TYPE, ""))
    if it is None:
        return n
    alloc = dict(it.allocatable)
    alloc.setdefault(quantities.PODS, it.max_pods)
    return replace(n, capacity=dict(it.capacity), allocatable=alloc)


def _ds_pod_on(ds: DaemonSet, node: str) -> Pod:
    return replace(ds.pod, name=f"{ds.name}-{node}", namespace=ds.namespace, node_name=node, phase="Running")
