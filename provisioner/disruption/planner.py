"""The disruption planner: from a snapshot, the pools, their instance types, settings and `now`, the
commands that remove or replace nodes, in Karpenter's order of methods, plus why every other node stays.

Methods, in order: expiration and drift (`expiration_drift`), emptiness (`emptiness`), multi-node and
single-node consolidation (`multinode`, `singlenode`, sharing `consolidation`), return to the preferred
tier (`preferred`). Each node appears in at most one command; commands spend the pools' budgets and the
PDBs' allowed evictions as they are accepted, and the pods they move count against the capacity of the
nodes that receive them, so later commands in the same plan see what earlier ones did (`context`). Pods
are proven to fit by re-solving with the scheduler, never by guessing.

This module owns only the orchestration: the budgets as the plan starts, the candidates, the methods in
order until `PlannerSettings.max_commands`, and the resulting `DisruptionPlan` (or the last one again,
when the caller's `memory` says nothing the plan reads has changed since). A plan taking part of a gang is made again
without that gang's nodes (`gangs`).

Pure: no clock, no client; `now` and settings come in, a `DisruptionPlan` goes out. Time is read only
through the plan's `PlanTime`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from provisioner import scheduling
from provisioner.api import NodePool
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import emptiness, expiration_drift, gangs, multinode, preferred, singlenode
from provisioner.disruption.budgets import BudgetTracker
from provisioner.disruption.context import Context, PlannerSettings
from provisioner.disruption.facts import Facts, candidate_blocker
from provisioner.disruption.memory import Inputs, Memory
from provisioner.disruption.model import BlockerKind, DisruptionPlan
from provisioner.disruption.plan_time import PlanTime
from provisioner.disruption.verdicts import Shared
from provisioner.scheduling import SolveFn
from provisioner.state.cluster import Snapshot

METHODS: tuple[Callable[[Context], None], ...] = (
    expiration_drift.reservation_ending,
    expiration_drift.expiration,
    expiration_drift.drift,
    emptiness.run,
    multinode.run,
    singlenode.run,
    preferred.run,
)
"""Karpenter's order: forceful methods first, then the cheapest proofs (no re-solve) before the dearest."""


def _budgets(
    snapshot: Snapshot, pools: Sequence[NodePool], *, clock: PlanTime, facts: Facts
) -> tuple[BudgetTracker, set[str]]:
    """The pools' budgets as the plan starts, and the nodes already being disrupted (they count against
    every reason)."""
    totals: dict[str, int] = {}
    busy: dict[str, int] = {}
    disrupting: set[str] = set()
    for node in snapshot.nodes:
        known = facts.of(node)
        pool = known.nodepool
        if node.claim is None or pool is None:
            continue
        totals[pool] = totals.get(pool, 0) + 1
        if known.disrupting:
            busy[pool] = busy.get(pool, 0) + 1
            disrupting.add(node.name)
    return BudgetTracker(pools, totals=totals, disrupting=busy, clock=clock), disrupting


def plan(
    snapshot: Snapshot,
    *,
    instance_types: Mapping[str, Sequence[InstanceType]],
    now: datetime,
    settings: PlannerSettings = PlannerSettings(),
    pools: Sequence[NodePool] | None = None,
    solve: SolveFn | None = None,
    memory: Memory | None = None,
) -> DisruptionPlan:
    """Every disruption worth doing now, within budgets and PDBs, and the blocker of every node kept.

    `memory`: what the caller keeps of its earlier plans of the same cluster (`memory`); the plan is the
    same with or without it, only cheaper."""
    pool_list = list(pools if pools is not None else snapshot.nodepools)
    solve = solve or scheduling.solve
    inputs = None
    if memory is not None:
        inputs = Inputs.of(
            snapshot, pools=pool_list, instance_types=instance_types, settings=settings, solve=solve
        )
        again = memory.repeat(inputs, now)
        if again is not None:
            return again
    gang_nodes = gangs.gang_nodes(snapshot)
    held: dict[str, str] = {}
    while True:
        result, clock = _plan(
            snapshot,
            pools=pool_list,
            instance_types=instance_types,
            now=now,
            settings=settings,
            solve=solve,
            memory=memory,
            held=held,
        )
        # A command taking part of a gang is made again without that gang's nodes (`gangs`): each pass
        # holds more nodes, so this ends.
        more = {k: v for k, v in gangs.broken(result.commands, gang_nodes).items() if k not in held}
        if not more:
            break
        held.update(more)
    if memory is not None and inputs is not None:
        memory.made(inputs, clock, result)
    return result


def _plan(
    snapshot: Snapshot,
    *,
    pools: list[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    now: datetime,
    settings: PlannerSettings,
    solve: SolveFn,
    memory: Memory | None,
    held: Mapping[str, str],
) -> tuple[DisruptionPlan, PlanTime]:
    pool_list = pools
    clock = PlanTime(now)
    facts = memory.facts if memory is not None else Facts()
    facts.start(snapshot.nodes)
    budgets, disrupting = _budgets(snapshot, pool_list, clock=clock, facts=facts)
    # No method may move pods into a Capacity Block about to end (they would be moved out again).
    types = expiration_drift.without_ending_blocks(instance_types, clock=clock)
    verdicts = memory.verdicts if memory is not None else None
    if verdicts is not None:
        verdicts.start(
            Shared.of(
                pools=pool_list, instance_types=types, snapshot=snapshot, settings=settings, solve=solve
            )
        )
    ctx = Context(
        snapshot,
        pools=pool_list,
        instance_types=types,
        clock=clock,
        settings=settings,
        solve=solve,
        budgets=budgets,
        removed=disrupting,
        facts=facts,
        verdicts=verdicts,
    )
    for node in snapshot.nodes:
        known = facts.of(node)
        if node.claim is None or known.disrupting:
            continue
        ctx.result.evaluated += 1
        ctx.owned.append(node)
        blocker = candidate_blocker(known, ctx.pools, clock=ctx.clock, pdbs=ctx.pdbs, pending=ctx.on_the_way)
        if blocker is None and node.name in held:
            blocker = (BlockerKind.GANG, held[node.name])
        if blocker is not None:
            ctx.block(node, blocker[0], blocker[1], method="candidates")
        else:
            ctx.candidates.append(node)
    for method in METHODS:
        if ctx.done():
            break
        method(ctx)
    ctx.result.blockers = ctx.blockers()
    return ctx.result, clock
