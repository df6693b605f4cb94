"""The one shape of every controller, and the types of what it is given.

A controller is a `Reconciler`: it reads the ClusterState (through snapshots), writes through the
ClusterAPI, launches through the ProviderSet, and takes its settings, metrics and clock from the Manager
that builds it. `reconcile(now)` is one level-triggered pass. The solver they are handed is typed by
`provisioner.scheduling.SolveFn`, so a test or a benchmark can hand them a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from provisioner.clock import Clock
from provisioner.clusterapi import ClusterAPI
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.watch import every_pool
from provisioner.state import ClusterState


@dataclass(kw_only=True, eq=False)
class Reconciler:
    """What every controller holds. Subclasses add their own memory as fields with `init=False`, and
    what only they are given (the solver, a callback) as fields with defaults."""

    state: ClusterState
    """Read only through `snapshot()` (or under its lock): informer threads write it."""
    cluster: ClusterAPI
    providers: ProviderSet
    settings: ControllerSettings
    metrics: Metrics
    clock: Clock
    owns: Callable[[str], bool] = every_pool
    """The NodePools this controller serves, by name (all of them unless its replica serves a shard): the
    controller's `Watch` hands out only the claims, Nodes and pools of these."""

    def reconcile(self, now: datetime) -> object:
        """One pass over the cluster as it is now."""
        raise NotImplementedError
