"""Gangs in disruption: a gang's nodes are disrupted together or not at all.

A command (consolidation, drift, expiration...) that would move the members of a running gang
(`scheduling.gangs.membership`: a Kueue pod group, a ProvisioningRequest's pods) off some of its nodes but
not all of them would break the job: its other members keep running, billed, without their peers. The
planner asks `broken` after its methods; the nodes of such commands are held out of the plan (a `Gang`
blocker naming the gang) and the plan is made again without them, so no budget or PDB is spent on them
and no later command counts on them. A command whose nodes hold all of a gang's nodes keeps them, each
counting against its pool's budget. Expiration and drift make such commands themselves
(`expiration_drift`): one expired or drifted node of a gang takes all the gang's nodes with it.

Pure: a snapshot and commands in, node -> why out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from provisioner.disruption.model import Command
from provisioner.scheduling.gangs import membership
from provisioner.state.cluster import Snapshot


def gang_nodes(snapshot: Snapshot) -> dict[str, frozenset[str]]:
    """Gang -> the nodes its running members are on (gangs of more than one node only)."""
    out: dict[str, set[str]] = {}
    for node in snapshot.nodes:
        for pod in node.pods:
            if pod.is_terminal:
                continue
            m = membership(pod)
            if m is not None:
                out.setdefault(m[0], set()).add(node.name)
    return {g: frozenset(nodes) for g, nodes in out.items() if len(nodes) > 1}


def broken(commands: Iterable[Command], gangs: Mapping[str, frozenset[str]]) -> dict[str, str]:
    """Node -> why it is held, for the nodes of every command that takes part of a gang, not all of it."""
    if not gangs:
        return {}
    held: dict[str, str] = {}
    for command in commands:
        names = {n.name for n in command.nodes}
        for gang, nodes in sorted(gangs.items()):
            if names & nodes and not nodes <= names:
                why = (
                    f"gang {gang} runs on {len(nodes)} nodes, disrupted together or not at all; "
                    f"{command.method} would take {len(names & nodes)} of them"
                )
                for name in sorted(names):
                    held.setdefault(name, why)
    return held
