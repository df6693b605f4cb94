"""What a re-solve is shown, and the first-fit screen over the same free capacity.

A re-solve need not see the whole cluster: for each moved pod, the best-fitting nodes able to take it are
enough (`PlannerSettings.nodes_per_pod`), plus every node of a pool with limits (they count) and every node
running a pod with required anti-affinity (it may repel). Pods with topology always get the whole
cluster. The same picture of free capacity, ordered by free CPU, serves the first-fit screen that tells
whether a node's pods obviously fit elsewhere.

The targets are kept on shelves, one per (taints, pool, resources with room left): a pod looks only at
the shelves it tolerates, may use and has room on, so a GPU pod never walks the CPU nodes, nor a node
whose GPUs are taken. Within a shelf they are in the order of the whole picture, so what a walk over
the shelves finds is what a walk over every target would.

Owns the targets (free capacity per node, updated as the plan moves pods); the nodes themselves and what
has been removed belong to `context`.
"""

from __future__ import annotations

import bisect
import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.api import NodePool, quantities
from provisioner.api import labels as wk
from provisioner.disruption.facts import Facts
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Pod, TaintValue, tolerates_all

Rank = tuple[int, int]
"""A target's place in the picture: (minus its free CPU, tie-break); the most free CPU comes first."""

_LAST_OF_KEY = sys.maxsize
"""A tie-break after every real one: (-cpu, _LAST_OF_KEY) bounds the targets with at least `cpu` free."""

ShelfKey = tuple[tuple[TaintValue, ...], str | None, frozenset[str]]
"""(taints, pool, resources with room left)."""


