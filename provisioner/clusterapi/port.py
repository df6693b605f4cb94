"""ClusterAPI: the only way controllers change the cluster, the errors they branch on, and what a patch
means.

Controllers read from `provisioner.state.ClusterState` and write through this small protocol. Two
implementations: `provisioner.kube.api.KubeClusterAPI` (a real API server) and
`provisioner.clusterapi.in_memory.MemoryCluster` (writes straight into a ClusterState; unit tests and
`provisioner simulate`). Patches are JSON merge patches (RFC 7386): a key set to None is removed, lists
are replaced whole; a patch carrying `metadata.resourceVersion` (`guarded`) is refused with a
ConflictError when the object changed since that version.

A write may carry a deadline (`writes_until`): the moment by which it must have ended, stored or
abandoned. A replica acting under a Lease sets its renew deadline there, so no write of its lands after
its Lease can have passed to another replica (`provisioner.controllers.sharding`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Protocol

from provisioner.api import NodeClaim
from provisioner.state.objects import Node


class ClusterError(Exception):
    """Base of the errors a ClusterAPI raises."""


class NotFoundError(ClusterError):
    """The object does not exist (any more)."""


class ConflictError(ClusterError):
    """The object already exists, or changed since it was read."""


class EvictionBlocked(ClusterError):
    """A PodDisruptionBudget does not allow the eviction now (the API server's 429); retry later."""


class NotLeader(ClusterError):
    """This controller lost (or never held) the leader lease; it must not write."""


_DEADLINE: ContextVar[datetime | None] = ContextVar("write_deadline", default=None)


@contextmanager
def writes_until(deadline: datetime | None) -> Iterator[None]:
    """Within: every write through a ClusterAPI must have ended by `deadline` (the earlier one when
    nested; None adds no bound). An adapter that cannot finish a write by then does not start it
    (NotLeader when too little time is left), and one that talks to a server asks it to abandon the
    write at the deadline (kube-apiserver's request `timeout`)."""
    outer = _DEADLINE.get()
    if deadline is None or (outer is not None and outer <= deadline):
        yield
        return
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def write_deadline() -> datetime | None:
    """The deadline `writes_until` set for the writes made now (None: none)."""
    return _DEADLINE.get()


class ClusterAPI(Protocol):
    """Writes the controllers make. Each call is one API request; none is retried here."""

    def create_nodeclaim(self, claim: NodeClaim) -> NodeClaim:
        """Create the claim. Raises ConflictError when the name is taken."""
        ...

    def patch_nodeclaim(self, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch metadata/spec. Raises NotFoundError."""
        ...

    def patch_nodeclaim_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch `status` (the status subresource). Raises NotFoundError."""
        ...

    def refresh(self, kind: str, name: str) -> None:
        """Read a NodeClaim or Node from the server itself (not the informers' cache) into the state, as
        a writer does after a conflict. Raises NotFoundError."""
        ...

    def delete_nodeclaim(self, name: str) -> None:
        """Ask for deletion (the finalizer keeps it until termination is done). Raises NotFoundError."""
        ...

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a Node (labels, taints as a whole list, `spec.unschedulable`). Raises NotFoundError."""
        ...

    def delete_node(self, name: str) -> None:
        """Delete a Node. Raises NotFoundError."""
        ...

    def evict_pod(self, namespace: str, name: str) -> None:
        """Evict through the Eviction API. Raises EvictionBlocked (PDB) or NotFoundError."""
        ...

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod regardless of PDBs (a termination grace period ran out). Raises NotFoundError."""
        ...

    def patch_nodepool_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch a NodePool's `status`. Raises NotFoundError."""
        ...

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a Pod's metadata and spec (lift a scheduling gate, add a node selector). Raises
        NotFoundError, or ConflictError when `metadata.resourceVersion` is given and stale."""
        ...

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch a Pod's `status` (its conditions). Raises NotFoundError."""
        ...

    def patch_quota_status(self, kind: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch the `status` of a Team or Department (`kind`). Raises NotFoundError."""
        ...

    def patch_provisioning_request(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a ProvisioningRequest's metadata (its annotations). Raises NotFoundError."""
        ...

    def patch_provisioning_request_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch the `status` of a ProvisioningRequest (its conditions). Raises NotFoundError."""
        ...

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
        """Record a core/v1 Event about an object. Never raises for API errors (Events are best effort)."""
        ...


_LEAVES = frozenset({str, int, float, bool, list})
"""JSON values a merge patch sets as they are (never mappings)."""


def merge_patch(target: Mapping[str, Any] | None, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, None removes a key, anything else replaces.
    Neither argument is changed: the result is a new dict at every level the patch touches, and shares
    the rest with `target` (and the values it sets with `patch`)."""
    kind = type(patch)
    # JSON's own types first: an ABC's isinstance is slow, and every bind of a pod is a merge patch.
    if kind is not dict and (kind in _LEAVES or not isinstance(patch, Mapping)):
        return patch
    out: dict[str, Any] = dict(target) if type(target) is dict or isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def guarded(resource_version: str | None, patch: dict[str, Any]) -> dict[str, Any]:
    """The patch with the resourceVersion it was computed from, so a list field (taints, finalizers)
    written from a stale read fails with a conflict (and is retried) instead of dropping another
    writer's entry."""
    if not resource_version:
        return patch
    meta = dict(patch.get("metadata") or {})
    meta["resourceVersion"] = resource_version
    return {**patch, "metadata": meta}


def node_rv(node: Node | None) -> str | None:
    """The Node's resourceVersion as last read, for `guarded`."""
    return (node.raw.get("metadata") or {}).get("resourceVersion") if node is not None else None
