"""Builders for workloads: pods and their manifests (`pod(cpu=...)`, `gpu_pod(gpus=8)`, gangs), topology
spread and affinity terms, DaemonSets, and PodDisruptionBudgets with their manifests."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from provisioner.api import labels as wk
from provisioner.state.objects import DaemonSet, Pod, PodDisruptionBudget

_names = itertools.count(1)


def pod_manifest(
    name: str | None = None,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    gpu_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[Sequence[Mapping[str, Any]]] = (),
    preferred: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] = (),
    tolerations: Sequence[Mapping[str, Any]] = (),
    spread: Sequence[Mapping[str, Any]] = (),
    affinity: Sequence[Mapping[str, Any]] = (),
    anti_affinity: Sequence[Mapping[str, Any]] = (),
    preferred_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    preferred_anti_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    init_containers: Sequence[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
    pools: Sequence[str] = (),
    extra_requests: Mapping[str, str] | None = None,
    node_name: str | None = None,
    owner: str | None = None,
    owner_name: str | None = None,
    priority: int | None = None,
    started: datetime | None = None,
) -> dict[str, Any]:
    """A Pod as the API holds it: one container asking for cpu, memory and `gpus` (requests = limits for
    GPUs), Running when `node_name` binds it, else Pending. `gpu_name` adds the gpu-name node selector;
    `owner` a controller ownerReference (named `owner_name`, default `<name>-owner`); `started` its
    `status.startTime`."""
    name = name or f"pod-{next(_names)}"
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        requests[wk.GPU_RESOURCE] = str(gpus)
        limits[wk.GPU_RESOURCE] = str(gpus)
    requests.update(extra_requests or {})
    ann = dict(annotations or {})
    if pools:
        ann[wk.NODEPOOLS] = ",".join(pools)
    selector = dict(node_selector or {})
    if gpu_name:
        selector[wk.GPU_NAME] = gpu_name
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": limits}}
        ],
        "initContainers": [dict(c) for c in init_containers],
        "tolerations": [dict(t) for t in tolerations],
        "topologySpreadConstraints": [dict(s) for s in spread],
        "nodeSelector": selector,
    }
    if priority is not None:
        spec["priority"] = priority
    if overhead:
        spec["overhead"] = dict(overhead)
    if node_name:
        spec["nodeName"] = node_name
    affinity_doc: dict[str, Any] = {}
    if required or preferred:
        na: dict[str, Any] = {}
        if required:
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": [dict(e) for e in term]} for term in required]
            }
        if preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "preference": {"matchExpressions": [dict(e) for e in exprs]}}
                for w, exprs in preferred
            ]
        affinity_doc["nodeAffinity"] = na
    if affinity or preferred_affinity:
        affinity_doc["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [dict(t) for t in affinity],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": dict(t)} for w, t in preferred_affinity
            ],
        }
    if anti_affinity or preferred_anti_affinity:
        affinity_doc["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [dict(t) for t in anti_affinity],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": dict(t)} for w, t in preferred_anti_affinity
            ],
        }
    if affinity_doc:
        spec["affinity"] = affinity_doc
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": ann,
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "kind": owner,
                "name": owner_name or f"{name}-owner",
                "controller": True,
                "apiVersion": "apps/v1",
                "uid": "x",
            }
        ]
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if started is not None:
        status["startTime"] = started.isoformat()
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pod(name: str | None = None, **kw: Any) -> Pod:
    """`pod_manifest` read as the state holds it."""
    return Pod.from_dict(pod_manifest(name, **kw))


def gpu_pod(name: str | None = None, *, gpus: int = 8, gpu_name: str | None = "h100", **kw: Any) -> Pod:
    """A pod asking for `gpus` GPUs of a model (through the gpu-name node selector), tolerating GPU taints."""
    selector = dict(kw.pop("node_selector", None) or {})
    if gpu_name:
        selector[wk.GPU_NAME] = gpu_name
    tolerations = [*list(kw.pop("tolerations", ())), {"key": wk.GPU_RESOURCE, "operator": "Exists"}]
    kw.setdefault("cpu", "4")
    kw.setdefault("memory", "16Gi")
    return pod(name, gpus=gpus, node_selector=selector, tolerations=tolerations, **kw)


def gang_pods(
    group: str = "train", count: int = 4, *, total: int | None = None, gpus: int = 8, **kw: Any
) -> list[Pod]:
    """`count` pods of a Kueue plain pod group (`kueue.x-k8s.io/pod-group-name`), the group's size
    `total` (default `count`) in `kueue.x-k8s.io/pod-group-total-count`; GPU pods of `gpus` each."""
    labels = {**(kw.pop("labels", None) or {}), wk.KUEUE_POD_GROUP_NAME: group}
    annotations = {
        **(kw.pop("annotations", None) or {}),
        wk.KUEUE_POD_GROUP_TOTAL_COUNT: str(total if total is not None else count),
    }
    return [
        gpu_pod(f"{group}-{i}", gpus=gpus, labels=labels, annotations=annotations, **kw) for i in range(count)
    ]


def spread(key: str = wk.ZONE, *, app: str, max_skew: int = 1, hard: bool = True) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": app}},
    }


def term(key: str = wk.HOSTNAME, *, app: str) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def daemonset(name: str = "agent", *, cpu: str = "500m", memory: str = "512Mi", **pod_kw: Any) -> DaemonSet:
    template = pod(name, cpu=cpu, memory=memory, **pod_kw)
    return DaemonSet.from_dict(
        {
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {
                "template": {"metadata": {"labels": dict(template.labels)}, "spec": template.raw["spec"]}
            },
        }
    )


def pdb(name: str, **kw: Any) -> PodDisruptionBudget:
    """`pdb_manifest` as the state holds it."""
    return PodDisruptionBudget.from_dict(pdb_manifest(name, **kw))


def pdb_manifest(
    name: str,
    *,
    match: Mapping[str, str],
    namespace: str = "default",
    min_available: str | int | None = None,
    max_unavailable: str | int | None = None,
    disruptions_allowed: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(match)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if disruptions_allowed is not None:
        doc["status"] = {"disruptionsAllowed": disruptions_allowed}
    return doc
