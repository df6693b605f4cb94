"""The disruption planner: from a snapshot, the pools, their instance types, settings and `now`, the
commands that remove or replace nodes, in Karpenter's order of methods, plus why every other node stays.

Methods, in order: expiration, drift, emptiness, multi-node consolidation, single-node consolidation,
return to the preferred tier. Each node appears in at most one command; commands spend the pools'
budgets and the PDBs' allowed evictions as they are accepted, and the pods they move count against the
capacity of the nodes that receive them, so later commands in the same plan see what earlier ones did.

Pods are proven to fit by re-solving with the scheduler (`solve`), never by guessing. Two cheap screens
avoid solves that cannot succeed: a first-fit of the pods on the remaining nodes' free capacity (a node
whose pods obviously fit elsewhere is tried for deletion), and a price floor (the cheapest instance type
able to hold all the pods at once: when even that is not cheaper, no replacement can be).

Pure: no clock, no client; `now` and settings come in, a `Plan` goes out.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from provisioner.api import NodePool, durations, quantities
from provisioner.api import labels as wk
from provisioner.api.common import Operator, Requirement, is_true
from provisioner.api.hashing import nodeclass_hash, nodepool_hash
from provisioner.api.nodeclaim import DRIFTED
from provisioner.api.nodepool import ConsolidationPolicy, DisruptionReason
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import candidates as cand
from provisioner.disruption.budgets import BudgetTracker
from provisioner.disruption.model import Blocker, BlockerKind, Command, NodeRecord, Plan, PodMove
from provisioner.disruption.pdbs import PDBLedger
from provisioner.scheduling.results import NewClaim, Results
from provisioner.state.cluster import Snapshot, StateNode, team_of
from provisioner.state.objects import Pod, SelectorRequirement, tolerates_all

SolveFn = Callable[..., Results]
"""`solve(pods, snapshot, *, pools, instance_types, daemonsets=None, options=None) -> Results`."""

_CENT = 1e-9


@dataclass(frozen=True, slots=True)
class Settings:
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


def _default_solve() -> SolveFn:
    from provisioner import scheduling

    solve = getattr(scheduling, "solve", None)
    if solve is None:
        raise RuntimeError("provisioner.scheduling.solve is not available; pass solve= to plan()")
    return solve


def plan(
    snapshot: Snapshot,
    *,
    instance_types: Mapping[str, Sequence[InstanceType]],
    now: datetime,
    settings: Settings = Settings(),
    pools: Sequence[NodePool] | None = None,
    solve: SolveFn | None = None,
) -> Plan:
    """Every disruption worth doing now, within budgets and PDBs, and the blocker of every node kept."""
    return _Planner(
        snapshot,
        pools=list(pools if pools is not None else snapshot.nodepools),
        instance_types=instance_types,
        now=cand.aware(now) or now,
        settings=settings,
        solve=solve or _default_solve(),
    ).run()


class _CachedNode(StateNode):
    """A StateNode whose requests are summed once. The planner re-solves hundreds of times over the same
    nodes, and the scheduler reads `requested` for every node of every snapshot it is given."""

    __slots__ = ("_requested",)

    @property
    def requested(self) -> dict[str, int]:
        return self._requested


def _cached(node: StateNode) -> StateNode:
    fast = _CachedNode(name=node.name, node=node.node, claim=node.claim, pods=node.pods)
    object.__setattr__(fast, "_requested", StateNode.requested.fget(node))  # type: ignore[attr-defined]
    return fast


@dataclass(slots=True)
class _Target:
    """A node pods may move to, as the first-fit screen sees it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple
    nodepool: str | None
    available: dict[str, int]


def _fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    return all(amount <= available.get(name, 0) for name, amount in requests.items())


