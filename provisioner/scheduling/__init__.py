"""Scheduling, pure: the requirements algebra, topology, and the simulator that turns pods into
placements on existing capacity, new NodeClaims (pool, narrowed requirements, instance type options,
offering) and reasons for the pods no pool can take. No SDK, no clock.

The rooms, bottom up: `requirements` (the label algebra), `resources` (vectors over a solve's
dimensions), `offerings` (types, cheapest offering, options, minValues), `pools` (pools compiled for a
solve, their limits), `existing` (how a snapshot's nodes count: the one owner of those adjustments),
`variant` (what shapes are made of: variants, pool fits, topology groups and spreads), `fit` (a pod
shape against a pool alone), `topology` (groups, spreads, domains), `shapes` (pods compiled into shapes
and variants), `order` (the order a batch is placed in), `opened` (the nodes a solve opens and the
NewClaims they become), `solver` (the orchestration), `explain` (one pod against each pool), `results`."""

from provisioner.scheduling.explain import PoolVerdict, explain
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.scheduling.results import NewClaim, Placement, PoolReason, Results, Unschedulable
from provisioner.scheduling.solver import MAX_OPTIONS, SolveFn, SolveOptions, solve

__all__ = [
    "MAX_OPTIONS",
    "ClusterDefaults",
    "NewClaim",
    "Placement",
    "PoolReason",
    "PoolVerdict",
    "Results",
    "SolveFn",
    "SolveOptions",
    "Unschedulable",
    "explain",
    "solve",
]
