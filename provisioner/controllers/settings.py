"""Controller settings: batch windows, timeouts and grace periods, with Karpenter's defaults where the
feature overlaps. `provisioner run` fills them from flags and environment."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from provisioner.scheduling.pool_order import ClusterDefaults


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """What every controller reads of its timing and the cluster's identity (the planner's own knobs are
    `provisioner.disruption.PlannerSettings`; the operator's wiring, `provisioner.operator.OperatorSettings`)."""

    cluster_name: str = "default"
    """Tag/label value that marks instances as this cluster's."""
    batch_idle: timedelta = timedelta(seconds=1)
    """A batch closes when no new pending pod arrived for this long..."""
    batch_max: timedelta = timedelta(seconds=10)
    """...or when it has been open this long."""
    launch_timeout: timedelta = timedelta(minutes=5)
    """A claim not launched this long after it was first seen is deleted (its pods are solved again)."""
    registration_timeout: timedelta = timedelta(minutes=15)
    """A launched instance whose Node has not appeared after this is replaced."""
    initialization_timeout: timedelta = timedelta(minutes=15)
    """A registered GPU node whose GPUs (or readiness) never appear is replaced after this. Karpenter has
    none; broken GPU nodes would otherwise sit forever."""
    gc_grace: timedelta = timedelta(seconds=30)
    """An instance of ours with no NodeClaim is terminated only once older than this (a claim may be in
    the middle of being written)."""
    node_gc_grace: timedelta = timedelta(seconds=30)
    """A Node of ours with no NodeClaim is deleted only once seen orphaned this long."""
    gc_interval: timedelta = timedelta(seconds=30)
    """How often garbage collection lists the cloud (each pass is a paid, rate-limited API call)."""
    ledger_hold: timedelta = timedelta(seconds=60)
    """How long a deleted NodeClaim's finalizer waits for the ledger rows of its disruption to be stored
    (a database that is down holds termination this long at most)."""
    eviction_retry: timedelta = timedelta(seconds=5)
    """How soon an eviction refused by a PDB is tried again."""
    launch_backoff: timedelta = timedelta(seconds=5)
    """First wait after a launch failed for a reason other than capacity; doubles per failure..."""
    launch_backoff_max: timedelta = timedelta(minutes=2)
    """...up to this."""
    max_launch_attempts: int = 10
    """Capacity errors tolerated per claim before giving up on all its options at once."""
    pool_defaults: ClusterDefaults = field(default_factory=ClusterDefaults)
    """The cluster's default pool lists: CPU pools and GPU pools, in order, for pods that name no
    `provisioner.sh/nodepools` list (`--default-cpu-pools`, `--default-gpu-pools`). Empty: the pool named
    `default`, else every pool by weight."""
    claim_writers: int = 1
    """NodeClaims of one batch written at once (API calls in flight). `provisioner run` writes several, as
    Karpenter does: a batch of 10,000 pods is about 1,000 claims, one API round trip each. The simulator
    and the tests keep 1 (their clusters are written from one thread, in order)."""
    event_namespace: str = "default"
    name_suffix: Callable[[], str] = field(default=lambda: secrets.token_hex(3), compare=False)
    """Makes the suffix of every name the controllers invent (NodeClaims, disruption commands). Random in
    production; the simulator passes a counter so a scenario gives the same names every run."""
    extra: dict[str, str] = field(default_factory=dict)
