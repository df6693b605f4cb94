"""Builders for scheduling tests: pods, pools, instance types and nodes with overrides, so each test
states only what it is about (`node_pool(weight=10)`, `gpu_pod(gpus=8, gpu_name="h100")`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, instance_labels
from provisioner.scheduling import Results, SolveOptions, solve
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod

GIB = 2**30
MIB = 2**20
ZONES = ("zone-a", "zone-b", "zone-c")
_names = itertools.count(1)


def offerings(
    *,
    od_price: float,
    spot_price: float | None = None,
    zones: Sequence[str] = ZONES,
    unavailable: Iterable[tuple[str, str]] = (),
) -> tuple[Offering, ...]:
    """Spot (if priced) and on-demand in each zone; `unavailable` lists (zone, capacity type) stockouts."""
    gone = set(unavailable)
    out: list[Offering] = []
    for z in zones:
        if spot_price is not None:
            out.append(Offering(z, wk.CAPACITY_TYPE_SPOT, spot_price, (z, wk.CAPACITY_TYPE_SPOT) not in gone))
        out.append(
            Offering(z, wk.CAPACITY_TYPE_ON_DEMAND, od_price, (z, wk.CAPACITY_TYPE_ON_DEMAND) not in gone)
        )
    return tuple(out)


def instance_type(
    name: str = "m.large",
    *,
    cpu: int = 4,
    memory_gib: int = 16,
    pods: int = 110,
    gpus: int = 0,
    gpu_name: str = "a100",
    gpu_memory_mib: int = 40960,
    price: float | None = None,
    spot_price: float | None = None,
    zones: Sequence[str] = ZONES,
    unavailable: Iterable[tuple[str, str]] = (),
    overhead_cpu_m: int = 100,
    overhead_memory_mib: int = 100,
    offers: tuple[Offering, ...] | None = None,
    extra: Mapping[str, int] | None = None,
) -> InstanceType:
    gpu = GPU(gpu_name, gpus, gpu_memory_mib) if gpus else None
    capacity = {"cpu": cpu * 1000, "memory": memory_gib * GIB, "pods": pods}
    if gpus:
        capacity[wk.GPU_RESOURCE] = gpus
    capacity.update(extra or {})
    od = price if price is not None else 0.05 * cpu + 0.005 * memory_gib + 2.0 * gpus
    return InstanceType(
        name=name,
        capacity=capacity,
        overhead={"cpu": overhead_cpu_m, "memory": overhead_memory_mib * MIB},
        offerings=offers
        if offers is not None
        else offerings(od_price=od, spot_price=spot_price, zones=zones, unavailable=unavailable),
        labels=instance_labels(name=name, vcpu=cpu, memory_mib=memory_gib * 1024, gpu=gpu),
        gpu=gpu,
    )


def cpu_types() -> list[InstanceType]:
    return [
        instance_type("m.large", cpu=2, memory_gib=8, spot_price=0.04),
        instance_type("m.xlarge", cpu=4, memory_gib=16, spot_price=0.08),
        instance_type("m.2xlarge", cpu=8, memory_gib=32, spot_price=0.16),
        instance_type("m.4xlarge", cpu=16, memory_gib=64, spot_price=0.32),
    ]


def gpu_types() -> list[InstanceType]:
    return [
        instance_type("g.l4x1", cpu=8, memory_gib=32, gpus=1, gpu_name="l4", gpu_memory_mib=24576, price=0.8),
        instance_type(
            "g.l4x4", cpu=48, memory_gib=192, gpus=4, gpu_name="l4", gpu_memory_mib=24576, price=4.6
        ),
        instance_type("p.a100x8", cpu=96, memory_gib=1152, gpus=8, gpu_name="a100", price=32.0),
        instance_type(
            "p.h100x8", cpu=192, memory_gib=2048, gpus=8, gpu_name="h100", gpu_memory_mib=81920, price=55.0
        ),
    ]


def node_pool(
    name: str = "default",
    *,
    weight: int | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
    taints: Sequence[Mapping[str, Any]] = (),
    startup_taints: Sequence[Mapping[str, Any]] = (),
    limits: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> NodePool:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "requirements": [dict(r) for r in requirements],
                "taints": [dict(t) for t in taints],
                "startupTaints": [dict(t) for t in startup_taints],
            },
        },
    }
    if limits:
        spec["limits"] = dict(limits)
    if weight is not None:
        spec["weight"] = weight
    return NodePool.model_validate({"metadata": {"name": name}, "spec": spec})


def req(key: str, operator: str, *values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = [str(v) for v in values]
    return out


def pod(
    name: str | None = None,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
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
) -> Pod:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[wk.GPU_RESOURCE] = str(gpus)
    requests.update(extra_requests or {})
    ann = dict(annotations or {})
    if pools:
        ann[wk.NODEPOOLS] = ",".join(pools)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": requests}}],
        "initContainers": [dict(c) for c in init_containers],
        "tolerations": [dict(t) for t in tolerations],
        "topologySpreadConstraints": [dict(s) for s in spread],
        "nodeSelector": dict(node_selector or {}),
    }
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
    return Pod.from_dict(
        {
            "metadata": {
                "name": name or f"pod-{next(_names)}",
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": ann,
            },
            "spec": spec,
        }
    )


def gpu_pod(name: str | None = None, *, gpus: int = 8, gpu_name: str | None = "h100", **kw: Any) -> Pod:
    """A pod asking for `gpus` GPUs of a model (through the gpu-name node selector), tolerating GPU taints."""
    selector = dict(kw.pop("node_selector", None) or {})
    if gpu_name:
        selector[wk.GPU_NAME] = gpu_name
    tolerations = [*list(kw.pop("tolerations", ())), {"key": wk.GPU_RESOURCE, "operator": "Exists"}]
    kw.setdefault("cpu", "4")
    kw.setdefault("memory", "16Gi")
    return pod(name, gpus=gpus, node_selector=selector, tolerations=tolerations, **kw)


def spread(key: str = wk.ZONE, *, app: str, max_skew: int = 1, hard: bool = True) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": app}},
    }


def term(key: str = wk.HOSTNAME, *, app: str) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def node(
    name: str = "node-1",
    *,
    cpu: int = 4,
    memory_gib: int = 16,
    pods_cap: int = 110,
    gpus: int = 0,
    zone: str = "zone-a",
    pool: str | None = "default",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    cordoned: bool = False,
    instance: str = "m.xlarge",
    capacity_type: str = "on-demand",
) -> Node:
    alloc = {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "pods": str(pods_cap)}
    if gpus:
        alloc[wk.GPU_RESOURCE] = str(gpus)
    all_labels = {
        wk.ZONE: zone,
        wk.HOSTNAME: name,
        wk.INSTANCE_TYPE: instance,
        wk.CAPACITY_TYPE: capacity_type,
    }
    if pool:
        all_labels[wk.NODEPOOL] = pool
    all_labels.update(labels or {})
    return Node.from_dict(
        {
            "metadata": {"name": name, "labels": all_labels},
            "spec": {"taints": [dict(t) for t in taints], "unschedulable": cordoned},
            "status": {"capacity": alloc, "allocatable": alloc},
        }
    )


def snapshot(
    nodes: Sequence[tuple[Node, Sequence[Pod]]] = (), daemonsets: Sequence[DaemonSet] = ()
) -> Snapshot:
    return Snapshot(
        nodes=tuple(StateNode(name=n.name, node=n, pods=tuple(p)) for n, p in nodes),
        daemonsets=tuple(daemonsets),
    )


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


def run(
    pods: Sequence[Pod],
    pools: Sequence[NodePool] | NodePool | None = None,
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]] | None = None,
    *,
    snap: Snapshot | None = None,
    daemonsets: Sequence[DaemonSet] | None = None,
    options: SolveOptions | None = None,
) -> Results:
    """Solve with defaults: one `default` pool over `cpu_types()`."""
    if pools is None:
        pools = [node_pool()]
    elif isinstance(pools, NodePool):
        pools = [pools]
    if types is None:
        types = cpu_types()
    per_pool = types if isinstance(types, Mapping) else {p.name: list(types) for p in pools}
    return solve(
        pods,
        snap or snapshot(),
        pools=pools,
        instance_types=per_pool,
        daemonsets=daemonsets,
        options=options,
    )


def claim_of(results: Results, pod_name: str):
    """The new claim holding the pod, or None."""
    return next((c for c in results.new_claims if any(p.name == pod_name for p in c.pods)), None)


def reasons_of(results: Results, pod_name: str) -> dict[str, str]:
    u = next((u for u in results.unschedulable if u.pod.name == pod_name), None)
    assert u is not None, f"{pod_name} is not unschedulable"
    return {r.nodepool: r.reason for r in u.reasons}
