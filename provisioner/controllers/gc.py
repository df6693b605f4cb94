"""Garbage collection: money and objects nobody owns.

- Instances tagged for this cluster with no NodeClaim, older than `gc_grace` (a claim may be being
  written), are terminated.
- NodeClaims whose instance is gone (confirmed by `get`) are deleted; their finalizer cleans the rest.
- Nodes labelled with one of our pools, with no NodeClaim, seen so for `node_gc_grace`, are deleted.
- Placement groups (policies) made for gangs that no live instance is in, older than `gc_grace`, are
  deleted (`CloudProvider.collect_placement`).
Each with a log line and a metric.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.cloudprovider import CloudProviderError, NotFound
from provisioner.clusterapi import ClusterError, NotFoundError
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.state import Snapshot

log = logging.getLogger(__name__)


@dataclass(kw_only=True, eq=False)
class GarbageCollector(Reconciler):
    _orphan_nodes: dict[str, datetime] = field(default_factory=dict, init=False)
    _first_seen: dict[str, datetime] = field(default_factory=dict, init=False)
    _last_run: datetime | None = field(default=None, init=False)
    _watch: Watch = field(init=False)
    _claims: dict[str, NodeClaim] = field(default_factory=dict, init=False)
    """Claim name -> claim, in the snapshot's order, as of the last run that saw a Node or claim written."""
    _claim_pids: frozenset[str] = field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        # The claims (and the snapshot's order of them, which follows the Nodes they join), and the
        # Nodes no claim owns: made again only when a Node or claim was written since the last run.
        self._watch = Watch(self.state, ("NodeClaim", "Node"), owns=self.owns)

    def reconcile(self, now: datetime) -> None:
        if self._last_run is not None and now - self._last_run < self.settings.gc_interval:
            return
        self._last_run = now
        written = bool(self._watch.take())
        snap = self.state.snapshot()
        if written:
            self._claims = {n.claim.name: n.claim for n in snap.nodes if n.claim is not None}
            self._claim_pids = frozenset(
                c.status.provider_id for c in self._claims.values() if c.status.provider_id
            )
        claims, claim_pids = self._claims, self._claim_pids
        for provider in self.providers.unique():
            try:
                instances = provider.list()
            except CloudProviderError as err:
                log.warning("garbage collection: cannot list %s instances: %s", provider.name, err)
                continue
            live = set()
            for inst in instances:
                if inst.state == "terminated":
                    continue
                live.add(inst.provider_id)
                if inst.provider_id in claim_pids or (inst.nodeclaim and inst.nodeclaim in claims):
                    if self._first_seen:
                        self._first_seen.pop(inst.provider_id, None)
                    continue
                # Age by the cloud's launch time when it has one, else by when we first saw it.
                born = inst.launched_at or self._first_seen.setdefault(inst.provider_id, now)
                if now - born < self.settings.gc_grace:
                    continue
                try:
                    provider.delete(inst.provider_id)
                except NotFound:
                    continue
                except CloudProviderError as err:
                    log.warning("garbage collection: cannot terminate %s: %s", inst.provider_id, err)
                    continue
                self._first_seen.pop(inst.provider_id, None)
                self.metrics.instances_collected.inc()
                log.warning(
                    "garbage collection: terminated instance %s (claim %s does not exist, launched %s)",
                    inst.provider_id,
                    inst.nodeclaim or "?",
                    born.isoformat(),
                )
            kinds = self.providers.kinds_of(provider)
            # Only a claim whose instance the cloud did not list can have lost it.
            lost = () if claim_pids <= live else claims.values()
            for claim in lost:
                pid = claim.status.provider_id
                if not pid or pid in live or claim.metadata.deletion_timestamp is not None:
                    continue
                if claim.spec.node_class_ref.kind not in kinds:
                    continue
                try:
                    gone = provider.get(pid).state == "terminated"
                except NotFound:
                    gone = True
                except CloudProviderError:
                    continue
                if not gone:
                    continue
                try:
                    self.cluster.patch_nodeclaim(
                        claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: "InstanceGone"}}}
                    )
                    self.cluster.delete_nodeclaim(claim.name)
                except NotFoundError:
                    continue
                except ClusterError as err:
                    log.warning("garbage collection: cannot delete NodeClaim %s: %s", claim.name, err)
                    continue
                self.metrics.nodeclaims_collected.inc()
                log.warning(
                    "garbage collection: deleted NodeClaim %s, its instance %s is gone", claim.name, pid
                )
            try:
                for name in provider.collect_placement(older_than=now - self.settings.gc_grace):
                    log.warning(
                        "garbage collection: deleted placement group %s, no node of its gang is left", name
                    )
            except CloudProviderError as err:
                log.warning("garbage collection: cannot collect %s placement groups: %s", provider.name, err)
        if written or self._orphan_nodes:
            self._collect_nodes(snap, now)

    def _collect_nodes(self, snap: Snapshot, now: datetime) -> None:
        orphans = set()
        for sn in snap.nodes:
            node = sn.node
            if node is None or sn.claim is not None or node.deleting or wk.NODEPOOL not in node.labels:
                continue
            orphans.add(node.name)
            since = self._orphan_nodes.setdefault(node.name, now)
            if now - since < self.settings.node_gc_grace:
                continue
            try:
                self.cluster.delete_node(node.name)
            except NotFoundError:
                pass
            except ClusterError as err:
                log.warning("garbage collection: cannot delete Node %s: %s", node.name, err)
                continue
            self.metrics.nodes_collected.inc()
            log.warning("garbage collection: deleted Node %s, no NodeClaim owns it", node.name)
        for name in [n for n in self._orphan_nodes if n not in orphans]:
            del self._orphan_nodes[name]
