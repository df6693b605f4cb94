"""The QuotaBook: Teams, Departments and NodePools as one lookup, with Run:ai's rules for what is not
written down.

- A pod's team: `provisioner.api.team.namespace_teams` (the Team listing its namespace, else the
  namespace's `provisioner.sh/team` label), the rule the ledger and the disruption records use too.
- A pool a Team (or Department) has no entry for counts as quota 0 for every resource, over-quota
  allowed, weight 1. A resource an entry does not name is not limited by it.
- A pod's pool order: `provisioner.scheduling.pool_order.resolve` (its `provisioner.sh/nodepools` list,
  else its team's `defaultNodePools`, else the cluster's default pools), every pool by weight (high
  first, then name) when none applies, as the scheduler orders pools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from provisioner.api import NodePool, quantities
from provisioner.api.nodepool import live
from provisioner.api.team import Department, DepartmentQuota, Team, namespace_teams
from provisioner.scheduling import pool_order
from provisioner.state import Snapshot
from provisioner.state.objects import Pod

UNCOUNTED = frozenset({quantities.PODS, quantities.EPHEMERAL_STORAGE})
"""Resources no quota counts: every pod asks one `pods`, and disk is not what teams share."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A quota entry as the decision reads it."""

    quota: Mapping[str, int]
    named: frozenset[str] | None
    """The resources the entry limits; None: every resource (a pool with no entry: quota 0)."""
    over_quota: bool = True
    weight: int = 1
    borrowing: Mapping[str, int] | None = None
    """Per resource, the most it may use beyond its quota (`borrowingLimit`); None: no such limit."""
    lending: Mapping[str, int] | None = None
    """Per resource, the most of its unused quota others may borrow (`lendingLimit`); None: all of it."""

    def limit(self, resource: str) -> int | None:
        """The quota on `resource`, or None when this entry does not limit it."""
        if self.named is None:
            return self.quota.get(resource, 0)
        return self.quota[resource] if resource in self.named else None

    def ceiling(self, resource: str) -> int | None:
        """The most it may use of `resource` on the pool, borrowing included: its quota when it may not
        borrow, its quota plus its `borrowingLimit`; None: unbounded (the pool's limits decide)."""
        limit = self.limit(resource)
        if not self.over_quota:
            return limit
        if self.borrowing is None or resource not in self.borrowing:
            return None
        return (limit or 0) + self.borrowing[resource]

    def kept(self, resource: str, use: int) -> int:
        """How much of its quota stays free for its own pods, whoever borrows (`lendingLimit`): its quota
        less what it lends, less what it uses itself."""
        if self.lending is None or resource not in self.lending:
            return 0
        limit = self.limit(resource) or 0
        return max(0, limit - self.lending[resource] - use)


NO_ENTRY = Entry(quota={}, named=None)


def _entry(quota: DepartmentQuota | None) -> Entry:
    if quota is None:
        return NO_ENTRY
    amounts = quota.amounts()
    return Entry(
        quota=amounts,
        named=frozenset(amounts),
        over_quota=quota.over_quota,
        weight=getattr(quota, "over_quota_weight", 1),
        borrowing=quota.borrowing() if quota.borrowing_limit is not None else None,
        lending=quota.lending() if quota.lending_limit is not None else None,
    )


def counted(requests: Mapping[str, int]) -> dict[str, int]:
    """The part of a request quotas count."""
    return {k: v for k, v in requests.items() if v > 0 and k not in UNCOUNTED}


class QuotaBook:
    """Lookups over one set of Teams, Departments and pools (built once per pass)."""

    def __init__(
        self,
        *,
        teams: Iterable[Team],
        departments: Iterable[Department],
        nodepools: Iterable[NodePool],
        namespaces: Mapping[str, Mapping[str, str]],
        defaults: pool_order.ClusterDefaults | None = None,
    ) -> None:
        self.defaults = defaults or pool_order.ClusterDefaults()
        self.teams = {t.name: t for t in teams}
        self.departments = {d.name: d for d in departments}
        self.pools = {p.name: p for p in live(nodepools)}
        self._default_pool_names = pool_order.default_pool_names(self.pools.values())
        self._team_of_namespace = namespace_teams(self.teams.values(), namespaces)
        # Entries and limits are read thousands of times a pass: parse each quantity once.
        self._entries: dict[tuple[str, str, str], Entry] = {}
        self._limits: dict[str, Mapping[str, int]] = {}
        self.cluster_order = tuple(p.name for p in pool_order.by_weight(self.pools.values()))
        self._members: dict[str, tuple[Team, ...]] = {}
        for team in sorted(self.teams.values(), key=lambda t: t.name):
            if team.spec.department is not None:
                self._members[team.spec.department] = (*self._members.get(team.spec.department, ()), team)
        quotas: list[DepartmentQuota] = [q for t in self.teams.values() for q in t.spec.quotas]
        quotas += [q for d in self.departments.values() for q in d.spec.quotas]
        self.has_lenders = any(q.lending_limit is not None for q in quotas)
        """Whether any entry sets a `lendingLimit` (else nothing is kept back from borrowers)."""

    @classmethod
    def of(cls, snap: Snapshot, defaults: pool_order.ClusterDefaults | None = None) -> QuotaBook:
        """The book of a snapshot's Teams, Departments, pools and namespaces."""
        return cls(
            teams=snap.teams,
            departments=snap.departments,
            nodepools=snap.nodepools,
            namespaces=snap.namespaces,
            defaults=defaults,
        )

    def team_of(self, namespace: str) -> Team | None:
        name = self._team_of_namespace.get(namespace)
        return self.teams.get(name) if name else None

    def has_teams(self) -> bool:
        return bool(self.teams)

    def members(self, department: str) -> tuple[Team, ...]:
        """The teams of a department, by name."""
        return self._members.get(department, ())

    def department_of(self, team: Team) -> Department | None:
        return self.departments.get(team.spec.department) if team.spec.department else None

    def team_entry(self, team: Team, pool: str) -> Entry:
        key = ("Team", team.name, pool)
        if key not in self._entries:
            self._entries[key] = _entry(team.quota_for(pool))
        return self._entries[key]

    def department_entry(self, department: Department, pool: str) -> Entry:
        key = ("Department", department.name, pool)
        if key not in self._entries:
            self._entries[key] = _entry(department.quota_for(pool))
        return self._entries[key]

    def pool_limits(self, pool: str) -> Mapping[str, int]:
        if pool not in self._limits:
            found = self.pools.get(pool)
            self._limits[pool] = found.spec.limits_base_units() if found is not None else {}
        return self._limits[pool]

    def pool_order(self, pod: Pod, team: Team | None) -> tuple[str, ...]:
        """The pools a pod may go to, in order (see the module docstring)."""
        found = pool_order.resolve(
            pod,
            team_default=team.spec.default_node_pools if team else (),
            defaults=self.defaults,
            pool_names=self._default_pool_names,
        )
        return found.pools if found.pools is not None else self.cluster_order
