"""Builders for quota tests: teams, departments and their quotas, and snapshots of pools with running pods;
pools and pods wrap testkit/builders.py with the defaults a team's GPU pod has."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from provisioner.api import Department, NodePool, Team
from provisioner.api import labels as wk
from provisioner.quota.book import QuotaBook
from provisioner.state import Snapshot
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Node, Pod
from testkit import builders as base

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def node_pool(name: str, *, gpus: int | None = None, weight: int | None = None, taints: Any = ()) -> NodePool:
    return base.node_pool(
        name, weight=weight, taints=taints, limits={wk.GPU_RESOURCE: str(gpus)} if gpus is not None else None
    )


def quota(pool: str, gpus: int, *, over: bool = True, weight: int = 1, **more: str) -> dict[str, Any]:
    return {
        "nodePool": pool,
        "resources": {wk.GPU_RESOURCE: str(gpus), **more},
        "overQuota": over,
        "overQuotaWeight": weight,
    }


def team(
    name: str, *quotas: dict[str, Any], department: str | None = None, default: tuple[str, ...] = ()
) -> Team:
    spec: dict[str, Any] = {"namespaces": [name], "quotas": list(quotas), "defaultNodePools": list(default)}
    if department:
        spec["department"] = department
    return Team.model_validate({"metadata": {"name": name}, "spec": spec})


def department(name: str, *quotas: dict[str, Any]) -> Department:
    entries = [{k: v for k, v in q.items() if k != "overQuotaWeight"} for q in quotas]
    return Department.model_validate({"metadata": {"name": name}, "spec": {"quotas": entries}})


def pod(
    name: str,
    namespace: str,
    *,
    gpus: int = 1,
    preemptible: bool = False,
    priority: int = 0,
    gated: bool = True,
    pinned: str | None = None,
    pools: tuple[str, ...] = (),
    minute: int = 0,
    tolerate_gpu: bool = True,
) -> Pod:
    """`testkit.builders.pod_manifest` as a team's pod: gated unless `gated=False`, created `minute` after T0."""
    doc = base.pod_manifest(
        name,
        namespace=namespace,
        gpus=gpus,
        priority=priority,
        labels={wk.PREEMPTIBLE: "true"} if preemptible else {},
        node_selector={wk.NODEPOOL: pinned} if pinned else None,
        tolerations=[{"key": wk.GPU_RESOURCE, "operator": "Exists"}] if tolerate_gpu else (),
        pools=pools,
    )
    if gated:
        doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    doc["metadata"]["creationTimestamp"] = (T0 + timedelta(minutes=minute)).isoformat()
    return Pod.from_dict(doc)


def snapshot(
    pools: list[NodePool],
    *,
    pending: Sequence[Pod] = (),
    running: dict[str, list[Pod]] | None = None,
) -> Snapshot:
    """`running`: pool name -> pods bound to one node of that pool."""
    nodes = tuple(
        StateNode(name=f"node-{p}", node=Node(name=f"node-{p}", labels={wk.NODEPOOL: p}), pods=tuple(pods))
        for p, pods in sorted((running or {}).items())
    )
    return Snapshot(nodes=nodes, pending_pods=tuple(pending), nodepools=tuple(pools))


def book(snap: Snapshot, teams: list[Team], departments: Sequence[Department] = ()) -> QuotaBook:
    return QuotaBook(teams=teams, departments=departments, nodepools=snap.nodepools, namespaces={})
