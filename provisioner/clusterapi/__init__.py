"""The cluster port: how controllers change the cluster (`port.ClusterAPI`, its errors, merge patches)
and the in-memory adapter (`in_memory.MemoryCluster`) that unit tests and `provisioner simulate` write
through. `provisioner.kube.api.KubeClusterAPI` is the adapter for a real API server.

Named after the protocol it holds. It sits below the controllers and `provisioner.kube` (both import it)
and above `provisioner.state` (the memory adapter writes a ClusterState); it imports no SDK.
"""

from provisioner.clusterapi.in_memory import MemoryCluster, RecordedEvent
from provisioner.clusterapi.port import (
    ClusterAPI,
    ClusterError,
    ConflictError,
    EvictionBlocked,
    NotFoundError,
    NotLeader,
    guarded,
    merge_patch,
    node_rv,
    write_deadline,
    writes_until,
)

__all__ = [
    "ClusterAPI",
    "ClusterError",
    "ConflictError",
    "EvictionBlocked",
    "MemoryCluster",
    "NotFoundError",
    "NotLeader",
    "RecordedEvent",
    "guarded",
    "merge_patch",
    "node_rv",
    "write_deadline",
    "writes_until",
]