def pin(claim: NewClaim, *, capacity_type: str, below: float | None) -> NewClaim:
    """The replacement as it must launch for the plan to hold: on the planned capacity type and, for a
    consolidation, only on instance types cheaper than what it replaces. Without this a stockout met at
    launch falls back to a dearer offering (on-demand for spot) and the saving, or the return to spot,
    is lost; the next plan would then replace the same node again."""
    options = []
    for it in claim.instance_types:
        offering = it.cheapest(capacity_types={capacity_type})
        if offering is None or (below is not None and offering.price >= below - _CENT):
            continue
        options.append(it)
    if not options:
        options = [claim.instance_type]
    requirements = [r for r in claim.requirements if r.key not in (wk.INSTANCE_TYPE, wk.CAPACITY_TYPE)]
    requirements.append(Requirement(key=wk.CAPACITY_TYPE, operator=Operator.IN, values=[capacity_type]))
    requirements.append(
        Requirement(key=wk.INSTANCE_TYPE, operator=Operator.IN, values=[t.name for t in options])
    )
    return dataclasses.replace(claim, requirements=requirements, instance_types=options)


def _has_pod_topology(pod: Pod) -> bool:
    return bool(
        pod.topology_spread
        or pod.affinity_required
        or pod.affinity_preferred
        or pod.anti_affinity_required
        or pod.anti_affinity_preferred
    )


def _pod_can_use(pod: Pod, target: _Target) -> bool:
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


