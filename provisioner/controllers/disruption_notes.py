"""What the disruption controller notes of each node between passes, read from the snapshot alone: the
do-not-disrupt annotations it cannot read (each reported once, as an Event), the teams whose pods the node
runs (an empty node's ledger row still says whose it was), and whether it is marked as disrupting. A
node's notes are worked out again only when the snapshot hands out a new StateNode for it, so a pass over
a quiet fleet walks no pods. Carrying out commands is `provisioner.controllers.disruption`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import DISRUPTING
from provisioner.clusterapi import ClusterAPI
from provisioner.disruption import candidates as cand
from provisioner.state import Snapshot
from provisioner.state.cluster import StateNode, team_of


@dataclass(frozen=True, slots=True)
class NodeNotes:
    """What the pass's bookkeeping reads of one node alone: worked out again only for a StateNode the
    snapshot has not handed out before (it hands back the same frozen one while the node, its claim and its
    pods are unchanged), so a pass over a quiet fleet of 10,000 nodes walks no pods."""

    node: StateNode
    problems: dict[str, str]
    """Pod -> its do-not-disrupt annotation's problem (a value neither `true` nor a duration)."""
    teams: tuple[str, ...] | None
    """The teams of its workload pods while it has some (a live claim and Node), else None."""
    marked: bool
    """Tainted or conditioned as disrupting."""

    @classmethod
    def of(cls, sn: StateNode, owners: Mapping[str, str]) -> NodeNotes:
        claim = sn.claim
        if claim is None:
            return cls(node=sn, problems={}, teams=None, marked=False)
        problems = {p.key: problem for p in sn.pods if (problem := cand.do_not_disrupt_problem(p))}
        teams: tuple[str, ...] | None = None
        if sn.node is not None and claim.metadata.deletion_timestamp is None:
            workload = [p for p in sn.pods if not p.is_daemonset_pod and not p.is_terminal]
            if workload:
                teams = tuple(sorted({t for p in workload if (t := team_of(p, owners))}))
        tainted = sn.node is not None and any(t.key == wk.DISRUPTED_TAINT for t in sn.node.taints)
        return cls(
            node=sn,
            problems=problems,
            teams=teams,
            marked=tainted or is_true(claim.status.conditions, DISRUPTING),
        )


@dataclass(eq=False)
class NodeBook:
    """The notes of every node (last pass's kept for the nodes the snapshot hands back unchanged), the
    teams each node last ran, and the do-not-disrupt problems already reported."""

    cluster: ClusterAPI
    """Where the Events about unreadable annotations go."""
    notes: dict[str, NodeNotes] = field(default_factory=dict)
    last_teams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Node -> the teams of the pods it last ran: an empty node's row still says whose it was."""
    _teams: Mapping[str, str] = field(default_factory=dict)
    """The namespace labels the notes' teams were read with (every snapshot has its own copy)."""
    _warned: dict[str, str] = field(default_factory=dict)
    """Pod -> the do-not-disrupt problem last reported for it (each is said once)."""

    def note(self, snap: Snapshot) -> None:
        """This pass's notes: last pass's for the nodes the snapshot hands back unchanged."""
        teams = snap.team_names()
        if teams != self._teams:
            self._teams, self.notes = teams, {}
        notes: dict[str, NodeNotes] = {}
        for sn in snap.nodes:
            note = self.notes.get(sn.name)
            notes[sn.name] = note if note is not None and note.node is sn else NodeNotes.of(sn, teams)
        self.notes = notes

    def warn_invalid_annotations(self) -> None:
        """A do-not-disrupt value that is neither `true` nor a duration is ignored; say so once per value."""
        warned: dict[str, str] = {}
        for note in self.notes.values():
            for key, problem in note.problems.items():
                warned[key] = problem
                if self._warned.get(key) != problem:
                    namespace, _, name = key.partition("/")
                    self.cluster.record_event(
                        kind="Pod",
                        name=name,
                        namespace=namespace,
                        reason="InvalidDoNotDisruptAnnotation",
                        message=problem,
                        type="Warning",
                    )
        self._warned = warned

    def remember_teams(self) -> None:
        """Note each node's workload teams while it has pods, for the row of a node removed once empty."""
        for name, note in self.notes.items():
            if note.teams is not None:
                self.last_teams[name] = note.teams
