"""The Kubernetes documents of a scenario, checked and read: Pods; Deployments, ReplicaSets, StatefulSets
and Jobs, expanded to their pods; Nodes, DaemonSets, PodDisruptionBudgets and Namespaces; and the
`sim.provisioner.sh/runs-for` pod annotation. The scenario loader reads its documents with
`read_kube_document`, and the timeline the manifests its steps apply. Our own kinds, the Scenario document
and ProvisioningRequests are read elsewhere (`provisioner.api.documents`, `provisioner.sim.scenario`,
`provisioner.sim.gangs`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from provisioner.api import durations, quantities
from provisioner.api.documents import YamlDocument
from provisioner.sim import priority
from provisioner.sim.findings import Findings
from provisioner.state.objects import DaemonSet, Node, Pod

WORKLOAD_KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job")
OTHER_KINDS = ("Node", "DaemonSet", "Namespace", "PodDisruptionBudget", "PriorityClass")
MAX_REPLICAS = 100_000


RUNS_FOR = "sim.provisioner.sh/runs-for"
"""Pod annotation, for simulations with time: the pod finishes this long after it starts running (a
duration such as `8h`), and its Job does not create it again. Ignored without time."""


def _check_runs_for(doc: YamlDocument, out: Findings, meta: Any, base: tuple[str | int, ...]) -> bool:
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(RUNS_FOR) if isinstance(annotations, dict) else None
    if value is None:
        return True
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
    doc: YamlDocument, out: Findings, data: Mapping[str, Any], kind: str
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
    out: Findings,
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


def read_kube_document(
    doc: YamlDocument,
    kind: str,
    out: Findings,
    *,
    pods: list[Pod],
    nodes: list[Node],
    daemonsets: list[DaemonSet],
    pdb_documents: list[dict[str, Any]],
    namespaces: dict[str, dict[str, str]],
    priorities: priority.PriorityClasses | None = None,
) -> None:
    """Check one Kubernetes document of `kind` (of `WORKLOAD_KINDS` or `OTHER_KINDS`; its `metadata.name` already checked) and
    add what it holds to the lists given: a workload adds its pods, named `NAME-0`, `NAME-1`... Problems go
    to `out`, located at the field they concern; a document with one adds nothing."""
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


def _check_pdb(doc: YamlDocument, out: Findings, spec: Any) -> bool:
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
