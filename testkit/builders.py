"""The test builders every test folder uses: instance types and offerings, NodePools, pods, nodes, nodes
with their claims, PDBs, DaemonSets, snapshots, NodeClaims, and the manifests the controller tests apply
to a cluster. Each takes keyword overrides so a test states only what it is about (`node_pool(weight=10)`,
`gpu_pod(gpus=8, gpu_name="h100")`); a folder whose tests share other defaults wraps these with them
(tests/unit/disruption/builders.py, testkit/controllers/world.py) rather than writing its own."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from providers.aws.model import AWSNodeClass
from provisioner.api import NodeClaim, NodePool
from provisioner.api import labels as wk
from provisioner.api.common import NodeClassReference, ObjectMeta, Operator, Requirement
from provisioner.api.nodeclaim import NodeClaimSpec
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, instance_labels
from provisioner.finops.rows import ActionRow, BlockerRow, ReservationRow, UsageRow
from provisioner.scheduling import NewClaim, Results, SolveOptions, solve
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget

GIB = 2**30
MIB = 2**20
ZONES = ("zone-a", "zone-b", "zone-c")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
"""The `now` of the pure tests (planner, ledger rows)."""
LONG_AGO = NOW - timedelta(days=2)
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


def node_pool_manifest(
    name: str = "default",
    *,
    weight: int | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
    taints: Sequence[Mapping[str, Any]] = (),
    startup_taints: Sequence[Mapping[str, Any]] = (),
    limits: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
    expire_after: str | None = None,
    termination_grace_period: str | None = None,
    disruption: Mapping[str, Any] | None = None,
    node_class_ref: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A NodePool as the API holds it; `node_class_ref` default: AWSNodeClass `default`."""
    template_spec: dict[str, Any] = {
        "nodeClassRef": dict(node_class_ref or {"kind": "AWSNodeClass", "name": "default"}),
        "requirements": [dict(r) for r in requirements],
        "taints": [dict(t) for t in taints],
        "startupTaints": [dict(t) for t in startup_taints],
    }
    if expire_after is not None:
        template_spec["expireAfter"] = expire_after
    if termination_grace_period is not None:
        template_spec["terminationGracePeriod"] = termination_grace_period
    spec: dict[str, Any] = {"template": {"metadata": {"labels": dict(labels or {})}, "spec": template_spec}}
    if disruption is not None:
        spec["disruption"] = dict(disruption)
    if limits:
        spec["limits"] = dict(limits)
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "provisioner.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def node_pool(name: str = "default", **kw: Any) -> NodePool:
    """`node_pool_manifest` as the model."""
    return NodePool.model_validate(node_pool_manifest(name, **kw))


def aws_node_class_manifest(name: str = "default", **spec: Any) -> dict[str, Any]:
    """An AWSNodeClass selecting subnets and security groups by a discovery tag; `spec` overrides spec
    fields (camelCase). Any NodeClass will do for the fake cloud, which serves the AWS catalog."""
    fields: dict[str, Any] = {
        "subnetSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
        "securityGroupSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "provisioner-node",
    }
    fields.update(spec)
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "AWSNodeClass",
        "metadata": {"name": name},
        "spec": fields,
    }


def aws_node_class(name: str = "default", **spec: Any) -> AWSNodeClass:
    return AWSNodeClass.model_validate(aws_node_class_manifest(name, **spec))


