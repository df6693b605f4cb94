"""What the planner keeps from one plan to the next of the same cluster, so a plan costs what changed.

The controller (and `provisioner simulate`, which runs it) plans on every change and at least every idle
interval; most plans see the cluster as the last one did. The pure planner keeps nothing between calls:
its caller holds a `Memory` and hands it to every plan. It holds
- the last plan and everything it read: when the next plan is given the very same inputs at a moment
  its time's answers still hold for (`plan_time`: no `consolidateAfter`, `expireAfter`, do-not-disrupt
  duration, budget window or Capacity Block lead crossed in between), that plan is handed back as it is
  (`DisruptionPlan.repeated`), without evaluating a node;
- consolidation keep-verdicts (`verdicts`) and what each node's facts are (`facts`), for the plans
  that do run.

Exact, not approximate: ClusterState never changes an object of a snapshot in place (a write replaces
it), and reuses the StateNode of a node whose Node, NodeClaim and pods did not change, so the inputs are
compared by identity (the nodes, their pods, pending pods, daemonsets, PDBs, pools, node classes),
except what is rebuilt on every snapshot or call: the namespaces' labels and the instance types (by
value), the settings and the solve function (by equality). Anything else plans again.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from provisioner.api import NodePool
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption.facts import Facts
from provisioner.disruption.model import DisruptionPlan
from provisioner.disruption.plan_time import PlanTime, aware
from provisioner.disruption.verdicts import Verdicts
from provisioner.state.cluster import Snapshot


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _same_snapshot(a: Snapshot, b: Snapshot) -> bool:
    """Every field holds the very same objects (tuples) or equal ones (mappings, rebuilt per snapshot)."""
    if a is b:
        return True
    for f in dataclasses.fields(Snapshot):
        mine, theirs = getattr(a, f.name), getattr(b, f.name)
        if isinstance(mine, tuple) and isinstance(theirs, tuple):
            if not _same_objects(mine, theirs):
                return False
        elif mine != theirs:
            return False
    return True


@dataclass(frozen=True, slots=True, eq=False)
class Inputs:
    """Everything a plan reads besides `now`."""

    snapshot: Snapshot
    pools: tuple[NodePool, ...]
    instance_types: Mapping[str, tuple[InstanceType, ...]]
    settings: object
    solve: Callable[..., object]

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        settings: object,
        solve: Callable[..., object],
    ) -> Inputs:
        return cls(
            snapshot=snapshot,
            pools=tuple(pools),
            instance_types={name: tuple(types) for name, types in instance_types.items()},
            settings=settings,
            solve=solve,
        )

    def same(self, other: Inputs) -> bool:
        return (
            _same_objects(self.pools, other.pools)
            and self.settings == other.settings
            and self.solve == other.solve
            and _same_snapshot(self.snapshot, other.snapshot)
            # Last: compared by value, the dearest when the provider hands out new objects each time.
            and self.instance_types == other.instance_types
        )


class Memory:
    """The planner's memory of one cluster's earlier plans (see the module docstring)."""

    def __init__(self) -> None:
        self.verdicts = Verdicts()
        self.facts = Facts()
        self._last: tuple[Inputs, PlanTime, DisruptionPlan] | None = None

    def repeat(self, inputs: Inputs, now: datetime) -> DisruptionPlan | None:
        """The last plan, when it read exactly these inputs and its clock's answers hold at `now`."""
        if self._last is None:
            return None
        last_inputs, clock, last = self._last
        moment = aware(now)
        if not clock.holds_at(moment) or not last_inputs.same(inputs):
            return None
        return DisruptionPlan(
            now=moment,
            commands=list(last.commands),
            blockers=list(last.blockers),
            evaluated=last.evaluated,
            repeated=True,
        )

    def made(self, inputs: Inputs, clock: PlanTime, plan: DisruptionPlan) -> None:
        """The plan just made from these inputs, with the clock it asked."""
        self._last = (inputs, clock, plan)
