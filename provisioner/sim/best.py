"""The best possible cost of a simulated run (`provisioner simulate --best-possible`): for each interval
between changes of the pods wanting capacity, the $/h of the exact optimum packing of those pods on the
scenario's pools, instance types and limits (`provisioner.scheduling.optimum`, HiGHS), times the
interval's hours.

Each interval is solved on its own, as if the fleet could be rebuilt at no cost at every change: the
disruption budgets, consolidateAfter and launch times that slow a real fleet are left out, so the sum is a
floor no run can go under. Intervals with the same pods are solved once. Reserved capacity is not
modelled: a run with reservations gets no best possible cost (its nodes' $0/h would not compare).
"""

from __future__ import annotations

from datetime import timedelta

from provisioner.finops.rows import BestRow
from provisioner.scheduling import solve
from provisioner.scheduling.optimum import exact_optimum
from provisioner.sim.loaded import LoadedScenario
from provisioner.sim.records import RunResult
from provisioner.state import Pod
from provisioner.state.cluster import Snapshot

NOT_MODELLED = "reserved capacity is not modelled"


def best_rows(loaded: LoadedScenario, result: RunResult, *, time_limit: float = 10.0) -> list[BestRow]:
    """One row per interval of the run's demand (see the module). Empty when the run noted no demand
    (too many pods) or used reservations."""
    if result.reservations or loaded.scenario.spec.reservations or not result.demand:
        return []
    solved: dict[tuple[str, ...], tuple[float | None, str]] = {}
    rows = []
    moments = [t for t, _ in result.demand] + [result.end]
    for (start, pods), end in zip(result.demand, moments[1:], strict=True):
        hours = (end - start) / timedelta(hours=1)
        if hours <= 0:
            continue
        key = _signature(pods)
        if key not in solved:
            solved[key] = _optimum(loaded, pods, time_limit)
        cost, status = solved[key]
        rows.append(BestRow(time=start, hours=hours, cost_per_hour=cost, status=status, pods=len(pods)))
    return rows


def _signature(pods: tuple[Pod, ...]) -> tuple[str, ...]:
    """What the optimum depends on: each pod's requests and node constraints (names apart)."""
    return tuple(
        sorted(
            repr(
                (
                    sorted(p.requests.items()),
                    sorted(p.node_selector.items()),
                    p.required_node_terms,
                    p.tolerations,
                )
            )
            for p in pods
        )
    )


def _optimum(loaded: LoadedScenario, pods: tuple[Pod, ...], time_limit: float) -> tuple[float | None, str]:
    if not pods:
        return 0.0, "optimal"
    # A real packing bounds the optimum (and the MILP's node slots): the scheduler's own, from scratch.
    # Pods it leaves out each get a node of the dearest type at the most.
    ours = solve(list(pods), Snapshot(), pools=loaded.nodepools, instance_types=loaded.instance_types)
    dearest = max(
        (o.price for types in loaded.instance_types.values() for it in types for o in it.offerings),
        default=0.0,
    )
    ceiling = ours.cost_per_hour + len(ours.unschedulable) * dearest
    return exact_optimum(
        pods, loaded.nodepools, loaded.instance_types, ceiling=max(ceiling, 1e-9), time_limit=time_limit
    )
