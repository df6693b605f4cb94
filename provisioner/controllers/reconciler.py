"""The one shape of every controller, and the types of what it is given.

A controller is a `Reconciler`: it reads the ClusterState (through snapshots), writes through the
ClusterAPI, launches through the ProviderSet, and takes its settings, metrics and clock from the Manager
that builds it. `reconcile(now)` is one level-triggered pass. `Solve` is the type of
`provisioner.scheduling.solve`, so a test or a benchmark can hand the controllers a stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from provisioner.api import NodePool
from provisioner.clock import Clock
from provisioner.cloudprovider import InstanceType
from provisioner.clusterapi import ClusterAPI
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import Settings
from provisioner.scheduling import Results, SolveOptions
from provisioner.state import ClusterState, DaemonSet, Pod, Snapshot


class Solve(Protocol):
    """`provisioner.scheduling.solve`: pods -> placements, new claims and reasons, over a snapshot. (The
    disruption planner's `SolveFn` is the same function without `options`.)"""

    def __call__(
        self,
        pods: Sequence[Pod],
        snapshot: Snapshot,
        /,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet] | None = None,
        options: SolveOptions | None = None,
    ) -> Results: ...


@dataclass(kw_only=True, eq=False)
class Reconciler:
    """What every controller holds. Subclasses add their own memory as fields with `init=False`, and
    what only they are given (the solver, a callback) as fields with defaults."""

    state: ClusterState
    """Read only through `snapshot()` (or under its lock): informer threads write it."""
    cluster: ClusterAPI
    providers: ProviderSet
    settings: Settings
    metrics: Metrics
    clock: Clock

    def reconcile(self, now: datetime) -> object:
        """One pass over the cluster as it is now."""
        raise NotImplementedError
