"""The `status` of every Team and Department after an admission pass: per pool the quota, what admitted
pods hold (and the part that is not preemptible), what is borrowed beyond the quota, what waiting pods
ask for; totals over pools for `kubectl get`; the number of pods waiting."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.api import quantities
from provisioner.api.team import PoolUse, QuotaStatus
from provisioner.quota.book import Entry, QuotaBook, counted
from provisioner.quota.decisions import AdmissionPlan
from provisioner.quota.reclaim import over_quota


def _text(rl: Mapping[str, int], *, zeros: bool = False) -> dict[str, str]:
    return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items()) if v or zeros}


def _sum(lists: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for rl in lists:
        total = quantities.add(total, rl)
    return total


def _status(rows: list[dict[str, Any]], waiting: int) -> dict[str, Any]:
    pools = [
        PoolUse(
            node_pool=str(r["pool"]),
            quota=_text(r["quota"], zeros=True),
            allocated=_text(r["allocated"]),
            allocated_non_preemptible=_text(r["non_preemptible"]),
            over_quota=_text(r["over"]),
            pending=_text(r["pending"]),
        )
        for r in rows
    ]
    total = PoolUse(
        node_pool="*",
        **{
            field: _text(_sum(r[key] for r in rows))
            for field, key in (
                ("quota", "quota"),
                ("allocated", "allocated"),
                ("allocated_non_preemptible", "non_preemptible"),
                ("over_quota", "over"),
                ("pending", "pending"),
            )
        },
    )
    return QuotaStatus(pools=pools, total=total, waiting=waiting).to_dict()


def _quota(entry: Entry, *resources: Mapping[str, int]) -> dict[str, int]:
    """The entry's quota; a pool with no entry shows 0 for what is used or asked there."""
    if entry.named is not None:
        return dict(entry.quota)
    return {r: 0 for rl in resources for r in rl}


def documents(book: QuotaBook, plan: AdmissionPlan) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, status) for every Team and Department of the book, in name order."""
    usage = plan.usage
    pending: dict[tuple[str, str], dict[str, int]] = {}
    waiting: dict[str, int] = {}
    for hold in plan.held:
        waiting[hold.team] = waiting.get(hold.team, 0) + 1
        if hold.first_pool is not None:
            key = (hold.team, hold.first_pool)
            pending[key] = quantities.add(pending.get(key, {}), counted(hold.pod.requests))
    out: list[tuple[str, str, dict[str, Any]]] = []
    team_rows: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(book.teams):
        team = book.teams[name]
        pools = {q.node_pool for q in team.spec.quotas} | {p for t, p in usage.team if t == name}
        pools |= {p for t, p in pending if t == name}
        rows: list[dict[str, Any]] = []
        for pool in sorted(pools):
            entry = book.team_entry(team, pool)
            use = dict(usage.of_team(name, pool))
            rows.append(
                {
                    "pool": pool,
                    "quota": _quota(entry, use, pending.get((name, pool), {})),
                    "allocated": use,
                    "non_preemptible": dict(usage.team_non_preemptible.get((name, pool), {})),
                    "over": over_quota(use, {r: entry.limit(r) for r in use}),
                    "pending": pending.get((name, pool), {}),
                }
            )
        team_rows[name] = rows
        out.append(("Team", name, _status(rows, waiting.get(name, 0))))
    for name in sorted(book.departments):
        department = book.departments[name]
        members = [t for t in book.teams.values() if t.spec.department == name]
        pools = {q.node_pool for q in department.spec.quotas}
        pools |= {r["pool"] for t in members for r in team_rows[t.name]}
        rows = []
        for pool in sorted(pools):
            entry = book.department_entry(department, pool)
            use = dict(usage.of_department(name, pool))
            member_rows = [r for t in members for r in team_rows[t.name] if r["pool"] == pool]
            rows.append(
                {
                    "pool": pool,
                    "quota": _quota(entry, use, *(r["pending"] for r in member_rows)),
                    "allocated": use,
                    "non_preemptible": _sum(r["non_preemptible"] for r in member_rows),
                    "over": over_quota(use, {r: entry.limit(r) for r in use}),
                    "pending": _sum(r["pending"] for r in member_rows),
                }
            )
        out.append(("Department", name, _status(rows, sum(waiting.get(t.name, 0) for t in members))))
    return out
