"""kube-scheduler's part in `provisioner simulate`: the Binder puts each pending pod on the fitting node
with the least room left (MostAllocated scoring), within its taints, node selector and affinity, pool list,
required pod (anti-)affinity and DoNotSchedule spread, and marks a pod that fits nowhere Unschedulable,
which is what the provisioner watches for. Out of `sim.cluster` (the other stand-ins), as its docstring
plans for a stand-in that grows; it writes through the SimCluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from provisioner.api import accelerators, quantities
from provisioner.api import labels as wk
from provisioner.state.objects import Node, Pod, tolerates_all

if TYPE_CHECKING:
    from provisioner.sim.cluster import SimCluster


def fits(pod: Pod, node: Node, used: Mapping[str, int]) -> bool:
    """Whether kube-scheduler would bind the pod to the node: Ready and schedulable, taints tolerated,
    node selector, required node affinity and pool list met, requests within what is left."""
    return allows(pod, node) and quantities.fits(pod.requests, quantities.subtract(node.allocatable, used))


def allows(pod: Pod, node: Node) -> bool:
    """`fits` without the room: what the binder can check once per kind of pod and node."""
    if not node.ready or node.unschedulable or node.deleting:
        return False
    hard = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
    if tolerates_all(pod.tolerations, hard) is not None:
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_node_terms and not any(
        all(r.matches(node.labels) for r in term) for term in pod.required_node_terms
    ):
        return False
    # A pod's pool list (`provisioner.sh/nodepools`) binds it to those pools' nodes, as the scheduler and
    # the disruption planner assume.
    return not (pod.nodepools and node.labels.get(wk.NODEPOOL) not in pod.nodepools)


def _term_namespaces(pod: Pod, namespaces: tuple[str, ...]) -> set[str]:
    return set(namespaces) or {pod.namespace}


def _matching(pod: Pod, term: Any, others: Sequence[tuple[Pod, Node]]) -> list[tuple[Pod, Node]]:
    """The bound pods a pod (anti-)affinity term of `pod` selects (its namespaces, its selector)."""
    spaces = _term_namespaces(pod, term.namespaces)
    selector = term.label_selector
    return [
        (p, n)
        for p, n in others
        if p.key != pod.key and p.namespace in spaces and selector is not None and selector.matches(p.labels)
    ]


def topology_ok(pod: Pod, node: Node, placed: Sequence[tuple[Pod, Node]], eligible: Sequence[Node]) -> bool:
    """Required pod affinity and anti-affinity, and DoNotSchedule topology spread, as kube-scheduler
    checks them for the incoming pod (`placed`: every bound pod with its node; `eligible`: the nodes the
    pod's node selector and affinity allow, for spread domains). The symmetric check (an existing pod's
    anti-affinity against the incoming one) is left out."""
    for term in pod.anti_affinity_required:
        domain = node.labels.get(term.topology_key)
        if domain is not None and any(
            n.labels.get(term.topology_key) == domain for _, n in _matching(pod, term, placed)
        ):
            return False
    for term in pod.affinity_required:
        matches = _matching(pod, term, placed)
        domain = node.labels.get(term.topology_key)
        if not matches:
            # The first pod of a group that selects itself may go anywhere (kube-scheduler's rule).
            if term.label_selector is not None and term.label_selector.matches(pod.labels):
                continue
            return False
        if domain is None or not any(n.labels.get(term.topology_key) == domain for _, n in matches):
            return False
    for spread in pod.topology_spread:
        if spread.when_unsatisfiable != "DoNotSchedule" or spread.label_selector is None:
            continue
        key = spread.topology_key
        domain = node.labels.get(key)
        if domain is None:
            return False
        counts = {n.labels[key]: 0 for n in eligible if key in n.labels}
        for p, n in placed:
            value = n.labels.get(key)
            if value in counts and p.namespace == pod.namespace and spread.label_selector.matches(p.labels):
                counts[value] += 1
        if counts.get(domain, 0) + 1 - min(counts.values(), default=0) > spread.max_skew:
            return False
    return True


def _node_allows(pod: Pod, node: Node) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    return not pod.required_node_terms or any(
        all(r.matches(node.labels) for r in term) for term in pod.required_node_terms
    )


def _accelerators(resources: Mapping[str, int]) -> int:
    """Whole devices and MIG slices: additive, so a node that fits a pod scores at least the pod's."""
    return accelerators.devices(resources) + accelerators.slices(resources)


def _room_key(node_name: str, allocatable: Mapping[str, int], used: Mapping[str, int]) -> tuple[int, str]:
    """MostAllocated scoring: the node with the least room left (accelerators first, then CPU) wins; ties by
    name."""
    gpus = _accelerators(allocatable) - _accelerators(used)
    cpu = allocatable.get(quantities.CPU, 0) - used.get(quantities.CPU, 0)
    return (gpus * 10**9 + cpu, node_name)


def _placement_class(pod: Pod) -> tuple[Any, ...]:
    """What decides which nodes a pod may go to apart from room: pods alike here are alike to the binder."""
    return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_node_terms, pod.nodepools)


_SCHEDULED = {"type": "PodScheduled", "status": "True"}
"""The condition a bound pod carries (one object, in every bound pod's document)."""


