"""What changed since a controller's last pass: the seam that lets a controller work in proportion to
change instead of walking the fleet on every pass.

A `Watch` holds one `ClusterState.changes` feed per kind a controller reads. `take()` hands out the keys
written since the last take, by kind (everything counts as written at the first take, when the state
may already be full), so a controller can tell a pass with nothing new from one with work, and look only
at what moved. What time alone changes (a timeout, a batch window, an interval) is each controller's own
to remember: a Watch says only what was written.

`owns` scopes a Watch to some NodePools (a predicate on the pool name, for a replica that serves only
its shard's pools): a NodeClaim, Node or NodePool of another pool is not handed out. Kinds without a
pool of their own (pods, namespaces, teams) are handed out whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from provisioner.api import labels as wk
from provisioner.state import ClusterState

FIRST = frozenset({"*"})
"""The keys `take` hands out for each kind at the first take: not names, only "everything"."""


def every_pool(_pool: str) -> bool:
    """The default scope: a replica that serves every pool."""
    return True


class Watch:
    """The kinds one controller reads, and which of their objects were written since its last `take`."""

    __slots__ = ("_feeds", "_first", "_state", "owns")

    def __init__(
        self,
        state: ClusterState,
        kinds: Iterable[str],
        *,
        owns: Callable[[str], bool] = every_pool,
    ) -> None:
        self._state = state
        self._feeds = {kind: state.changes(kind) for kind in kinds}
        self._first = True
        self.owns = owns

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self._feeds)

    def take(self) -> Mapping[str, frozenset[str]]:
        """Kind -> the keys written since the last take, for the kinds with any (`FIRST` for every kind
        at the first take); an empty mapping when nothing was written."""
        if self._first:
            self._first = False
            for feed in self._feeds.values():
                feed.take()
            return {kind: FIRST for kind in self._feeds}
        out: dict[str, frozenset[str]] = {}
        for kind, feed in self._feeds.items():
            keys = feed.take()
            if keys and self.owns is not every_pool:
                keys = {key for key in keys if self._in_scope(kind, key)}
            if keys:
                out[kind] = frozenset(keys)
        return out

    def _in_scope(self, kind: str, key: str) -> bool:
        """Whether a written object is of a pool this watch serves (an object gone, or of no pool, is)."""
        if kind == "NodePool":
            return self.owns(key)
        if kind == "NodeClaim":
            claim = self._state.claims.get(key)
            return claim is None or claim.nodepool is None or self.owns(claim.nodepool)
        if kind == "Node":
            node = self._state.nodes.get(key)
            pool = node.labels.get(wk.NODEPOOL) if node is not None else None
            return pool is None or self.owns(pool)
        return True
