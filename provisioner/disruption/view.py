"""What a re-solve is shown, and the first-fit screen over the same free capacity.

A re-solve need not see the whole cluster: for each moved pod, the best-fitting nodes able to take it are
enough (`Settings.nodes_per_pod`), plus every node of a pool with limits (they count) and every node
running a pod with required anti-affinity (it may repel). Pods with topology always get the whole
cluster. The same picture of free capacity, sorted by free CPU, serves the first-fit screen that tells
whether a node's pods obviously fit elsewhere.

Owns the targets (free capacity per node, updated as the plan moves pods); the nodes themselves and what
has been removed belong to `context`.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from provisioner.api import NodePool, quantities
from provisioner.disruption import candidates as cand
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Pod, TaintValue, tolerates_all


@dataclass(slots=True)
class Target:
    """A node pods may move to, as the first-fit screen sees it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[TaintValue, ...]
    nodepool: str | None
    available: dict[str, int]


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Every requested amount, zero ones included, is available. Unlike `quantities.fits`, a zero request
    of a resource the node is over-committed on fails; kept so the screens keep their answers."""
    return all(amount <= available.get(name, 0) for name, amount in requests.items())


def has_pod_topology(pod: Pod) -> bool:
    return bool(
        pod.topology_spread
        or pod.affinity_required
        or pod.affinity_preferred
        or pod.anti_affinity_required
        or pod.anti_affinity_preferred
    )


def pod_can_use(pod: Pod, target: Target) -> bool:
    """Node selector, required node affinity, taints and the pod's pool list; topology is left to solve."""
    labels = target.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    if pod.required_node_terms and not any(
        all(req.matches(labels) for req in term) for term in pod.required_node_terms
    ):
        return False
    if pod.nodepools and target.nodepool not in pod.nodepools:
        return False
    return tolerates_all(pod.tolerations, target.taints) is None