@dataclass(slots=True, eq=False)
class Target:
    """A node pods may move to, as the first-fit screen sees it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[TaintValue, ...]
    nodepool: str | None
    available: dict[str, int]
    rank: Rank = (0, 0)
    """Its place in the picture as of the last `SolverView.drop` (what `moved` took is not counted yet)."""
    shelf: ShelfKey | None = None


@dataclass(slots=True, eq=False)
class _Shelf:
    """Targets of one shelf key, in picture order (`ranks` alongside, for bisection)."""

    taints: tuple[TaintValue, ...]
    nodepool: str | None
    room: frozenset[str]
    ranks: list[Rank] = field(default_factory=list)
    items: list[Target] = field(default_factory=list)

    def add(self, target: Target) -> None:
        at = bisect.bisect_left(self.ranks, target.rank)
        self.ranks.insert(at, target.rank)
        self.items.insert(at, target)

    def remove(self, target: Target) -> None:
        at = bisect.bisect_left(self.ranks, target.rank)
        del self.ranks[at]
        del self.items[at]

    def with_cpu(self, cpu: int) -> int:
        """How many targets at the front have at least `cpu` free."""
        return bisect.bisect_right(self.ranks, (-cpu, _LAST_OF_KEY))


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


def _labels_ok(pod: Pod, labels: Mapping[str, str]) -> bool:
    """Node selector and required node affinity (taints and the pool list are the shelf's)."""
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    return not pod.required_node_terms or any(
        all(req.matches(labels) for req in term) for term in pod.required_node_terms
    )


def _shelf_key(target: Target) -> ShelfKey:
    room = frozenset(name for name, amount in target.available.items() if amount > 0)
    return (target.taints, target.nodepool, room)


class SolverView:
    """The snapshots re-solves see during one plan, and the free capacity behind them."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        nodes: Mapping[str, StateNode],
        pools: Sequence[NodePool],
        nodes_per_pod: int | None,
        facts: Facts | None = None,
        receives: Callable[[StateNode], bool] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._facts = facts or Facts()
        self._receives = receives
        """Whether a node may receive moved pods at all (None: every schedulable node): the nodes it refuses
        (capacity in flight) are no targets, so the best-fitting nodes shown are ones a command may use."""
        self._nodes = nodes
        """The plan's nodes (the context updates them as pods move)."""
        self._per_pod = nodes_per_pod
        limited = {p.name for p in pools if p.spec.limits}
        facts_of = self._facts.of
        self._always_shown = {
            n.name for n in snapshot.nodes if (known := facts_of(n)).nodepool in limited or known.repels
        }
        self._order = {name: index for index, name in enumerate(nodes)}
        """The plan's node order (its names never change, only what they hold), so a re-solve's nodes are
        listed in it without a walk over the whole cluster."""
        self._shelves: dict[ShelfKey, _Shelf] | None = None
        self._target_by_name: dict[str, Target] = {}
        self._first_tie = 0
        """The smallest tie-break given so far: a target that moves goes before every target already
        holding its new free CPU, so it gets a smaller one."""
        self._moved: set[str] = set()
        """Targets that received pods since the last `drop`."""
        self._usable: dict[tuple[object, ...], list[_Shelf]] = {}
        self._usable_version = 0
        """Per pod signature, the shelves it may use; cleared when shelves come or go."""

    def _whole(self, removed: set[str], excluded: set[str]) -> Snapshot:
        """The cluster without the removed and excluded nodes and without pending pods."""
        return dataclasses.replace(
            self._snapshot,
            nodes=tuple(n for name, n in self._nodes.items() if name not in removed and name not in excluded),
            pending_pods=(),
        )

    def for_pods(self, pods: Sequence[Pod], *, removed: set[str], excluded: set[str]) -> Snapshot:
        """The snapshot a re-solve of `pods` sees, without the `removed` nodes and the `excluded` ones
        (those the pods leave): the whole cluster, or only the nodes that matter."""
        if self._per_pod is None or any(has_pod_topology(p) for p in pods):
            return self._whole(removed, excluded)
        per_pod = self._per_pod
        keep = {name for name in self._always_shown if name not in removed and name not in excluded}
        self._build(removed)
        seen: set[tuple[object, ...]] = set()
        for pod in pods:
            requests = pod.requests
            # Replicas ask alike: a pod asking what another already asked finds the same nodes.
            asks = (
                tuple(requests.items()),
                tuple(pod.node_selector.items()),
                pod.required_node_terms,
                pod.tolerations,
                pod.annotations.get(wk.NODEPOOLS),
            )
            if asks in seen:
                continue
            seen.add(asks)
            cpu = requests.get(quantities.CPU, 0)
            # Every target walked has room for the pod's CPU (the shelves' order): `fits` on the rest.
            others = tuple(item for item in requests.items() if item[0] != quantities.CPU)
            selective = bool(pod.node_selector or pod.required_node_terms)
            shelves = self._shelves_for(pod)
            # Per shelf, walk back from the tightest target with room for the pod's CPU (best fit, so pods
            # go where they fill nodes up); the best `per_pod` of the shelves together are the best overall.
            found: list[Target] = []
            for shelf in shelves:
                items = shelf.items
                taken = 0
                for index in range(shelf.with_cpu(cpu) - 1, -1, -1):
                    target = items[index]
                    if target.name in removed or target.name in excluded:
                        continue
                    available = target.available
                    for resource, amount in others:
                        if amount > available.get(resource, 0):
                            break
                    else:
                        if not selective or _labels_ok(pod, target.labels):
                            found.append(target)
                            taken += 1
                            if taken >= per_pod:
                                break
            if len(shelves) > 1:
                found.sort(key=lambda t: t.rank, reverse=True)
                del found[per_pod:]
            keep.update(t.name for t in found)
        order = self._order
        return dataclasses.replace(
            self._snapshot,
            nodes=tuple(self._nodes[name] for name in sorted(keep, key=order.__getitem__)),
            pending_pods=(),
        )

    def _build(self, removed: set[str]) -> None:
        """The targets (schedulable nodes not `removed`) on their shelves; built on first use, then kept
        up to date by `moved` and `drop`."""
        if self._shelves is not None:
            return
        targets = [
            Target(
                name=n.name,
                labels=n.labels,
                taints=n.taints,
                nodepool=n.nodepool,
                available=n.available,
            )
            for n in self._nodes.values()
            if n.name not in removed
            and not n.cordoned
            and not n.deleting
            and (self._receives is None or self._receives(n))
        ]
        targets.sort(key=lambda t: -t.available.get(quantities.CPU, 0))
        self._shelves = {}
        for tie, target in enumerate(targets):
            target.rank = (-target.available.get(quantities.CPU, 0), tie)
            self._shelve(target)
            self._target_by_name[target.name] = target

    def _shelve(self, target: Target) -> None:
        assert self._shelves is not None
        key = target.shelf = _shelf_key(target)
        shelf = self._shelves.get(key)
        if shelf is None:
            shelf = self._shelves[key] = _Shelf(taints=key[0], nodepool=key[1], room=key[2])
            self._usable.clear()
        shelf.add(target)

    def _shelves_for(self, pod: Pod) -> list[_Shelf]:
        """The shelves whose taints the pod tolerates, whose pool its pool list allows and with room
        left in every resource it asks for (a target off them would fail `fits` or `pod_can_use`)."""
        assert self._shelves is not None
        nodepools = pod.nodepools
        asks = frozenset(name for name, amount in pod.requests.items() if amount > 0)
        signature = (pod.tolerations, nodepools, asks)
        usable = self._usable.get(signature)
        if usable is None:
            usable = self._usable[signature] = [
                shelf
                for shelf in self._shelves.values()
                if asks <= shelf.room
                and (not nodepools or shelf.nodepool in nodepools)
                and tolerates_all(pod.tolerations, shelf.taints) is None
            ]
        return usable

    def moved(self, node: str, pod: Pod) -> None:
        """A pod of the plan lands on `node`: its free capacity shrinks."""
        target = self._target_by_name.get(node)
        if target is not None:
            self._moved.add(node)
            target.available = quantities.subtract(target.available, pod.requests)

    def drop(self, removed: Iterable[str]) -> None:
        """Forget the removed nodes and re-place the targets that pods moved to.

        In proportion to what changed: the order is the one a stable sort by free CPU of the previous
        order gives. Free CPU only shrinks, so a target that moved comes before every target that already
        had its new free CPU (they stayed behind it: a smaller tie-break), and targets that moved to the
        same free CPU keep their previous order."""
        if self._shelves is None:
            return
        shelves = self._shelves
        moved, self._moved = self._moved, set()
        for name in removed:
            target = self._target_by_name.pop(name, None)
            if target is not None:
                assert target.shelf is not None
                shelves[target.shelf].remove(target)
                moved.discard(name)
        resorted: list[Target] = []
        for name in moved:
            target = self._target_by_name[name]
            if -target.available.get(quantities.CPU, 0) != target.rank[0]:
                resorted.append(target)
            elif _shelf_key(target) != target.shelf:
                # Same free CPU, same place; only a resource ran out (or room came back).
                assert target.shelf is not None
                shelves[target.shelf].remove(target)
                self._shelve(target)
        resorted.sort(key=lambda t: t.rank)
        first = self._first_tie - len(resorted)
        for offset, target in enumerate(resorted):
            assert target.shelf is not None
            shelves[target.shelf].remove(target)
            target.rank = (-target.available.get(quantities.CPU, 0), first + offset)
            self._shelve(target)
        self._first_tie = first

    def pods_fit_elsewhere(self, node: StateNode, *, removed: set[str]) -> bool:
        """First-fit screen of the node's pods on the other nodes' free capacity (optimistic about
        topology, which `solve` then checks)."""
        self._build(removed)
        used: dict[str, dict[str, int]] = {}
        pods = sorted(self._facts.of(node).workload, key=lambda p: -p.requests.get(quantities.CPU, 0))
        for pod in pods:
            cpu = pod.requests.get(quantities.CPU, 0)
            requests = pod.requests
            # The first fitting target of each shelf, in picture order; the first of those wins.
            best: Target | None = None
            for shelf in self._shelves_for(pod):
                items = shelf.items
                for index in range(shelf.with_cpu(cpu)):
                    target = items[index]
                    if best is not None and target.rank > best.rank:
                        break
                    if target.name == node.name:
                        continue
                    if fits(requests, used.get(target.name, target.available)) and _labels_ok(
                        pod, target.labels
                    ):
                        best = target
                        break
            if best is None:
                return False
            used[best.name] = quantities.subtract(used.get(best.name, best.available), requests)
        return True
