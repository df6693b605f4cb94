"""Pod events on NodeClaims: each claim's `lastPodEventTime` and `Empty` condition, kept current from
one snapshot to the next. `consolidateAfter` counts from them (Karpenter's pod-events controller).

The disruption controller runs it at the start of each pass; it remembers only which workload pods each
claim ran last time, so a claim seen for the first time (after a restart) is only remembered: a restart
is not a pod event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.api.nodeclaim import EMPTY
from provisioner.clock import isoformat
from provisioner.clusterapi import ClusterAPI, ClusterError
from provisioner.controllers.conditions import set_condition
from provisioner.state import Snapshot
from provisioner.state.cluster import StateNode

log = logging.getLogger(__name__)


@dataclass(kw_only=True, eq=False)
class PodEvents:
    """Writes a claim's pod-event time and Empty condition when its workload pods change."""

    cluster: ClusterAPI
    _seen: dict[str, frozenset[str]] = field(default_factory=dict, init=False)
    """Claim -> the keys of the workload pods it ran at the last `observe`."""
    _looked_at: dict[str, StateNode] = field(default_factory=dict, init=False)
    """Claim -> the StateNode it was read from: a snapshot hands the same (frozen) one back while its
    node, claim and pods are unchanged, and such a claim needs no second look."""

    failed: bool = field(default=False, init=False)
    """A write of the last `observe` failed: the next one must look again, whatever changed."""

    def observe(self, snap: Snapshot, now: datetime) -> None:
        self.failed = False
        seen: dict[str, frozenset[str]] = {}
        looked_at: dict[str, StateNode] = {}
        for sn in snap.nodes:
            claim = sn.claim
            if claim is None or sn.node is None or claim.metadata.deletion_timestamp is not None:
                continue
            looked_at[claim.name] = sn
            if self._looked_at.get(claim.name) is sn and claim.name in self._seen:
                seen[claim.name] = self._seen[claim.name]
                continue
            pods = frozenset(p.key for p in sn.pods if not p.is_daemonset_pod and not p.is_terminal)
            seen[claim.name] = pods
            before = self._seen.get(claim.name)
            empty_known = any(c.type == EMPTY for c in claim.status.conditions)
            if before is not None and before == pods and empty_known:
                continue
            status: dict[str, Any] = {
                "conditions": set_condition(
                    claim.status.conditions,
                    EMPTY,
                    not pods,
                    reason="NoWorkloadPods" if not pods else "WorkloadPods",
                    now=now,
                )
            }
            if before is not None and before != pods:
                status["lastPodEventTime"] = isoformat(now)
            try:
                self.cluster.patch_nodeclaim_status(claim.name, status)
            except ClusterError as err:
                del looked_at[claim.name]  # looked at again next pass, and written then
                self.failed = True
                log.debug("NodeClaim %s: cannot update pod event time: %s", claim.name, err)
        self._seen = seen
        self._looked_at = looked_at