class SolverView:
    """The snapshots re-solves see during one plan, and the free capacity behind them."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        nodes: Mapping[str, StateNode],
        pools: Sequence[NodePool],
        nodes_per_pod: int | None,
    ) -> None:
        self._snapshot = snapshot
        self._nodes = nodes
        """The plan's nodes (the context updates them as pods move)."""
        self._per_pod = nodes_per_pod
        limited = {p.name for p in pools if p.spec.limits}
        self._always_shown = {
            n.name
            for n in snapshot.nodes
            if n.nodepool in limited or any(p.anti_affinity_required for p in n.pods)
        }
        self._order = {name: index for index, name in enumerate(nodes)}
        """The plan's node order (its names never change, only what they hold), so a re-solve's nodes are
        listed in it without a walk over the whole cluster."""
        self._targets: list[Target] | None = None
        self._target_by_name: dict[str, Target] = {}
        self._target_keys: list[int] = []
        self._moved: dict[str, int] = {}
        """Targets that received pods since the last `drop` -> their sort key before."""

    def _whole(self, gone: set[str]) -> Snapshot:
        """The cluster without the `gone` nodes and without pending pods."""
        return dataclasses.replace(
            self._snapshot,
            nodes=tuple(n for name, n in self._nodes.items() if name not in gone),
            pending_pods=(),
        )

    def for_pods(self, pods: Sequence[Pod], *, removed: set[str], excluded: set[str]) -> Snapshot:
        """The snapshot a re-solve of `pods` sees, without the `removed` nodes and the `excluded` ones
        (those the pods leave): the whole cluster, or only the nodes that matter."""
        gone = removed | excluded
        if self._per_pod is None or any(has_pod_topology(p) for p in pods):
            return self._whole(gone)
        keep = {name for name in self._always_shown if name not in gone}
        targets = self.targets(removed)
        for pod in pods:
            cpu = pod.requests.get(quantities.CPU, 0)
            # targets are sorted by free CPU, most first: [0, end) have room for the pod's CPU; walk
            # back from the tightest of them (best fit) so pods go where they fill nodes up.
            end = bisect.bisect_right(self._target_keys, -cpu)
            found = 0
            for index in range(end - 1, -1, -1):
                target = targets[index]
                if target.name in gone or not fits(pod.requests, target.available):
                    continue
                if not pod_can_use(pod, target):
                    continue
                keep.add(target.name)
                found += 1
                if found >= self._per_pod:
                    break
        order = self._order
        return dataclasses.replace(
            self._snapshot,
            nodes=tuple(self._nodes[name] for name in sorted(keep, key=order.__getitem__)),
            pending_pods=(),
        )

    def targets(self, removed: set[str]) -> list[Target]:
        """Schedulable nodes not `removed`, most free CPU first; built on first use, then kept up to date
        by `moved` and `drop`."""
        if self._targets is None:
            targets = [
                Target(
                    name=n.name,
                    labels=n.labels,
                    taints=n.taints,
                    nodepool=n.nodepool,
                    available=n.available,
                )
                for n in self._nodes.values()
                if n.name not in removed and not n.cordoned and not n.deleting
            ]
            targets.sort(key=lambda t: -t.available.get(quantities.CPU, 0))
            self._targets = targets
            self._target_by_name = {t.name: t for t in targets}
            self._target_keys = [-t.available.get(quantities.CPU, 0) for t in targets]
        return self._targets

    def moved(self, node: str, pod: Pod) -> None:
        """A pod of the plan lands on `node`: its free capacity shrinks."""
        target = self._target_by_name.get(node)
        if target is not None:
            self._moved.setdefault(node, -target.available.get(quantities.CPU, 0))
            target.available = quantities.subtract(target.available, pod.requests)

    def drop(self, removed: Iterable[str]) -> None:
        """Forget the removed nodes and re-sort after pods moved.

        In place, in proportion to what changed: the order is the one a stable sort by free CPU of the
        previous order gives. Free CPU only shrinks, so a target that moved comes before every target
        that already had its new free CPU (they stayed behind it), and targets that moved to the same
        free CPU keep their previous order."""
        if self._targets is None:
            return
        targets, keys = self._targets, self._target_keys
        moved, self._moved = self._moved, {}
        gone = set(removed)
        taken: list[tuple[int, Target]] = []
        for name in gone | set(moved):
            target = self._target_by_name.get(name)
            if target is None:
                continue
            key = moved.get(name, -target.available.get(quantities.CPU, 0))
            new_key = -target.available.get(quantities.CPU, 0)
            if name not in gone and new_key == key:
                continue  # moved, but no CPU: stays where it is
            index = bisect.bisect_left(keys, key)
            while targets[index] is not target:
                index += 1
            taken.append((index, target))
            if name in gone:
                del self._target_by_name[name]
        # Take out from the back so the indexes found stay valid; put back in the previous order.
        taken.sort(key=lambda pair: pair[0])
        for index, _target in reversed(taken):
            del targets[index]
            del keys[index]
        for _index, target in reversed(taken):
            if target.name in self._target_by_name:
                new_key = -target.available.get(quantities.CPU, 0)
                at = bisect.bisect_left(keys, new_key)
                targets.insert(at, target)
                keys.insert(at, new_key)

    def pods_fit_elsewhere(self, node: StateNode, *, removed: set[str]) -> bool:
        """First-fit screen of the node's pods on the other nodes' free capacity (optimistic about
        topology, which `solve` then checks)."""
        used: dict[str, dict[str, int]] = {}
        pods = sorted(cand.reschedulable(node), key=lambda p: -p.requests.get(quantities.CPU, 0))
        targets = self.targets(removed)
        for pod in pods:
            cpu = pod.requests.get(quantities.CPU, 0)
            placed = False
            for target in targets:
                if target.available.get(quantities.CPU, 0) < cpu:
                    break  # sorted by free CPU: no later node has room
                if target.name == node.name:
                    continue
                free = used.get(target.name, target.available)
                if not fits(pod.requests, free) or not pod_can_use(pod, target):
                    continue
                used[target.name] = quantities.subtract(free, pod.requests)
                placed = True
                break
            if not placed:
                return False
        return True
