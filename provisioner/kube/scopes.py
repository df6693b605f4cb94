"""What a sharded replica watches (`WatchScopes`, called by `ShardLeases.step` as its `watch`): the
label selectors of its pod, Node and NodeClaim informers, and the extra informers of what the decisions
that span pools need while it holds quota admission.

- Pods: those labelled with its shards (`provisioner.sh/shard`); with admission also those labelled for
  no shard (it labels them), every pod of each namespace quota counts in (`admission_namespaces`, a
  namespaced watch each: a team's quota counts its pods in every pool), and every pod behind the
  admission gate (`provisioner.sh/admission-gated`, `model.GATED`: one whose namespace left its team
  still waits for admission to lift its gate, whichever replica holds it then).
- Nodes and NodeClaims: those of its shards' pools (their `provisioner.sh/nodepool` label), and every
  Node of no pool (capacity no replica owns); with admission every one (the garbage collector must see
  every claim, or it would take another shard's instance for an orphan; interruptions come for any).

Each step works these out again (shards won or lost, a pool created or deleted, a Team created, a
namespace joining or leaving one, admission won or lost) and answers whether every list they need has
landed; `ShardLeases` acts on a shard won, and on admission, only once it has.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from provisioner.api import labels as wk
from provisioner.kube import client as kc
from provisioner.kube.informers import Informer, Informers, Scope
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState


def admission_namespaces(state: ClusterState, watched: Collection[str] = ()) -> frozenset[str]:
    """The namespaces whose every pod the quota admission holder watches: those quota counts in
    (`model.quota_namespaces`: a team's quota counts its pods in every pool, and a team's
    ProvisioningRequests with them), and, of the namespaces `watched` now, one that left them while a
    gated pod of it still waits (its team gone, admission lifts the gate)."""
    wanted = set(model.quota_namespaces(list(state.teams.values()), dict(state.namespaces.items())))
    left = set(watched) - wanted
    if left:
        wanted |= {p.namespace for p in state.pods.values() if p.namespace in left and p.gated}
    return frozenset(wanted)


def shard_pools(state: ClusterState, held: Collection[int], shards: int) -> frozenset[str]:
    """The pools of the shards `held`: the NodePools, and the pools the claims and Nodes held name (a
    pool deleted while its nodes are still going)."""
    names = set(state.nodepools.keys())
    names |= {c.nodepool for c in state.claims.values() if c.nodepool}
    names |= {pool for n in state.nodes.values() if (pool := n.labels.get(wk.NODEPOOL))}
    return model.held_pools(names, held, shards)


class WatchScopes:
    """A sharded replica's watches, scoped at every `ShardLeases` step (see the module)."""

    UNASSIGNED = "no shard"
    GATED = "gated"
    NAMESPACE = "namespace "
    NO_POOL = "no pool"

    def __init__(self, informers: Informers, state: ClusterState, *, shards: int, wait: float) -> None:
        self.informers = informers
        self.state = state
        self.shards = shards
        self.wait = wait
        """Seconds a step waits for new lists to land (then it answers False; the next step looks again)."""
        self.watched: frozenset[str] = frozenset()
        """The namespaces watched whole now (as admission holder)."""

    @staticmethod
    def initial(shards: int) -> dict[kc.Resource, str]:
        """The selectors the informers start with (nothing of any shard, before the first step)."""
        return {
            kc.POD: model.selector(()),
            kc.NODE: model.pool_selector(()),
            kc.NODECLAIM: model.pool_selector(()),
        }

    def __call__(self, held: frozenset[int], admission: bool) -> bool:
        """Watch the objects of the shards `held`, and with `admission` what it needs; True once the
        state holds all of them."""
        deadline = time.monotonic() + self.wait
        pods: dict[str, Scope] = {}
        nodes: dict[str, Scope] = {}
        if admission:
            machines: str | None = None
            pods[self.UNASSIGNED] = Scope(selector=model.unassigned_selector(self.shards))
            pods[self.GATED] = Scope(selector=model.GATED)  # the pods carrying the label
            self.watched = admission_namespaces(self.state, self.watched)
            pods |= {self.NAMESPACE + ns: Scope(namespace=ns) for ns in sorted(self.watched)}
        else:
            machines = model.pool_selector(shard_pools(self.state, held, self.shards))
            nodes[self.NO_POOL] = Scope(selector=model.NO_POOL_SELECTOR)
            self.watched = frozenset()
        wanted = {kc.POD: model.selector(held), kc.NODE: machines, kc.NODECLAIM: machines}
        for res, selector in wanted.items():
            self.informers.of(res).rescope(selector)
        scoped = [
            *self.informers.scope(kc.POD, pods).values(),
            *self.informers.scope(kc.NODE, nodes).values(),
        ]
        informers = [self.informers.of(res) for res in wanted]
        return all([self._listed(inf, deadline) for inf in [*informers, *scoped]])

    @staticmethod
    def _listed(informer: Informer, deadline: float) -> bool:
        return informer.wait_listed(max(0.0, deadline - time.monotonic()))

    def claims_selector(self) -> str | None:
        """The selector the NodeClaim informer watches by now (a catch-up lists with it)."""
        return self.informers.of(kc.NODECLAIM).selector

    def counted_namespaces(self) -> frozenset[str]:
        """`Sharding.counted_namespaces`: the namespaces whose whole pod watch has listed."""
        return frozenset(
            inf.namespace
            for inf in self.informers.scopes(kc.POD).values()
            if inf.namespace is not None and inf.listed()
        )
