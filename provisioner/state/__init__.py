"""Cluster state: the objects (pods, nodes, daemonsets, PDBs) as decision code sees them, the
ClusterState store fed by informers or the embedded cluster, and frozen Snapshots. Pure: no I/O."""

from provisioner.state.cluster import ClusterState, Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget

__all__ = ["ClusterState", "DaemonSet", "Node", "Pod", "PodDisruptionBudget", "Snapshot", "StateNode"]
