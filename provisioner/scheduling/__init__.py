"""Scheduling, pure: the requirements algebra, topology, and the simulator that turns pods into
placements on existing capacity, new NodeClaims (pool, narrowed requirements, instance type options,
offering) and reasons for the pods no pool can take. No SDK, no clock."""

from provisioner.scheduling.explain import PoolVerdict, explain
from provisioner.scheduling.results import NewClaim, Placement, PoolReason, Results, Unschedulable
from provisioner.scheduling.solver import MAX_OPTIONS, SolveOptions, solve

__all__ = [
    "MAX_OPTIONS",
    "NewClaim",
    "Placement",
    "PoolReason",
    "PoolVerdict",
    "Results",
    "SolveOptions",
    "Unschedulable",
    "explain",
    "solve",
]
