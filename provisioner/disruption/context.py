"""What the disruption methods share during one plan: the snapshot and the pools, the candidates, the
budgets and PDB evictions left, the nodes already taken or receiving pods, and the re-solve.

`Context` owns the plan's bookkeeping: a blocker per (node, method), the budget and PDB gate, and
`accept`, which spends budgets and evictions, moves the pods onto the nodes that receive them (so later
commands see them there) and appends the command. What a re-solve is shown lives in `view`, what a
command records in `records`; deciding which nodes to disrupt is left to the method modules, and their
order to `planner`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from provisioner.api import NodePool, durations, quantities
from provisioner.api import labels as wk
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import candidates as cand
from provisioner.disruption import records, verdicts
from provisioner.disruption.budgets import BudgetTracker
from provisioner.disruption.facts import Facts, NodeFacts
from provisioner.disruption.model import Blocker, BlockerKind, Command, DisruptionPlan, NodeRecord
from provisioner.disruption.pdbs import PDBLedger
from provisioner.disruption.plan_time import PlanTime
from provisioner.disruption.verdicts import Verdict, Verdicts
from provisioner.disruption.view import SolverView
from provisioner.scheduling.pools import CompiledPools
from provisioner.scheduling.results import NewClaim, Placement, Results
from provisioner.scheduling.solver import SolveFn, SolveOptions
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Node, Pod


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    """Knobs of the planner that are not per pool."""

    spot_to_spot_min_options: int = 15
    """A spot node is replaced by a cheaper spot node only when at least this many cheaper instance types
    are offered, so the replacement is not the next one to be interrupted (Karpenter's rule)."""
    multi_node_max_candidates: int = 100
    """Most candidates the multi-node search considers at once (the binary search runs over them)."""
    return_to_preferred: bool = True
    """Whether nodes on a fallback tier are moved back to the preferred tier when it is available."""
    max_commands: int | None = None
    """Stop after this many commands (None: as many as budgets allow)."""
    nodes_per_pod: int | None = 16
    """How many existing nodes per moved pod a re-solve is shown: the best-fitting ones able to take it
    (plus every node of a pool with limits and every node running a pod with required anti-affinity).
    A node that cannot take any of the pods changes nothing in the answer, so this only trims work; a pod
    with topology spread or pod (anti-)affinity always gets the whole cluster. None: always the whole
    cluster."""


class Context:
    """One plan in progress, shared by the methods in turn."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        pools: list[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        clock: PlanTime,
        settings: PlannerSettings,
        solve: SolveFn,
        budgets: BudgetTracker,
        removed: set[str],
        facts: Facts,
        verdicts: Verdicts | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.pools = {p.name: p for p in pools}
        self.pool_list = pools
        self.instance_types = instance_types
        self.clock = clock
        """The plan's `now`: every rule that depends on time asks it (`plan_time.PlanTime`)."""
        self.settings = settings
        self._solve = solve
        self.budgets = budgets
        self.result = DisruptionPlan(now=clock.now)
        self.nodes: dict[str, StateNode] = {n.name: n for n in snapshot.nodes}
        """Every node as this plan leaves it: receivers carry the pods moved onto them."""
        self.removed = removed
        """Nodes gone from the cluster's future: already disrupting, or taken by a command of this plan."""
        self.destinations: set[str] = set()
        """Nodes that receive pods from a command of this plan (kept, so the plan holds)."""
        self.launched: list[StateNode] = []
        """What this plan's commands launch into pools with limits, as nodes that take no pods: until
        the claims exist, later re-solves of the plan count them toward their pools' limits."""
        self.candidates: list[StateNode] = []
        self.owned: list[StateNode] = []
        """Every node with a claim not already being disrupted, candidate or not (expiration takes any)."""
        self.facts: Callable[[StateNode], NodeFacts] = facts.of
        """What the planner reads of a node alone, worked out once (`facts`); asked in every loop, so the
        registry's own lookup rather than a method around it."""
        self.pdbs = PDBLedger(snapshot.pdbs, snapshot.bound_pods())
        self.view = SolverView(
            snapshot,
            nodes=self.nodes,
            pools=pools,
            nodes_per_pod=settings.nodes_per_pod,
            facts=facts,
            # Not a method of the context: the view would hold the context and the context the view, and
            # every plan (its blockers, its unbound pods, its targets) would wait for the cyclic garbage
            # collector instead of going when the plan is made.
            receives=_receiver(facts.of, self.pools, clock),
        )
        self._unbound: dict[int, tuple[StateNode, tuple[Pod, ...]]] = {}
        """Per node re-solved, its workload without a node, made once per plan (multi-node's search
        re-solves the same nodes in several prefixes); not kept in the facts, where a copy of every
        re-solved pod would outlive the plan."""
        self._blockers: dict[tuple[str, str], Blocker] = {}
        self.on_the_way: tuple[Pod, ...] = (
            *snapshot.pending_pods,
            *(p for n in snapshot.nodes if n.name in removed for p in facts.of(n).workload),
        )
        """Pods with no settled node yet: the pending ones, and those of the nodes already being disrupted
        (the capacity launched for them must not be taken from them)."""
        self._landing: dict[str, tuple[Pod, ...]] = {}
        """Per node looked at as a destination, the pods on their way that can land on it
        (`destination_blocker`)."""
        self.verdicts = verdicts
        """Consolidation keep-verdicts of earlier plans, when the caller keeps them."""
        # Every re-solve of the plan is over the same pools, types and daemonsets: compile them once.
        self._solve_options = SolveOptions(compiled=CompiledPools(pools, instance_types, snapshot.daemonsets))

    def block(self, node: StateNode, kind: BlockerKind, detail: str, *, method: str) -> None:
        """Record why `method` keeps the node (the last word of a method about a node wins)."""
        self._blockers[(node.name, method)] = Blocker(
            node=node.name, nodepool=self.facts(node).nodepool or "", kind=kind, detail=detail, method=method
        )

    def blockers(self) -> list[Blocker]:
        """The blockers of the nodes no command took."""
        disrupted = self.result.disrupted
        return [b for b in self._blockers.values() if b.node not in disrupted]

    def free(self, node: StateNode) -> bool:
        return node.name not in self.removed and node.name not in self.destinations

    def remove(self, names: Iterable[str]) -> None:
        """Take these nodes out of the cluster's future before their commands are made (none of them may
        receive the pods of another)."""
        names = list(names)
        self.removed.update(names)
        self.view.drop(names)

    def done(self) -> bool:
        limit = self.settings.max_commands
        return limit is not None and len(self.result.commands) >= limit

    def pool(self, node: StateNode) -> NodePool:
        """The node's pool (candidates always have one)."""
        return self.pools[self.facts(node).nodepool or ""]

    def simulate(
        self,
        nodes: Sequence[StateNode],
        *,
        instance_types: Mapping[str, Sequence[InstanceType]] | None = None,
    ) -> Results:
        """Re-solve the nodes' pods as if the nodes were gone, sending none where `destination_blocker`
        forbids: each destination it names is hidden and the pods re-solved, so they go elsewhere or onto
        new capacity (the forceful and return moves, which do not wait for the room, as consolidation does).
        """
        pods = [p for n in nodes for p in self.facts(n).workload]
        hidden = {n.name for n in nodes}
        closed: list[StateNode] = []
        while True:
            shown = self._counted(self.view.for_pods(pods, removed=self.removed, excluded=hidden), closed)
            results = self.solve(nodes, shown, instance_types=instance_types)
            blocked = {name for name, _, _ in self._destination_blocks(results.placements)} - hidden
            if not blocked:
                return results
            hidden |= blocked
            # A destination hidden is still capacity of its pool: it counts toward the pool's limits.
            closed += [_closed(self.nodes[name]) for name in sorted(blocked) if self._in_limited_pool(name)]

    def _in_limited_pool(self, name: str) -> bool:
        """Whether the node's pool has limits."""
        return self._limited(self.nodes[name].nodepool)

    def _limited(self, pool_name: str | None) -> bool:
        pool = self.pools.get(pool_name or "")
        return pool is not None and bool(pool.spec.limits)

    def shown(self, nodes: Sequence[StateNode]) -> Snapshot:
        """The snapshot a re-solve of the nodes' pods is shown."""
        pods = [p for n in nodes for p in self.facts(n).workload]
        return self._counted(self.view.for_pods(pods, removed=self.removed, excluded={n.name for n in nodes}))

    def _counted(self, shown: Snapshot, closed: Sequence[StateNode] = ()) -> Snapshot:
        """`shown` with what still counts toward pools' limits though it takes no pods: the nodes of
        limited pools already taken (being disrupted, or by an earlier command of this plan: they exist
        until they are gone, and provisioning counts them so too), what this plan launches, and the
        `closed` destinations. Without them a replacement could launch past a pool's limit."""
        # Without their pods: those are on their way elsewhere, and only the capacity counts here.
        taken = [
            dataclasses.replace(_closed(self.nodes[name]), pods=())
            for name in sorted(self.removed)
            if self._in_limited_pool(name)
        ]
        extra = (*taken, *self.launched, *closed)
        return dataclasses.replace(shown, nodes=(*shown.nodes, *extra)) if extra else shown

    def solve(
        self,
        nodes: Sequence[StateNode],
        shown: Snapshot,
        *,
        instance_types: Mapping[str, Sequence[InstanceType]] | None = None,
    ) -> Results:
        """Re-solve the nodes' pods, unbound, on what `shown` gave for them."""
        self.result.solves += 1
        return self._solve(
            [p for n in nodes for p in self._unbound_pods(n)],
            shown,
            pools=self.pool_list,
            instance_types=instance_types or self.instance_types,
            daemonsets=self.snapshot.daemonsets,
            options=self._solve_options,
        )

    def _unbound_pods(self, node: StateNode) -> tuple[Pod, ...]:
        found = self._unbound.get(id(node))
        if found is None or found[0] is not node:
            found = (node, tuple(p.unbound() for p in self.facts(node).workload))
            self._unbound[id(node)] = found
        return found[1]

    def recall(
        self, nodes: Sequence[StateNode], shown: Snapshot
    ) -> tuple[tuple[object, ...], Verdict | None]:
        """What a keep-verdict on these nodes re-solved on `shown` depends on, and the verdict an earlier
        plan made from exactly that (None: re-solve)."""
        if self.verdicts is None:
            return (), None
        key = verdicts.inputs(nodes, shown)
        found = self.verdicts.get(tuple(n.name for n in nodes), key)
        if found is not None:
            self.result.reused += 1
        return key, found

    def remember(self, nodes: Sequence[StateNode], key: tuple[object, ...], verdict: Verdict) -> None:
        """Keep the verdict of a re-solve that `recall` did not know, for the next plans. A verdict that
        rests on pending pods or on the time (`AWAITED`, `NOT_SETTLED`) is not kept: the verdict's inputs
        hold neither."""
        if self.verdicts is not None and verdict[0] not in (BlockerKind.AWAITED, BlockerKind.NOT_SETTLED):
            self.verdicts.keep(tuple(n.name for n in nodes), key, verdict)

    def destination_blocker(self, placements: Sequence[Placement]) -> tuple[BlockerKind, str] | None:
        """Why the pods a command moves must not go where a re-solve put them, or None: capacity still in
        flight, that is a node or claim not initialized yet, a node within its pool's consolidateAfter, or
        room that the pending pods able to land on a node (those it was launched for, or pods being placed
        there, not bound yet) need together with the moved pods."""
        for _, kind, detail in self._destination_blocks(placements):
            return kind, detail
        return None

    def _destination_blocks(self, placements: Sequence[Placement]) -> Iterator[tuple[str, BlockerKind, str]]:
        """Every destination of `placements` that `destination_blocker` forbids, with the blocker."""
        by_node: dict[str, list[Pod]] = {}
        for placement in placements:
            by_node.setdefault(placement.node, []).append(placement.pod)
        for name, pods in by_node.items():
            node = self.nodes.get(name)
            if node is None:
                continue
            if cand.not_initialized(node):
                yield (
                    name,
                    BlockerKind.PODS_DO_NOT_FIT,
                    f"pod {pods[0].key} would go to {name}, not initialized yet",
                )
                continue
            if self._settling(node):
                yield (
                    name,
                    BlockerKind.NOT_SETTLED,
                    f"pod {pods[0].key} would go to {name}, where a pod arrived or left less than its pool's "
                    "consolidateAfter ago",
                )
                continue
            landing = self._landing.get(name)
            if landing is None:
                landing = self._landing[name] = tuple(cand.landing(node, self.on_the_way))
            if not landing:
                continue
            wanted: dict[str, int] = {}
            for pod in (*landing, *pods):
                wanted = quantities.add(wanted, pod.requests)
            if not quantities.fits(wanted, node.available):
                yield (
                    name,
                    BlockerKind.AWAITED,
                    f"pod {pods[0].key} would take the room on {name} that pod {landing[0].key}, on its way, "
                    "is about to use",
                )

    def _settling(self, node: StateNode) -> bool:
        return _settling(node, self.facts, self.pools, self.clock)

    def gate(self, nodes: Sequence[StateNode], reason: DisruptionReason, *, method: str) -> bool:
        """Budgets and PDBs for disrupting these nodes together; records the blocker when they say no."""
        per_pool: dict[str, int] = {}
        for node in nodes:
            pool = self.facts(node).nodepool or ""
            per_pool[pool] = per_pool.get(pool, 0) + 1
        for pool, count in per_pool.items():
            why = self.budgets.blocker(pool, reason, count)
            if why is not None:
                for node in nodes:
                    self.block(node, BlockerKind.BUDGET, why, method=method)
                return False
        why = self.pdbs.blocker(p for n in nodes for p in self.facts(n).workload)
        if why is not None:
            for node in nodes:
                self.block(node, BlockerKind.PDB, why, method=method)
            return False
        return True

    def records(
        self,
        nodes: Sequence[StateNode],
        results: Results | None,
        *,
        reason: DisruptionReason,
        detail: str = "",
    ) -> tuple[NodeRecord, ...]:
        return records.node_records(
            nodes, results, reason=reason, detail=detail, teams=self.snapshot.team_names()
        )

    def accept(self, command: Command, results: Results | None) -> None:
        """Take the command into the plan: its nodes spend budgets and evictions, and its pods land
        where the re-solve put them."""
        for node in command.nodes:
            self.removed.add(node.name)
            self.budgets.take(self.facts(node).nodepool or "")
        self.pdbs.spend(p for n in command.nodes for p in self.facts(n).workload)
        if results is not None:
            for placement in results.placements:
                dest = self.nodes.get(placement.node)
                if dest is None:
                    continue
                self.nodes[placement.node] = dataclasses.replace(dest, pods=(*dest.pods, placement.pod))
                self.destinations.add(placement.node)
                self.view.moved(placement.node, placement.pod)
            for claim in results.new_claims:
                if self._limited(claim.nodepool.name):
                    self.launched.append(_planned(claim, len(self.launched)))
        self.view.drop(n.name for n in command.nodes)
        self.result.commands.append(command)


def _settling(
    node: StateNode, facts: Callable[[StateNode], NodeFacts], pools: Mapping[str, NodePool], clock: PlanTime
) -> bool:
    """Whether a node of ours is still within its pool's consolidateAfter since a pod last arrived or
    left: it takes no pods a command moves (Karpenter's "should not consolidate pods onto a destination
    node that is under its consolidateAfter window"). `Never` and zero never hold a node."""
    known = facts(node)
    pool = pools.get(known.nodepool or "")
    if pool is None or node.claim is None or known.last_pod_event is None:
        return False
    wait = durations.parse_duration(pool.spec.disruption.consolidate_after)
    if not wait:
        return False
    return not clock.reached(known.last_pod_event + wait)


def _receiver(
    facts: Callable[[StateNode], NodeFacts], pools: Mapping[str, NodePool], clock: PlanTime
) -> Callable[[StateNode], bool]:
    """Whether a node may receive the pods a command moves: initialized and not settling."""
    return lambda node: not cand.not_initialized(node) and not _settling(node, facts, pools, clock)


def _planned(claim: NewClaim, index: int) -> StateNode:
    """A claim a command of the plan launches, as a node of its pool that takes no pods: its likely type's
    capacity (the first option, as a claim in flight counts) weighs on the pool's limits."""
    capacity = claim.instance_types[0].capacity if claim.instance_types else dict(claim.requests)
    name = f"planned-{index}-{claim.hostname}"
    labels = {wk.NODEPOOL: claim.nodepool.name}
    shut = Node(
        name=name, labels=labels, capacity=capacity, allocatable={quantities.PODS: 0}, unschedulable=True
    )
    return StateNode(name=name, node=shut)


def _closed(node: StateNode) -> StateNode:
    """The node as a destination hidden from a re-solve: nothing allocatable, so no pod goes there, but
    its capacity still counts toward its pool's limits."""
    shut = node.node and dataclasses.replace(node.node, allocatable={quantities.PODS: 0})
    claim = node.claim
    if claim is not None:
        status = claim.status.model_copy(update={"allocatable": {quantities.PODS: "0"}})
        claim = claim.model_copy(update={"status": status})
    return dataclasses.replace(node, node=shut, claim=claim)
