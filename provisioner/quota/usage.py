"""Use per team, department and pool, counted from a snapshot.

A pod holds quota from the moment it is admitted (its gate lifted) until it ends or is being deleted:
bound pods count on their node's pool, admitted pods not bound yet on the pool they are pinned to (the
`provisioner.sh/nodepool` node selector), so pods in flight and those admitted earlier in the same pass
are counted like pool limits count claims in flight. A pod bound to a Node the snapshot does not hold
(`Snapshot.unplaced_pods`: the pod's watch event came before its Node's) counts on its pinned pool, else
on the pool of the claim naming that Node: left out, its room would be admitted to another pod. Pods of no team count only on their pool (they take
room under its limits). What pods request is compared with quotas and limits; a pool's limits bound its
nodes' capacity, so counting requests against them lets daemon overhead slip (the solver still enforces
the limits on nodes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.quota.book import QuotaBook, counted
from provisioner.state import Snapshot
from provisioner.state.objects import Pod

Key = tuple[str, str]
"""(team or department name, pool name)."""


def pinned_pool(pod: Pod) -> str | None:
    """The pool an admitted pod was pinned to, if any."""
    return pod.node_selector.get(wk.NODEPOOL)


def holds_quota(pod: Pod) -> bool:
    return not pod.gated and not pod.is_terminal and not pod.deleting and not pod.is_daemonset_pod


@dataclass
class Usage:
    """Requests of admitted pods, summed per (team, pool), (department, pool) and pool."""

    team: dict[Key, dict[str, int]] = field(default_factory=dict)
    team_non_preemptible: dict[Key, dict[str, int]] = field(default_factory=dict)
    department: dict[Key, dict[str, int]] = field(default_factory=dict)
    pool: dict[str, dict[str, int]] = field(default_factory=dict)
    pods: dict[Key, list[Pod]] = field(default_factory=dict)
    """(team, pool) -> its admitted pods (reclaim picks among them)."""
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    """Pod key -> what quotas count of its request, parsed once per pass (reclaim reads it often)."""

    def request_of(self, pod: Pod) -> dict[str, int]:
        found = self.requests.get(pod.key)
        if found is None:
            found = self.requests[pod.key] = counted(pod.requests)
        return found

    def add(self, pod: Pod, *, pool: str, team: str | None, department: str | None) -> None:
        amount = self.request_of(pod)
        self.pool[pool] = quantities.add(self.pool.get(pool, {}), amount)
        if team is None:
            return
        key = (team, pool)
        self.team[key] = quantities.add(self.team.get(key, {}), amount)
        self.pods.setdefault(key, []).append(pod)
        if not pod.preemptible:
            self.team_non_preemptible[key] = quantities.add(self.team_non_preemptible.get(key, {}), amount)
        if department is not None:
            dkey = (department, pool)
            self.department[dkey] = quantities.add(self.department.get(dkey, {}), amount)

    def remove(self, pod: Pod, *, pool: str, team: str | None, department: str | None) -> None:
        """Take a pod out again (a reclaim victim: its capacity goes to the reclaiming pod)."""
        amount = self.request_of(pod)
        self.pool[pool] = quantities.subtract(self.pool.get(pool, {}), amount)
        if team is None:
            return
        key = (team, pool)
        self.team[key] = quantities.subtract(self.team.get(key, {}), amount)
        self.pods[key] = [p for p in self.pods.get(key, []) if p.key != pod.key]
        if not pod.preemptible:
            self.team_non_preemptible[key] = quantities.subtract(
                self.team_non_preemptible.get(key, {}), amount
            )
        if department is not None:
            dkey = (department, pool)
            self.department[dkey] = quantities.subtract(self.department.get(dkey, {}), amount)

    def of_team(self, team: str, pool: str) -> Mapping[str, int]:
        return self.team.get((team, pool), {})

    def of_department(self, department: str, pool: str) -> Mapping[str, int]:
        return self.department.get((department, pool), {})

    def of_pool(self, pool: str) -> Mapping[str, int]:
        return self.pool.get(pool, {})


def admitted_pods(snap: Snapshot) -> Iterator[tuple[Pod, str]]:
    """Every pod holding quota, with its pool (bound: its node's; else the pool it is pinned to)."""
    for node in snap.nodes:
        pool = node.nodepool
        for pod in node.pods:
            if pool is not None and holds_quota(pod):
                yield pod, pool
    for pod in snap.pending_pods:
        pool = pinned_pool(pod)
        if pool is not None and holds_quota(pod):
            yield pod, pool
    claimed: dict[str, str] | None = None
    for pod in snap.unplaced_pods:
        if not holds_quota(pod):
            continue
        pool = pinned_pool(pod)
        if pool is None:
            if claimed is None:
                claimed = {
                    n.claim.status.node_name: n.nodepool
                    for n in snap.nodes
                    if n.node is None and n.claim is not None and n.claim.status.node_name and n.nodepool
                }
            pool = claimed.get(pod.node_name or "")
        if pool is not None:
            yield pod, pool


def count(snap: Snapshot, book: QuotaBook) -> Usage:
    """The use of every team, department and pool in the snapshot."""
    usage = Usage()
    for pod, pool in admitted_pods(snap):
        team = book.team_of(pod.namespace)
        department = team.spec.department if team is not None else None
        usage.add(pod, pool=pool, team=team.name if team else None, department=department)
    return usage