def req(key: str, operator: str, *values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = [str(v) for v in values]
    return out


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


def claim_of(results: Results, pod_name: str) -> NewClaim | None:
    """The new claim holding the pod, or None."""
    return next((c for c in results.new_claims if any(p.name == pod_name for p in c.pods)), None)


def reasons_of(results: Results, pod_name: str) -> dict[str, str]:
    u = next((u for u in results.unschedulable if u.pod.name == pod_name), None)
    assert u is not None, f"{pod_name} is not unschedulable"
    return {r.nodepool: r.reason for r in u.reasons}


def state_node(
    name: str,
    *,
    pool: str = "default",
    it: InstanceType | None = None,
    capacity_type: str = "on-demand",
    pods: Sequence[Pod] = (),
    created: datetime = LONG_AGO,
    initialized: bool = True,
    price: float | None = None,
    node_annotations: dict[str, str] | None = None,
    claim_annotations: dict[str, str] | None = None,
    last_pod_event: datetime | None = None,
    expire_after: str = "720h",
    deleting: bool = False,
    conditions: Sequence[dict[str, Any]] = (),
    labels: dict[str, str] | None = None,
) -> StateNode:
    """A Ready node of `it` (default `instance_type()`) with its Launched and Registered (and Initialized)
    claim, priced by its offering of `capacity_type`, and `pods` bound to it; `labels` are added to the
    node's."""
    it = it or instance_type()
    offering = next((o for o in it.offerings if o.capacity_type == capacity_type), it.offerings[0])
    the_price = offering.price if price is None else price
    node_labels = {
        **it.labels,
        wk.NODEPOOL: pool,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ZONE: offering.zone,
        wk.HOSTNAME: name,
        **(labels or {}),
    }
    alloc = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in it.allocatable.items()}
    pid = f"fake:///{offering.zone}/{name}"
    node_doc: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": node_annotations or {},
            "creationTimestamp": created.isoformat(),
        },
        "spec": {"providerID": pid},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    if deleting:
        node_doc["metadata"]["deletionTimestamp"] = created.isoformat()
    conds = [
        {"type": "Launched", "status": "True", "lastTransitionTime": created.isoformat()},
        {"type": "Registered", "status": "True", "lastTransitionTime": created.isoformat()},
    ]
    if initialized:
        conds.append({"type": "Initialized", "status": "True", "lastTransitionTime": created.isoformat()})
    conds.extend(conditions)
    claim = NodeClaim.model_validate(
        {
            "metadata": {
                "name": name,
                "labels": {wk.NODEPOOL: pool},
                "annotations": claim_annotations or {},
                "creationTimestamp": created.isoformat(),
            },
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "expireAfter": expire_after,
            },
            "status": {
                "providerID": pid,
                "nodeName": name,
                "instanceType": it.name,
                "zone": offering.zone,
                "capacityType": capacity_type,
                "pricePerHour": the_price,
                "allocatable": alloc,
                "conditions": conds,
                "lastPodEventTime": (last_pod_event or created).isoformat(),
            },
        }
    )
    bound = tuple(_bind(p, name) for p in pods)
    return StateNode(name=name, node=Node.from_dict(node_doc), claim=claim, pods=bound)


def _bind(p: Pod, node: str) -> Pod:
    raw = dict(p.raw)
    raw["spec"] = {**raw["spec"], "nodeName": node}
    raw["status"] = {**(raw.get("status") or {}), "phase": "Running"}
    return Pod.from_dict(raw)


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


