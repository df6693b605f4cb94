"""Consolidation verdicts kept from one plan to the next, so an unchanged candidate in an unchanged
neighbourhood is not re-solved (single-node candidates, and the prefixes multi-node consolidation tried).

The controller (and `provisioner simulate`, which runs it) plans on every change, and each plan re-solved
every consolidation candidate although most of them, and the nodes their pods could move to, had not
changed. A verdict to keep a node ("its pods fit nowhere else", "not cheaper", ...) depends only on
- the node (each node of a multi-node prefix): its Node, its NodeClaim (price, capacity type, pool) and
  its pods;
- the nodes the re-solve is shown (`view`): each one's Node, NodeClaim and pods, in order;
- what every re-solve of a plan shares: the pools (name, labels, annotations, spec), their instance
  types and offerings (availability and prices), the daemonsets, the namespaces' teams, the planner's
  settings and the solve function.
Budgets, PDBs, `consolidateAfter`, do-not-disrupt and the screens are applied before the re-solve, on
every plan, and a verdict to act is always re-solved: only keep-verdicts are taken from here.

Exact, not approximate: ClusterState never changes an object of a snapshot in place (a write replaces
it), so the very same Node, NodeClaim and Pod objects are the same inputs. A verdict is reused only when
every one of them is the object it was made from (compared by identity, and held here so none is freed
and its id reused) and the shared part is equal; anything else re-solves. Objects the plan itself made
(pods moved onto a receiving node) are new on every plan, so such neighbourhoods always re-solve.

The cache is the caller's, in its `Memory` (the disruption controller holds one), as the pure planner
keeps nothing between calls; one cache serves one cluster.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from provisioner.api import NodePool
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption.model import BlockerKind
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet

_END = object()
"""Closes one node's objects in a key (no Node, NodeClaim or Pod is ever this object)."""

Verdict = tuple[BlockerKind, str]
"""Why a node is kept: the blocker kind and its detail."""


@dataclass(frozen=True, slots=True, eq=False)
class Shared:
    """What every re-solve of one plan shares (compared by value, once per plan)."""

    pools: tuple[tuple[object, ...], ...]
    instance_types: Mapping[str, Sequence[InstanceType]]
    daemonsets: tuple[DaemonSet, ...]
    teams: Mapping[str, str]
    settings: object
    solve: Callable[..., object]

    @classmethod
    def of(
        cls,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        snapshot: Snapshot,
        settings: object,
        solve: Callable[..., object],
    ) -> Shared:
        return cls(
            # A pool's status changes as nodes come and go; the re-solve reads only these.
            pools=tuple(
                (p.name, dict(p.metadata.labels), dict(p.metadata.annotations), p.spec) for p in pools
            ),
            instance_types={name: tuple(types) for name, types in instance_types.items()},
            daemonsets=tuple(snapshot.daemonsets),
            teams=snapshot.team_names(),
            settings=settings,
            solve=solve,
        )

    def same(self, other: Shared) -> bool:
        return (
            self.pools == other.pools
            and self.instance_types == other.instance_types
            # DaemonSets compare their pods by key only: the very objects, as for nodes.
            and _same_objects(self.daemonsets, other.daemonsets)
            and self.teams == other.teams
            and self.settings == other.settings
            and self.solve == other.solve
        )


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def inputs(nodes: Sequence[StateNode], shown: Snapshot) -> tuple[object, ...]:
    """The objects a keep-verdict on `nodes` depends on, beyond the shared ones: the nodes' own and
    those of every node their re-solve is shown."""
    out: list[object] = []
    for n in (*nodes, *shown.nodes):
        out.append(n.node)
        out.append(n.claim)
        out.extend(n.pods)
        out.append(_END)
    return tuple(out)


class Verdicts:
    """Keep-verdicts of consolidation re-solves from earlier plans, per set of nodes re-solved together
    (one node for single-node consolidation, a prefix of candidates for multi-node)."""

    def __init__(self) -> None:
        self._shared: Shared | None = None
        self._kept: dict[tuple[str, ...], tuple[tuple[object, ...], Verdict]] = {}
        self._used: set[tuple[str, ...]] = set()
        """Entries looked up or made by the plan in progress; the others are dropped when the next begins."""

    def __len__(self) -> int:
        return len(self._kept)

    def start(self, shared: Shared) -> None:
        """A plan begins: forget everything when what re-solves share changed, else what the last plan
        did not use (nodes gone, prefixes no longer tried)."""
        if self._shared is None or not self._shared.same(shared):
            self._kept.clear()
        else:
            self._kept = {names: entry for names, entry in self._kept.items() if names in self._used}
        self._used = set()
        self._shared = shared

    def get(self, nodes: tuple[str, ...], key: tuple[object, ...]) -> Verdict | None:
        """The verdict kept for these nodes when it was made from exactly these objects."""
        self._used.add(nodes)
        found = self._kept.get(nodes)
        if found is None or not _same_objects(found[0], key):
            return None
        return found[1]

    def keep(self, nodes: tuple[str, ...], key: tuple[object, ...], verdict: Verdict) -> None:
        self._used.add(nodes)
        self._kept[nodes] = (key, verdict)
