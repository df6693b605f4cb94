"""The node and node-pool tables, with status and reasons, as Run:ai offers them for download.

A node is Ready, or Not ready with every reason that applies: kubelet not ready, disk, memory or PID
pressure, network unavailable, scheduling disabled (cordoned), and the GPU reasons of `state.gpu_health`
(device plugin missing, fewer GPUs or MIG slices than the type has, MIG layout pending or failed, the GPU
operator's container toolkit or DCGM exporter missing). GPUs are counted as `accelerators.units` does
(any maker; on a MIG node, slices). Built from a snapshot; pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.api import accelerators, mig, quantities
from provisioner.api import labels as wk
from provisioner.finops.reports.text import csv_text, dump, records, table
from provisioner.state import gpu_health
from provisioner.state.cluster import Snapshot, StateNode

_PRESSURES = (
    ("DiskPressure", "disk pressure"),
    ("MemoryPressure", "memory pressure"),
    ("PIDPressure", "PID pressure"),
    ("NetworkUnavailable", "network unavailable"),
)


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    nodepool: str
    status: str
    reasons: tuple[str, ...]
    instance_type: str
    capacity_type: str
    zone: str
    gpu_name: str
    gpus: int
    gpus_allocated: int
    cpu: str
    cpu_requested: str
    memory: str
    memory_requested: str
    pods: int
    price_per_hour: float | None
    managed: bool


@dataclass(frozen=True, slots=True)
class NodePoolRow:
    name: str
    status: str
    reasons: tuple[str, ...]
    nodes: int
    ready: int
    not_ready: int
    in_flight: int
    gpus: int
    gpus_allocated: int
    cpu: str
    memory: str
    price_per_hour: float
    weight: int
    consolidation: str
    labels: tuple[str, ...] = field(default_factory=tuple)
    taints: tuple[str, ...] = field(default_factory=tuple)


def node_reasons(node: StateNode, operator: frozenset[str] = frozenset()) -> tuple[str, ...]:
    if node.node is None:
        return ("not registered yet",)
    reasons = []
    conditions = node.node.conditions
    ready = conditions.get("Ready")
    if ready is None or ready[0] != "True":
        why = (
            ready[1] if ready and ready[1] else ("no Ready condition" if ready is None else ready[0].lower())
        )
        reasons.append(f"kubelet not ready ({why})")
    for kind, words in _PRESSURES:
        if conditions.get(kind, ("False", ""))[0] == "True":
            reasons.append(words)
    if node.node.unschedulable:
        reasons.append("scheduling disabled")
    reasons.extend(gpu_health.gpu_reasons(node, operator))
    return tuple(reasons)


def node_rows(snapshot: Snapshot, *, pool: str | None = None) -> list[NodeRow]:
    rows = []
    operator = gpu_health.operator_daemonsets(snapshot.daemonsets)
    for node in snapshot.nodes:
        if pool is not None and node.nodepool != pool:
            continue
        reasons = node_reasons(node, operator)
        alloc = node.allocatable
        used = node.requested
        labels = node.labels
        rows.append(
            NodeRow(
                name=node.name,
                nodepool=node.nodepool or "",
                status="Ready" if not reasons else "Not ready",
                reasons=reasons,
                instance_type=labels.get(wk.INSTANCE_TYPE, ""),
                capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
                zone=labels.get(wk.ZONE, ""),
                gpu_name=_gpu_name(labels),
                gpus=max(accelerators.units(alloc), gpu_health.expected_units(node)),
                gpus_allocated=accelerators.units(used),
                cpu=quantities.format_quantity(quantities.CPU, alloc.get(quantities.CPU, 0)),
                cpu_requested=quantities.format_quantity(quantities.CPU, used.get(quantities.CPU, 0)),
                memory=quantities.format_quantity(quantities.MEMORY, alloc.get(quantities.MEMORY, 0)),
                memory_requested=quantities.format_quantity(
                    quantities.MEMORY, used.get(quantities.MEMORY, 0)
                ),
                pods=sum(1 for p in node.pods if not p.is_terminal),
                price_per_hour=node.price if node.claim is not None else None,
                managed=node.managed,
            )
        )
    return rows


def _gpu_name(labels: Mapping[str, str]) -> str:
    """`h100`, or `h100 all-1g.10gb` on a MIG node (its layout: the GPU columns count its slices)."""
    name = labels.get(wk.GPU_NAME, "")
    layout = mig.layout_of(labels)
    return f"{name} {layout}" if name and layout else name


def nodepool_rows(snapshot: Snapshot) -> list[NodePoolRow]:
    nodes = node_rows(snapshot)
    rows = []
    for pool in snapshot.nodepools:
        mine = [n for n in nodes if n.nodepool == pool.name]
        in_flight = sum(1 for n in snapshot.nodes if n.nodepool == pool.name and n.node is None)
        registered = [n for n in mine if "not registered yet" not in n.reasons]
        ready = sum(1 for n in registered if n.status == "Ready")
        not_ready = len(registered) - ready
        cpu = sum(quantities.to_base_units("cpu", n.cpu) for n in registered)
        memory = sum(quantities.to_base_units("memory", n.memory) for n in registered)
        reasons: list[str] = []
        if not_ready:
            reasons.append(f"{not_ready} node(s) not ready")
        ref = pool.spec.template.spec.node_class_ref
        if snapshot.nodeclasses and (ref.kind, ref.name) not in snapshot.nodeclasses:
            reasons.append(f"{ref.kind} {ref.name} not found")
        status = pool.status
        if status is not None:
            for cond in status.conditions:
                if cond.status.value != "True" and cond.type in ("Ready", "NodeClassReady"):
                    reasons.append(f"{cond.type}: {cond.reason or cond.message or cond.status.value}")
                if cond.type == "LimitsReached" and cond.status.value == "True":
                    reasons.append("limits reached")
        rows.append(
            NodePoolRow(
                name=pool.name,
                status="Ready" if not reasons else "Not ready",
                reasons=tuple(reasons),
                nodes=len(registered),
                ready=ready,
                not_ready=not_ready,
                in_flight=in_flight,
                gpus=sum(n.gpus for n in registered),
                gpus_allocated=sum(n.gpus_allocated for n in registered),
                cpu=quantities.format_quantity("cpu", cpu),
                memory=quantities.format_quantity("memory", memory),
                price_per_hour=round(sum(n.price_per_hour or 0.0 for n in registered), 4),
                weight=pool.weight,
                consolidation=pool.spec.disruption.consolidation_policy.value,
                labels=tuple(f"{k}={v}" for k, v in sorted(pool.spec.template.metadata.labels.items())),
                taints=tuple(
                    f"{t.key}{'=' + t.value if t.value else ''}:{t.effect.value}"
                    for t in pool.spec.template.spec.taints
                ),
            )
        )
    return rows


NODE_COLUMNS = (
    ("name", "Name"),
    ("nodepool", "NodePool"),
    ("status", "Status"),
    ("reasons", "Reasons"),
    ("instance_type", "Instance type"),
    ("capacity_type", "Capacity type"),
    ("zone", "Zone"),
    ("gpu", "GPU"),
    ("gpus", "GPUs"),
    ("gpus_allocated", "GPUs allocated"),
    ("cpu", "CPU"),
    ("cpu_requested", "CPU requested"),
    ("memory", "Memory"),
    ("memory_requested", "Memory requested"),
    ("pods", "Pods"),
    ("price_per_hour", "$/h"),
)
"""(CSV column, and its JSON key in camelCase; header in words for the table)."""
NODE_HEADERS = tuple(k for k, _ in NODE_COLUMNS)

POOL_COLUMNS = (
    ("name", "Name"),
    ("status", "Status"),
    ("reasons", "Reasons"),
    ("nodes", "Nodes"),
    ("ready", "Ready"),
    ("not_ready", "Not ready"),
    ("in_flight", "In flight"),
    ("gpus", "GPUs"),
    ("gpus_allocated", "GPUs allocated"),
    ("cpu", "CPU"),
    ("memory", "Memory"),
    ("price_per_hour", "$/h"),
    ("weight", "Weight"),
    ("consolidation", "Consolidation"),
    ("labels", "Labels"),
    ("taints", "Taints"),
)
POOL_HEADERS = tuple(k for k, _ in POOL_COLUMNS)


def _node_values(r: NodeRow) -> list[Any]:
    return [
        r.name,
        r.nodepool or "-",
        r.status,
        "; ".join(r.reasons) or "-",
        r.instance_type,
        r.capacity_type,
        r.zone,
        r.gpu_name or "-",
        r.gpus,
        r.gpus_allocated,
        r.cpu,
        r.cpu_requested,
        r.memory,
        r.memory_requested,
        r.pods,
        r.price_per_hour,
    ]


def _pool_values(r: NodePoolRow) -> list[Any]:
    return [
        r.name,
        r.status,
        "; ".join(r.reasons) or "-",
        r.nodes,
        r.ready,
        r.not_ready,
        r.in_flight,
        r.gpus,
        r.gpus_allocated,
        r.cpu,
        r.memory,
        r.price_per_hour,
        r.weight,
        r.consolidation,
        ", ".join(r.labels) or "-",
        ", ".join(r.taints) or "-",
    ]


def render_nodes(rows: Sequence[NodeRow], *, fmt: str, width: int | None = None) -> str:
    """`table` (headers in words), `csv` (snake_case columns) or the records for `json`/`yaml`."""
    values = [_node_values(r) for r in rows]
    return _render(NODE_COLUMNS, values, fmt=fmt, width=width)


def render_nodepools(rows: Sequence[NodePoolRow], *, fmt: str, width: int | None = None) -> str:
    values = [_pool_values(r) for r in rows]
    return _render(POOL_COLUMNS, values, fmt=fmt, width=width)


def _render(
    columns: Sequence[tuple[str, str]], values: list[list[Any]], *, fmt: str, width: int | None
) -> str:
    keys = [k for k, _ in columns]
    if fmt == "csv":
        return csv_text(keys, values)
    if fmt in ("json", "yaml"):
        return dump(records(keys, values), fmt)
    return table([h for _, h in columns], values, width=width) + "\n"