def state_snapshot(
    nodes: Sequence[StateNode],
    *,
    pools: Sequence[NodePool] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    """A snapshot of nodes with claims (`state_node`), as the planner reads it; `snapshot` is the
    scheduler's (bare nodes and their pods)."""
    return Snapshot(
        nodes=tuple(nodes),
        pdbs=tuple(pdbs),
        nodepools=tuple(pools),
        namespaces=namespaces or {},
    )


def node_claim(
    name: str = "c",
    options: Sequence[str] | None = None,
    *,
    node_class: NodeClass | None = None,
    capacity_types: Sequence[str] | None = (wk.CAPACITY_TYPE_ON_DEMAND,),
    zones: Sequence[str] | None = None,
    not_zones: Sequence[str] | None = None,
    nodepool: str | None = "default",
) -> NodeClaim:
    """A NodeClaim as the provisioning controller writes it: options cheapest first, capacity types and
    zones as requirements (None: no requirement, any value); `node_class` None refers to AWSNodeClass
    `default`."""
    requirements = []
    if options is not None:
        requirements.append(Requirement(key=wk.INSTANCE_TYPE, operator=Operator.IN, values=list(options)))
    if capacity_types is not None:
        requirements.append(
            Requirement(key=wk.CAPACITY_TYPE, operator=Operator.IN, values=list(capacity_types))
        )
    if zones:
        requirements.append(Requirement(key=wk.ZONE, operator=Operator.IN, values=list(zones)))
    if not_zones is not None:
        requirements.append(Requirement(key=wk.ZONE, operator=Operator.NOT_IN, values=list(not_zones)))
    ref = (
        NodeClassReference(kind=node_class.kind, name=node_class.name)
        if node_class is not None
        else NodeClassReference(kind="AWSNodeClass", name="default")
    )
    return NodeClaim(
        metadata=ObjectMeta(name=name, labels={wk.NODEPOOL: nodepool} if nodepool else {}),
        spec=NodeClaimSpec(node_class_ref=ref, requirements=requirements),
    )


def action_row(
    node: str = "n1",
    *,
    command_id: str = "c1",
    time: datetime = NOW,
    pool: str = "gpu",
    savings: float = 1.5,
    price: float = 2.0,
    **overrides: Any,
) -> ActionRow:
    """A ledger row of a p4d node replaced by a cheaper spot g5 (savings = price - replacement price)."""
    values: dict[str, Any] = dict(
        time=time,
        command_id=command_id,
        action="replace",
        nodepool=pool,
        teams=("research", "vision"),
        node=node,
        instance_type="p4d.24xlarge",
        capacity_type="on-demand",
        zone="us-east-1a",
        reason="Underutilized",
        method="single-node",
        price_per_hour=price,
        replacement_type="g5.xlarge",
        replacement_capacity_type="spot",
        replacement_price_per_hour=price - savings,
        savings_per_hour=savings,
        pods_moved=2,
        pods=("ml/a", "ml/b"),
        detail="",
    )
    values.update(overrides)
    return ActionRow(**values)


def blocker_row(node: str = "z", *, time: datetime = NOW, **overrides: Any) -> BlockerRow:
    """A ledger row of a node a PDB kept in one evaluation."""
    values: dict[str, Any] = dict(
        time=time,
        evaluation_id="e",
        node=node,
        nodepool="gpu",
        kind="PDB",
        method="single-node",
        detail="PDB ml/web",
    )
    values.update(overrides)
    return BlockerRow(**values)


def usage_row(node: str = "n1", *, time: datetime = NOW, **overrides: Any) -> UsageRow:
    """An hour's usage sample of a p4d node with 2 of its 8 GPUs allocated."""
    values: dict[str, Any] = dict(
        time=time,
        hours=1.0,
        node=node,
        nodepool="gpu",
        instance_type="p4d.24xlarge",
        capacity_type="on-demand",
        price_per_hour=32.0,
        cpu_capacity=96000,
        cpu_allocated=8000,
        memory_capacity=1152 * GIB,
        memory_allocated=64 * GIB,
        gpu_capacity=8,
        gpu_allocated=2,
        teams=("research",),
    )
    values.update(overrides)
    return UsageRow(**values)


def reservation_row(
    reservation_id: str = "cr-1", *, time: datetime = NOW, **overrides: Any
) -> ReservationRow:
    """An hour's sample of a 2-instance p5 reservation ($55.04/h each) with one node running, its 8 GPUs
    all requested."""
    values: dict[str, Any] = dict(
        time=time,
        hours=1.0,
        reservation_id=reservation_id,
        kind="default",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        price_per_hour=55.04,
        instances=2,
        running=1,
        used=1.0,
        gpus_per_instance=8,
        gpu_allocated=8,
        nodepools=("h100",),
    )
    values.update(overrides)
    return ReservationRow(**values)