@dataclasses.dataclass
class Binder:
    """kube-scheduler, simply: each pending pod (in name order) goes to the fitting node with the least
    room left (kube-scheduler's MostAllocated scoring, which keeps nodes packed and the rest emptying),
    within its required pod (anti-)affinity and DoNotSchedule spread; a pod that fits nowhere is marked
    PodScheduled=False/Unschedulable, which is what the provisioner watches for.

    The work is in proportion to the pending pods, not pods x nodes: schedulable nodes are kept ordered by
    room left, so a pod without pod (anti-)affinity or spread takes the first node from the least room
    that could hold its requests and passes its checks (which nodes pass them is computed once per kind
    of pod: tolerations, selector, affinity, pool list); and a kind of pod with given requests that fitted
    nowhere is not tried again in the same pass (room only shrinks within a pass). Pods with pod
    (anti-)affinity or spread are checked against every node, as before."""

    cluster: SimCluster

    def sync(self) -> int:
        state = self.cluster.state
        # The snapshot (kept up as pods change) has the pending pods in name order and what each node's
        # pods request: no walk of every pod per tick.
        snap = state.snapshot()
        # A gated pod is not kube-scheduler's yet: neither bound nor marked Unschedulable.
        pending = [p for p in snap.pending_pods if not p.deleting and not p.scheduling_gates]
        if not pending:
            return 0
        used = {sn.name: dict(sn.requested) for sn in snap.nodes if sn.node is not None}
        nodes = [sn.node for sn in snap.nodes if sn.node is not None]
        by_room = SortedList(
            _room_key(n.name, n.allocatable, used.get(n.name, {}))
            for n in nodes
            if n.ready and not n.unschedulable and not n.deleting
        )
        placed: list[tuple[Pod, Node]] | None = None
        # What every pod bound (or refused) in this pass is written: one object each, shared by all.
        started = self.cluster.stamp()
        refused = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/{len(nodes)} nodes are available",
        }
        allowed: dict[tuple[Any, ...], dict[str, bool]] = {}
        classes: dict[tuple[int, ...], tuple[Any, ...]] = {}
        fitted_nowhere: set[tuple[Any, ...]] = set()
        bound = 0
        for pod in pending:
            # Host ports depend on the pods already on a node, as topology does: checked node by node.
            topology = bool(
                pod.anti_affinity_required or pod.affinity_required or pod.topology_spread or pod.host_ports
            )
            target: str | None = None
            if topology:
                if placed is None:
                    placed = [
                        (p, state.nodes[p.node_name])
                        for p in state.pods.values()
                        if p.node_name and not p.is_terminal and p.node_name in state.nodes
                    ]
                target = self._with_topology(pod, nodes, used, placed)
            else:
                # Pods of one template share these objects (`Pod.from_dict`), so their class is worked
                # out once a pass; the ids stay unique while `pending` holds the pods.
                shape = (
                    id(pod.tolerations),
                    id(pod.node_selector),
                    id(pod.required_node_terms),
                    id(pod.nodepools),
                    id(pod.requests),
                )
                known = classes.get(shape)
                if known is None:
                    known = classes[shape] = (_placement_class(pod), tuple(sorted(pod.requests.items())))
                kind = known[0]
                tried = known
                if tried not in fitted_nowhere:
                    target = self._least_room(pod, by_room, used, allowed.setdefault(kind, {}))
                    if target is None:
                        fitted_nowhere.add(tried)
            if target is not None:
                self.cluster.write_pod(
                    pod,
                    {
                        "spec": {"nodeName": target},
                        "status": {
                            "phase": "Running",
                            "startTime": started,
                            "conditions": pod.conditions_with(_SCHEDULED),
                        },
                    },
                )
                node = state.nodes[target]
                room = used.setdefault(target, {})
                before = _room_key(target, node.allocatable, room)
                for name, amount in pod.requests.items():
                    room[name] = room.get(name, 0) + amount
                if before in by_room:
                    by_room.remove(before)
                    by_room.add(_room_key(target, node.allocatable, room))
                if placed is not None:
                    placed.append((pod, node))
                bound += 1
            elif not pod.unschedulable:
                self.cluster.write_pod(
                    pod,
                    {"status": {"conditions": pod.conditions_with(refused)}},
                )
        return bound

    def _least_room(
        self,
        pod: Pod,
        by_room: SortedList,
        used: Mapping[str, Mapping[str, int]],
        allowed: dict[str, bool],
    ) -> str | None:
        """The fitting node with the least room left: every node that can hold the pod's GPUs and CPU
        scores at least (its GPUs, its CPU), so the walk starts there."""
        nodes = self.cluster.state.nodes
        floor = (_accelerators(pod.requests) * 10**9 + pod.requests.get(quantities.CPU, 0), "")
        name: str
        for _score, name in by_room.islice(by_room.bisect_left(floor)):
            node = nodes[name]
            ok = allowed.get(name)
            if ok is None:
                ok = allowed[name] = allows(pod, node)
            if ok and quantities.fits(
                pod.requests, quantities.subtract(node.allocatable, used.get(name, {}))
            ):
                return name
        return None

    @staticmethod
    def _with_topology(
        pod: Pod,
        nodes: Sequence[Node],
        used: Mapping[str, Mapping[str, int]],
        placed: Sequence[tuple[Pod, Node]],
    ) -> str | None:
        eligible = [n for n in nodes if _node_allows(pod, n)]
        best: tuple[int, str] | None = None
        for node in nodes:
            room = used.get(node.name, {})
            if not fits(pod, node, room) or not topology_ok(pod, node, placed, eligible):
                continue
            if pod.host_ports and any(
                n.name == node.name and any(w.conflicts(h) for w in pod.host_ports for h in p.host_ports)
                for p, n in placed
            ):
                continue
            key = _room_key(node.name, node.allocatable, room)
            if best is None or key < best:
                best = key
        return best[1] if best is not None else None
