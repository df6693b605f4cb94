"""MemoryCluster: a ClusterAPI that applies writes straight into a ClusterState, with no API server.

Unit tests and `provisioner simulate` use it; it keeps Kubernetes' rules that the controllers rely on:
finalizers hold a deleted object (deletionTimestamp set) until the last one is removed, merge patches,
status patches, PDB-checked evictions, and Events kept in a list for assertions and reports.

A patched object shares its unchanged parts with the one it replaces (`merge_patch` copies only what it
changes): the objects' `raw` documents are read, never written in place. A NodeClaim is validated once,
when created; a patch (the controllers' own writes, which every status change is) validates only the
fields it sets (`merged`), and the new claim shares the rest with the old one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel

from provisioner.api import NodeClaim
from provisioner.clock import Clock, isoformat
from provisioner.clusterapi.port import ConflictError, EvictionBlocked, NotFoundError, merge_patch
from provisioner.state import ClusterState
from provisioner.state.objects import Pod, PodDisruptionBudget


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    kind: str
    name: str
    namespace: str | None
    reason: str
    message: str
    type: str
    time: datetime


def disruptions_allowed(pdb: PodDisruptionBudget, pods: list[Pod]) -> int:
    """How many of the PDB's pods may go now: the API server's status when known, else computed from the
    matching running pods (healthy = bound and not terminating)."""
    if pdb.disruptions_allowed is not None:
        return pdb.disruptions_allowed
    matching = [p for p in pods if pdb.matches(p)]
    healthy = sum(1 for p in matching if p.node_name and not p.deleting and not p.is_terminal)
    expected = len(matching)

    def count(value: str) -> int:
        if value.endswith("%"):
            return -(-expected * int(value[:-1]) // 100)
        return int(value)

    if pdb.min_available is not None:
        return max(0, healthy - count(pdb.min_available))
    if pdb.max_unavailable is not None:
        unavailable = expected - healthy
        return max(0, count(pdb.max_unavailable) - unavailable)
    return healthy


class MemoryCluster:
    """ClusterAPI over a ClusterState. `clock` stamps deletions and Events."""

    def __init__(self, state: ClusterState, clock: Clock) -> None:
        self.state = state
        self.clock = clock
        self.events: list[RecordedEvent] = []
        self.evictions: list[str] = []
        # The state's own lock: a read-modify-write (a patch, a PDB-checked eviction) is one moment for
        # every other reader and writer of the state.
        self._lock = state.lock

    # NodeClaims

    def create_nodeclaim(self, claim: NodeClaim) -> NodeClaim:
        with self._lock:
            if claim.name in self.state.claims:
                raise ConflictError(f"NodeClaim {claim.name} already exists")
            doc = claim.to_dict()
            doc["metadata"].setdefault("creationTimestamp", isoformat(self.clock.now()))
            self.state.upsert("NodeClaim", doc)
            return self.state.claims[claim.name]

    def _claim(self, name: str) -> NodeClaim:
        claim = self.state.claims.get(name)
        if claim is None:
            raise NotFoundError(f"NodeClaim {name} not found")
        return claim

    def _store_claim(self, claim: NodeClaim) -> None:
        """Keep a patched claim, or drop it once deleted with no finalizer left (every claim the embedded
        cluster forgets goes through here)."""
        if claim.metadata.deletion_timestamp is not None and not claim.metadata.finalizers:
            self.state.remove("NodeClaim", claim.name)
        else:
            self.state.put_claim(claim)

    def patch_nodeclaim(self, name: str, patch: Mapping[str, Any]) -> None:
        with self._lock:
            claim = self._claim(name)
            self._store_claim(merged(claim, {k: v for k, v in patch.items() if k != "status"}))

    def refresh(self, kind: str, name: str) -> None:
        # The state is the server: nothing is staler than it.
        if (self.state.claims if kind == "NodeClaim" else self.state.nodes).get(name) is None:
            raise NotFoundError(f"{kind} {name} not found")

    def patch_nodeclaim_status(self, name: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            self._store_claim(merged(self._claim(name), {"status": status}))

    def delete_nodeclaim(self, name: str) -> None:
        with self._lock:
            claim = self._claim(name)
            meta: dict[str, Any] = {}
            if not claim.metadata.finalizers:
                meta = {"deletionTimestamp": isoformat(self.clock.now()), "finalizers": []}
            elif claim.metadata.deletion_timestamp is None:
                meta = {"deletionTimestamp": isoformat(self.clock.now())}
            self._store_claim(merged(claim, {"metadata": meta}))

    # Nodes and pods

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        with self._lock:
            node = self.state.nodes.get(name)
            if node is None:
                raise NotFoundError(f"Node {name} not found")
            self.state.upsert("Node", merge_patch(node.raw, patch))

    def delete_node(self, name: str) -> None:
        with self._lock:
            if name not in self.state.nodes:
                raise NotFoundError(f"Node {name} not found")
            self.state.remove("Node", name)

    def evict_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            key = f"{namespace}/{name}"
            pod = self.state.pods.get(key)
            if pod is None:
                raise NotFoundError(f"Pod {key} not found")
            # The pods are read only for a PDB that covers this one: a drain of a large cluster evicts
            # thousands, and a copy of every pod per eviction made it quadratic.
            covering = [pdb for pdb in self.state.pdbs.values() if pdb.matches(pod)]
            pods = list(self.state.pods.values()) if covering else []
            for pdb in covering:
                if disruptions_allowed(pdb, pods) <= 0:
                    raise EvictionBlocked(
                        f"Cannot evict pod {key}: it would violate the pod's disruption budget {pdb.name}"
                    )
            self.evictions.append(key)
            self.state.remove("Pod", key)

    def delete_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            key = f"{namespace}/{name}"
            if key not in self.state.pods:
                raise NotFoundError(f"Pod {key} not found")
            self.state.remove("Pod", key)

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        with self._lock:
            pod = self._pod(namespace, name)
            self.state.upsert("Pod", merge_patch(pod.raw, {k: v for k, v in patch.items() if k != "status"}))

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            pod = self._pod(namespace, name)
            self.state.upsert("Pod", merge_patch(pod.raw, {"status": status}))

    def _pod(self, namespace: str, name: str) -> Pod:
        pod = self.state.pods.get(f"{namespace}/{name}")
        if pod is None:
            raise NotFoundError(f"Pod {namespace}/{name} not found")
        return pod

    # NodePools, Teams, Departments and Events

    def patch_nodepool_status(self, name: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            pool = self.state.nodepools.get(name)
            if pool is None:
                raise NotFoundError(f"NodePool {name} not found")
            self.state.upsert("NodePool", merge_patch(pool.to_dict(), {"status": status}))

    def patch_quota_status(self, kind: str, name: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            store: Mapping[str, Any] = self.state.teams if kind == "Team" else self.state.departments
            current = store.get(name)
            if current is None:
                raise NotFoundError(f"{kind} {name} not found")
            self.state.upsert(kind, merge_patch(current.to_dict(), {"status": status}))

    def patch_provisioning_request(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self._patch_provisioning_request(namespace, name, patch)

    def patch_provisioning_request_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self._patch_provisioning_request(namespace, name, {"status": status})

    def _patch_provisioning_request(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        with self._lock:
            current = self.state.provisioning_requests.get(f"{namespace}/{name}")
            if current is None:
                raise NotFoundError(f"ProvisioningRequest {namespace}/{name} not found")
            self.state.upsert("ProvisioningRequest", merge_patch(current.to_dict(), patch))

    def record_event(
        self,
        *,
        kind: str,
        name: str,
        namespace: str | None = None,
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> None:
        with self._lock:
            self.events.append(
                RecordedEvent(
                    kind=kind,
                    name=name,
                    namespace=namespace,
                    reason=reason,
                    message=message,
                    type=type,
                    time=self.clock.now(),
                )
            )


M = TypeVar("M", bound=BaseModel)


@cache
def _field_names(model: type[BaseModel]) -> dict[str, str]:
    """JSON key (alias, or the field's own name) -> field name."""
    out: dict[str, str] = {}
    for name, info in model.model_fields.items():
        out[name] = name
        if info.alias:
            out[info.alias] = name
    return out


def merged(model: M, patch: Mapping[str, Any]) -> M:
    """`model` with a JSON merge patch applied: what validating its merged JSON gives, but validating only
    the fields the patch sets (a nested model's fields in turn) and sharing the rest with `model`, which
    was validated when stored. A value a field refuses raises pydantic's ValidationError (a ValueError).
    A patch key no field has, or a required field removed, validates the whole merged JSON instead."""
    cls = type(model)
    fields = _field_names(cls)
    infos = cls.__pydantic_fields__
    for key, value in patch.items():
        if key not in fields or (value is None and infos[fields[key]].is_required()):
            return cls.model_validate(
                merge_patch(model.model_dump(by_alias=True, exclude_none=True, mode="json"), patch)
            )
    out = model.model_copy()
    validator = cls.__pydantic_validator__
    for key, value in patch.items():
        name = fields[key]
        current = getattr(model, name)
        # `type(...) is dict` first: patches are JSON, and an ABC's isinstance is slow (a claim's life is
        # a dozen status patches, thousands of claims a large run).
        mapping = type(value) is dict or isinstance(value, Mapping)
        if value is None:
            new = infos[name].get_default(call_default_factory=True)
        elif mapping and isinstance(current, BaseModel):
            new = merged(current, value)
        elif mapping:
            new = merge_patch(current if isinstance(current, dict) else None, value)
        else:
            new = value
        validator.validate_assignment(out, name, new)
    return out