class _Planner:
    def __init__(
        self,
        snapshot: Snapshot,
        *,
        pools: list[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        now: datetime,
        settings: Settings,
        solve: SolveFn,
    ) -> None:
        self.snapshot = snapshot
        self.pools = {p.name: p for p in pools}
        self.pool_list = pools
        self.instance_types = instance_types
        self.now = now
        self.settings = settings
        self._solve = solve
        self.result = Plan(now=now)
        self.nodes: dict[str, StateNode] = {n.name: _cached(n) for n in snapshot.nodes}
        self.removed: set[str] = set()
        self.destinations: set[str] = set()
        self._blockers: dict[tuple[str, str], Blocker] = {}
        self.candidates: list[StateNode] = []
        self.pdbs = PDBLedger(snapshot.pdbs, snapshot.bound_pods())
        totals: dict[str, int] = {}
        busy: dict[str, int] = {}
        for node in snapshot.nodes:
            if node.claim is None or node.nodepool is None:
                continue
            totals[node.nodepool] = totals.get(node.nodepool, 0) + 1
            if cand.disrupting(node):
                busy[node.nodepool] = busy.get(node.nodepool, 0) + 1
                self.removed.add(node.name)
        self.budgets = BudgetTracker(pools, totals=totals, disrupting=busy, now=now)
        self._targets: list[_Target] | None = None
        self._target_by_name: dict[str, _Target] = {}
        self._target_keys: list[int] = []
        limited = {p.name for p in pools if p.spec.limits}
        self._always_shown = {
            n.name
            for n in snapshot.nodes
            if n.nodepool in limited or any(p.anti_affinity_required for p in n.pods)
        }
        self._price_floor_list: list[tuple[float, dict[str, int]]] | None = None
        self._pool_hashes = {p.name: nodepool_hash(p) for p in pools}
        self._class_hashes = {key: nodeclass_hash(nc) for key, nc in snapshot.nodeclasses.items()}

    # ---- bookkeeping -------------------------------------------------------------------------------

    def block(self, node: StateNode, kind: BlockerKind, detail: str, *, method: str) -> None:
        self._blockers[(node.name, method)] = Blocker(
            node=node.name, nodepool=node.nodepool or "", kind=kind, detail=detail, method=method
        )

    def free(self, node: StateNode) -> bool:
        return node.name not in self.removed and node.name not in self.destinations

    def done(self) -> bool:
        limit = self.settings.max_commands
        return limit is not None and len(self.result.commands) >= limit

    def run(self) -> Plan:
        for node in self.snapshot.nodes:
            if node.claim is None or cand.disrupting(node):
                continue
            self.result.evaluated += 1
            blocker = cand.candidate_blocker(node, self.pools)
            if blocker is not None:
                self.block(node, blocker[0], blocker[1], method="candidates")
            else:
                self.candidates.append(node)
        for method in (
            self.expiration,
            self.drift,
            self.emptiness,
            self.multi_node,
            self.single_node,
            self.return_to_preferred,
        ):
            if self.done():
                break
            method()
        disrupted = self.result.disrupted
        self.result.blockers = [b for b in self._blockers.values() if b.node not in disrupted]
        return self.result

    def working_snapshot(self, excluded: set[str]) -> Snapshot:
        gone = self.removed | excluded
        return dataclasses.replace(
            self.snapshot,
            nodes=tuple(n for name, n in self.nodes.items() if name not in gone),
            pending_pods=(),
        )

    def solve_view(self, pods: Sequence[Pod], excluded: set[str]) -> Snapshot:
        """The snapshot a re-solve sees: the whole cluster, or only the nodes that matter (see
        `Settings.nodes_per_pod`)."""
        per_pod = self.settings.nodes_per_pod
        if per_pod is None or any(_has_pod_topology(p) for p in pods):
            return self.working_snapshot(excluded)
        gone = self.removed | excluded
        keep = {name for name in self._always_shown if name not in gone}
        targets = self.targets()
        for pod in pods:
            cpu = pod.requests.get(quantities.CPU, 0)
            # targets are sorted by free CPU, most first: [0, end) have room for the pod's CPU; walk
            # back from the tightest of them (best fit) so pods go where they fill nodes up.
            end = bisect.bisect_right(self._target_keys, -cpu)
            found = 0
            for index in range(end - 1, -1, -1):
                target = targets[index]
                if target.name in gone or not _fits(pod.requests, target.available):
                    continue
                if not _pod_can_use(pod, target):
                    continue
                keep.add(target.name)
                found += 1
                if found >= per_pod:
                    break
        return dataclasses.replace(
            self.snapshot,
            nodes=tuple(n for name, n in self.nodes.items() if name in keep),
            pending_pods=(),
        )

    def simulate(
        self,
        nodes: Sequence[StateNode],
        *,
        instance_types: Mapping[str, Sequence[InstanceType]] | None = None,
    ) -> Results:
        pods = [dataclasses.replace(p, node_name=None) for n in nodes for p in cand.reschedulable(n)]
        self.result.solves += 1
        return self._solve(
            pods,
            self.solve_view(pods, {n.name for n in nodes}),
            pools=self.pool_list,
            instance_types=instance_types or self.instance_types,
            daemonsets=self.snapshot.daemonsets,
        )

    def accept(self, command: Command, results: Results | None) -> None:
        for node in command.nodes:
            self.removed.add(node.name)
            self.budgets.take(node.nodepool or "")
        self.pdbs.spend(p for n in command.nodes for p in cand.reschedulable(n))
        if results is not None:
            for placement in results.placements:
                dest = self.nodes.get(placement.node)
                if dest is None:
                    continue
                self.nodes[placement.node] = _cached(
                    dataclasses.replace(dest, pods=(*dest.pods, placement.pod))
                )
                self.destinations.add(placement.node)
                target = self._target_by_name.get(placement.node)
                if target is not None:
                    target.available = quantities.subtract(target.available, placement.pod.requests)
        if self._targets is not None:
            self._targets = [t for t in self._targets if t.name not in self.removed]
            # Nearly sorted already: only the destinations moved down.
            self._targets.sort(key=lambda t: -t.available.get(quantities.CPU, 0))
            self._target_keys = [-t.available.get(quantities.CPU, 0) for t in self._targets]
        self.result.commands.append(command)

    def gate(self, nodes: Sequence[StateNode], reason: DisruptionReason, *, method: str) -> bool:
        """Budgets and PDBs for disrupting these nodes together; records the blocker when they say no."""
        per_pool: dict[str, int] = {}
        for node in nodes:
            per_pool[node.nodepool or ""] = per_pool.get(node.nodepool or "", 0) + 1
        for pool, count in per_pool.items():
            why = self.budgets.blocker(pool, reason, count)
            if why is not None:
                for node in nodes:
                    self.block(node, BlockerKind.BUDGET, why, method=method)
                return False
        why = self.pdbs.blocker(p for n in nodes for p in cand.reschedulable(n))
        if why is not None:
            for node in nodes:
                self.block(node, BlockerKind.PDB, why, method=method)
            return False
        return True

    # ---- records -----------------------------------------------------------------------------------

    def records(
        self,
        nodes: Sequence[StateNode],
        results: Results | None,
        *,
        reason: DisruptionReason,
        detail: str = "",
    ) -> tuple[NodeRecord, ...]:
        where: dict[str, str] = {}
        claims = list(results.new_claims) if results is not None else []
        if results is not None:
            for placement in results.placements:
                where[placement.pod.key] = placement.node
            for claim in claims:
                for pod in claim.pods:
                    where[pod.key] = f"new:{claim.instance_type.name}"
        before = sum(n.price for n in nodes)
        after = sum(c.price for c in claims)
        replacement = "+".join(c.instance_type.name for c in claims) or None
        replacement_ct = claims[0].offering.capacity_type if claims else None
        out = []
        for node in nodes:
            pods = cand.reschedulable(node)
            moves = tuple(
                PodMove(
                    pod=p.key,
                    destination=where.get(p.key, "unknown"),
                    team=team_of(p, self.snapshot.namespaces),
                )
                for p in pods
            )
            share = after * (node.price / before) if before > 0 else after / max(1, len(nodes))
            out.append(
                NodeRecord(
                    node=node.name,
                    nodepool=node.nodepool or "",
                    reason=reason,
                    instance_type=cand.instance_type(node),
                    capacity_type=cand.capacity_type(node),
                    zone=cand.zone(node),
                    price_per_hour=node.price,
                    pods=moves,
                    teams=tuple(sorted({m.team for m in moves if m.team})),
                    replacement_type=replacement,
                    replacement_capacity_type=replacement_ct,
                    replacement_price_per_hour=share,
                    detail=detail,
                )
            )
        return tuple(out)

    # ---- expiration and drift ------------------------------------------------------------------------

    def _replace_forcefully(
        self, node: StateNode, reason: DisruptionReason, *, method: str, detail: str
    ) -> None:
        """Expired and drifted nodes go whatever the price; their pods must still have somewhere to go."""
        if not self.gate([node], reason, method=method):
            return
        results = self.simulate([node]) if cand.reschedulable(node) else Results()
        if results.unschedulable:
            first = results.unschedulable[0]
            why = "; ".join(f"{r.nodepool}: {r.reason}" for r in first.reasons) or "no pool can take it"
            self.block(
                node,
                BlockerKind.PODS_DO_NOT_FIT,
                f"pod {first.pod.key} would not reschedule ({why})",
                method=method,
            )
            return
        command = Command(
            reason=reason,
            method=method,
            nodes=(node,),
            replacements=tuple(results.new_claims),
            records=self.records([node], results, reason=reason, detail=detail),
        )
        self.accept(command, results)

    def expiration(self) -> None:
        for node in self.candidates:
            if self.done() or not self.free(node):
                continue
            assert node.claim is not None
            expire_after = durations.parse_duration(node.claim.spec.expire_after)
            born = cand.created(node)
            if expire_after is None or born is None or born + expire_after > self.now:
                continue
            detail = f"created {born.isoformat()}, expireAfter {node.claim.spec.expire_after}"
            self._replace_forcefully(node, DisruptionReason.EXPIRED, method="expiration", detail=detail)

    def drift_reason(self, node: StateNode) -> str | None:
        assert node.claim is not None
        pool = self.pools[node.nodepool or ""]
        annotations = node.claim.metadata.annotations
        stamped = annotations.get(wk.NODEPOOL_HASH)
        if stamped and stamped != self._pool_hashes[pool.name]:
            return f"pool template changed (hash {stamped} -> {self._pool_hashes[pool.name]})"
        ref = node.claim.spec.node_class_ref
        stamped = annotations.get(wk.NODECLASS_HASH)
        current = self._class_hashes.get((ref.kind, ref.name))
        if stamped and current and stamped != current:
            return f"{ref.kind} {ref.name} changed (hash {stamped} -> {current})"
        if is_true(node.claim.status.conditions, DRIFTED):
            return "the cloud provider reports the node drifted"
        labels = node.labels
        for req in pool.spec.template.spec.requirements:
            if req.key not in labels:
                continue
            selector = SelectorRequirement(key=req.key, operator=req.operator.value, values=tuple(req.values))
            if not selector.matches(labels):
                return f"label {req.key}={labels[req.key]} no longer meets the pool's requirement"
        return None

    def drift(self) -> None:
        for node in self.candidates:
            if self.done() or not self.free(node):
                continue
            why = self.drift_reason(node)
            if why is not None:
                self._replace_forcefully(node, DisruptionReason.DRIFTED, method="drift", detail=why)

    # ---- emptiness ---------------------------------------------------------------------------------

    def emptiness(self) -> None:
        chosen: list[StateNode] = []
        for node in self.candidates:
            if not self.free(node) or cand.reschedulable(node):
                continue
            pool = self.pools[node.nodepool or ""]
            if not cand.settled(cand.empty_since(node), pool, self.now):
                self.block(
                    node,
                    BlockerKind.NOT_SETTLED,
                    f"empty for less than consolidateAfter {pool.spec.disruption.consolidate_after}",
                    method="emptiness",
                )
                continue
            why = self.budgets.blocker(pool.name, DisruptionReason.EMPTY)
            if why is not None:
                self.block(node, BlockerKind.BUDGET, why, method="emptiness")
                continue
            self.budgets.take(pool.name)
            chosen.append(node)
        if not chosen:
            return
        # Room was taken node by node above; give it back so `accept` takes it once.
        for node in chosen:
            self.budgets.used[node.nodepool or ""] -= 1
        command = Command(
            reason=DisruptionReason.EMPTY,
            method="emptiness",
            nodes=tuple(chosen),
            records=self.records(chosen, None, reason=DisruptionReason.EMPTY, detail="no workload pods"),
        )
        self.accept(command, None)

    # ---- consolidation -----------------------------------------------------------------------------

    def consolidatable(self, node: StateNode, *, method: str) -> bool:
        pool = self.pools[node.nodepool or ""]
        if pool.spec.disruption.consolidation_policy != ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED:
            self.block(
                node,
                BlockerKind.POLICY,
                f"pool {pool.name} consolidates only empty nodes (WhenEmpty)",
                method=method,
            )
            return False
        if not cand.settled(cand.last_pod_event(node), pool, self.now):
            self.block(
                node,
                BlockerKind.NOT_SETTLED,
                f"a pod arrived or left less than consolidateAfter "
                f"{pool.spec.disruption.consolidate_after} ago",
                method=method,
            )
            return False
        return True

    def min_savings(self, nodes: Sequence[StateNode]) -> Decimal:
        return max((self.pools[n.nodepool or ""].min_savings_per_pod_hour for n in nodes), default=Decimal(0))

    def judge(
        self,
        nodes: Sequence[StateNode],
        results: Results,
    ) -> tuple[BlockerKind, str] | None:
        """Whether a consolidation re-solve is worth acting on; the blocker when it is not."""
        if results.unschedulable:
            first = results.unschedulable[0]
            why = "; ".join(f"{r.nodepool}: {r.reason}" for r in first.reasons) or "no pool can take it"
            return BlockerKind.PODS_DO_NOT_FIT, f"pod {first.pod.key} fits nowhere else ({why})"
        before = sum(n.price for n in nodes)
        if len(results.new_claims) > 1:
            return BlockerKind.NOT_CHEAPER, f"its pods would need {len(results.new_claims)} new nodes"
        after = results.cost_per_hour
        if after >= before - _CENT:
            claim = results.new_claims[0]
            return (
                BlockerKind.NOT_CHEAPER,
                f"the cheapest replacement {claim.instance_type.name} costs ${after:.4f}/h, "
                f"not less than ${before:.4f}/h",
            )
        if results.new_claims:
            claim = results.new_claims[0]
            all_spot = all(cand.capacity_type(n) == wk.CAPACITY_TYPE_SPOT for n in nodes)
            if all_spot and claim.offering.capacity_type == wk.CAPACITY_TYPE_SPOT:
                cheaper = sum(
                    1
                    for it in claim.instance_types
                    if (o := it.cheapest(capacity_types={wk.CAPACITY_TYPE_SPOT})) is not None
                    and o.price < before
                )
                if cheaper < self.settings.spot_to_spot_min_options:
                    return (
                        BlockerKind.SPOT_TO_SPOT,
                        f"spot-to-spot replacement needs {self.settings.spot_to_spot_min_options} cheaper "
                        f"spot options, only {cheaper} offered",
                    )
        pods = sum(len(cand.reschedulable(n)) for n in nodes)
        least = self.min_savings(nodes)
        saving = before - after
        if pods and least > 0 and Decimal(repr(saving / pods)) < least:
            return (
                BlockerKind.MIN_SAVINGS,
                f"saves ${saving / pods:.4f}/h per evicted pod, under the pool's minimum ${least}/h",
            )
        return None

    def consolidation_candidates(self, method: str) -> list[StateNode]:
        out = [
            n
            for n in self.candidates
            if self.free(n) and cand.reschedulable(n) and self.consolidatable(n, method=method)
        ]
        # GPU nodes held only by CPU pods first: an idle GPU is the largest waste in the fleet.
        out.sort(key=lambda n: (not self.gpu_idle(n), cand.disruption_cost(n), -n.price, n.name))
        return out

    def gpu_idle(self, node: StateNode) -> bool:
        return cand.is_gpu_node(node) and all(p.gpus == 0 for p in cand.reschedulable(node))

    def try_consolidate(self, nodes: Sequence[StateNode], *, method: str) -> tuple[Command, Results] | None:
        results = self.simulate(nodes)
        if self.judge(nodes, results) is not None:
            return None
        return self.command(nodes, results, method=method), results

    def command(self, nodes: Sequence[StateNode], results: Results, *, method: str) -> Command:
        detail = ""
        if any(self.gpu_idle(n) for n in nodes):
            detail = "GPU node held only by CPU pods; they move to CPU capacity"
        return Command(
            reason=DisruptionReason.UNDERUTILIZED,
            method=method,
            nodes=tuple(nodes),
            replacements=tuple(
                pin(c, capacity_type=c.offering.capacity_type, below=sum(n.price for n in nodes))
                for c in results.new_claims
            ),
            records=self.records(nodes, results, reason=DisruptionReason.UNDERUTILIZED, detail=detail),
        )

    def multi_node(self) -> None:
        pool_room: dict[str, int | None] = {}
        chosen: list[StateNode] = []
        for node in self.consolidation_candidates("multi-node"):
            pool = node.nodepool or ""
            if pool not in pool_room:
                pool_room[pool] = self.budgets.room(pool, DisruptionReason.UNDERUTILIZED)
            room = pool_room[pool]
            if room is not None and room <= 0:
                continue
            if self.pdbs.blocker(cand.reschedulable(node)) is not None:
                continue
            if room is not None:
                pool_room[pool] = room - 1
            chosen.append(node)
            if len(chosen) >= self.settings.multi_node_max_candidates:
                break
        if len(chosen) < 2:
            return
        # Binary search for the longest prefix that re-solves into at most one cheaper node, as Karpenter.
        lo, hi = 2, len(chosen)
        best: tuple[Command, Results] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            prefix = chosen[:mid]
            found = None
            if self.pdbs.blocker(p for n in prefix for p in cand.reschedulable(n)) is None:
                found = self.try_consolidate(prefix, method="multi-node")
            if found is not None:
                best = found
                lo = mid + 1
            else:
                hi = mid - 1
        if best is not None:
            self.accept(*best)

    def targets(self) -> list[_Target]:
        if self._targets is None:
            targets = [
                _Target(
                    name=n.name,
                    labels=n.labels,
                    taints=n.taints,
                    nodepool=n.nodepool,
                    available=n.available,
                )
                for n in self.nodes.values()
                if n.name not in self.removed and not n.cordoned and not n.deleting
            ]
            targets.sort(key=lambda t: -t.available.get(quantities.CPU, 0))
            self._targets = targets
            self._target_by_name = {t.name: t for t in targets}
            self._target_keys = [-t.available.get(quantities.CPU, 0) for t in targets]
        return self._targets

    def pods_fit_elsewhere(self, node: StateNode) -> bool:
        """First-fit screen of the node's pods on the other nodes' free capacity (optimistic about
        topology, which `solve` then checks)."""
        used: dict[str, dict[str, int]] = {}
        pods = sorted(cand.reschedulable(node), key=lambda p: -p.requests.get(quantities.CPU, 0))
        targets = self.targets()
        for pod in pods:
            cpu = pod.requests.get(quantities.CPU, 0)
            placed = False
            for target in targets:
                if target.available.get(quantities.CPU, 0) < cpu:
                    break  # sorted by free CPU: no later node has room
                if target.name == node.name:
                    continue
                free = used.get(target.name, target.available)
                if not _fits(pod.requests, free) or not _pod_can_use(pod, target):
                    continue
                used[target.name] = quantities.subtract(free, pod.requests)
                placed = True
                break
            if not placed:
                return False
        return True

    def price_floors(self) -> list[tuple[float, dict[str, int]]]:
        """(price, allocatable) of every available offering, cheapest first; built on first use (most
        plans never need it) with each type's allocatable computed once."""
        if self._price_floor_list is None:
            out: list[tuple[float, dict[str, int]]] = []
            seen: set[int] = set()
            for types in self.instance_types.values():
                for it in types:
                    if id(it) in seen:
                        continue
                    seen.add(id(it))
                    prices = {o.price for o in it.offerings if o.available}
                    if prices:
                        out.append((min(prices), it.allocatable))
            out.sort(key=lambda pair: pair[0])
            self._price_floor_list = out
        return self._price_floor_list

    def price_floor(self, node: StateNode) -> float | None:
        """The cheapest available offering of any type able to hold all the node's pods at once."""
        total: dict[str, int] = {}
        for pod in cand.reschedulable(node):
            total = quantities.add(total, pod.requests)
        for price, allocatable in self.price_floors():
            if _fits(total, allocatable):
                return price
        return None

    def single_node(self) -> None:
        for node in self.consolidation_candidates("single-node"):
            if self.done():
                return
            if not self.free(node):
                if node.name in self.destinations:
                    self.block(
                        node, BlockerKind.IN_PLAN, "receives pods from another command", method="single-node"
                    )
                continue
            if not self.gate([node], DisruptionReason.UNDERUTILIZED, method="single-node"):
                continue
            if not self.pods_fit_elsewhere(node):
                floor = self.price_floor(node)
                if floor is None or floor >= node.price - _CENT:
                    shown = (
                        "no instance type"
                        if floor is None
                        else f"the cheapest type that fits (${floor:.4f}/h)"
                    )
                    self.block(
                        node,
                        BlockerKind.NOT_CHEAPER,
                        f"its pods fit on no other node and {shown} is not cheaper than ${node.price:.4f}/h",
                        method="single-node",
                    )
                    continue
            results = self.simulate([node])
            why = self.judge([node], results)
            if why is not None:
                self.block(node, why[0], why[1], method="single-node")
                continue
            command = self.command([node], results, method="single-node")
            if self.back_to_spot(node, results):
                # Cheaper because spot is back: the FinOps record says so, and that reason's budget holds.
                if not self.gate([node], DisruptionReason.RETURN_TO_PREFERRED, method="single-node"):
                    continue
                command = self.relabel(
                    command, DisruptionReason.RETURN_TO_PREFERRED, "on-demand fallback returns to spot"
                )
            self.accept(command, results)

    def back_to_spot(self, node: StateNode, results: Results) -> bool:
        """An on-demand node of a pool that allows spot, replaced by spot capacity."""
        return (
            cand.capacity_type(node) == wk.CAPACITY_TYPE_ON_DEMAND
            and self.allows_spot(self.pools[node.nodepool or ""])
            and bool(results.new_claims)
            and all(c.offering.capacity_type == wk.CAPACITY_TYPE_SPOT for c in results.new_claims)
        )

    @staticmethod
    def relabel(command: Command, reason: DisruptionReason, detail: str) -> Command:
        command.reason = reason
        command.records = tuple(
            dataclasses.replace(r, reason=reason, detail="; ".join(x for x in (r.detail, detail) if x))
            for r in command.records
        )
        return command

    # ---- return to the preferred tier --------------------------------------------------------------

    def allows_spot(self, pool: NodePool) -> bool:
        for req in pool.spec.template.spec.requirements:
            if req.key != wk.CAPACITY_TYPE:
                continue
            selector = SelectorRequirement(key=req.key, operator=req.operator.value, values=tuple(req.values))
            return selector.matches({wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT})
        return False

    def spot_only(self, pool: str) -> dict[str, Sequence[InstanceType]]:
        """The instance types with the pool's on-demand offerings hidden, so the re-solve must find spot."""
        out = dict(self.instance_types)
        out[pool] = [
            it.with_offerings(
                tuple(o for o in it.offerings if o.capacity_type == wk.CAPACITY_TYPE_SPOT and o.available)
            )
            for it in self.instance_types.get(pool, ())
        ]
        return out

    def return_to_preferred(self) -> None:
        if not self.settings.return_to_preferred:
            return
        method = "return-to-preferred"
        for node in self.candidates:
            if self.done():
                return
            if not self.free(node):
                continue
            pods = cand.reschedulable(node)
            pool = self.pools[node.nodepool or ""]
            on_fallback_capacity = cand.capacity_type(
                node
            ) == wk.CAPACITY_TYPE_ON_DEMAND and self.allows_spot(pool)
            # Pods whose list names a more preferred pool than the one they run in.
            demoted = [
                p for p in pods if p.nodepools and pool.name in p.nodepools and p.nodepools[0] != pool.name
            ]
            if not pods or not (on_fallback_capacity or demoted):
                continue
            if not cand.settled(cand.last_pod_event(node), pool, self.now):
                continue
            if not self.gate([node], DisruptionReason.RETURN_TO_PREFERRED, method=method):
                continue
            to_spot = on_fallback_capacity and not demoted
            types = self.spot_only(pool.name) if to_spot else None
            results = self.simulate([node], instance_types=types)
            if results.unschedulable:
                continue
            if not self.lands_on_preferred(node, pods, results, spot=on_fallback_capacity and not demoted):
                continue
            detail = (
                "on-demand fallback returns to spot"
                if on_fallback_capacity and not demoted
                else "pods return to a more preferred pool of their list"
            )
            command = Command(
                reason=DisruptionReason.RETURN_TO_PREFERRED,
                method=method,
                nodes=(node,),
                replacements=tuple(
                    pin(c, capacity_type=wk.CAPACITY_TYPE_SPOT, below=None) if to_spot else c
                    for c in results.new_claims
                ),
                records=self.records(
                    [node], results, reason=DisruptionReason.RETURN_TO_PREFERRED, detail=detail
                ),
            )
            self.accept(command, results)

    def lands_on_preferred(self, node: StateNode, pods: list[Pod], results: Results, *, spot: bool) -> bool:
        """Every pod of the node goes to a strictly better tier than the one it is on."""
        current = node.nodepool or ""
        pool_of: dict[str, str] = {}
        spot_of: dict[str, bool] = {}
        for placement in results.placements:
            dest = self.nodes.get(placement.node)
            pool_of[placement.pod.key] = (dest.nodepool or "") if dest else ""
            spot_of[placement.pod.key] = (
                dest is not None and cand.capacity_type(dest) == wk.CAPACITY_TYPE_SPOT
            )
        for claim in results.new_claims:
            for pod in claim.pods:
                pool_of[pod.key] = claim.nodepool.name
                spot_of[pod.key] = claim.offering.capacity_type == wk.CAPACITY_TYPE_SPOT
        if spot:
            return all(spot_of.get(p.key, False) for p in pods)
        for pod in pods:
            dest = pool_of.get(pod.key)
            if dest is None:
                return False
            order = pod.nodepools
            if not order or current not in order:
                continue
            if dest not in order or order.index(dest) >= order.index(current):
                return False
        return True
