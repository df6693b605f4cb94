"""The teams table (`provisioner report teams`, and the end of a `simulate` run): one row per Team or
Department, pool and resource, with quota, allocated, the non-preemptible part, over quota and pending,
as Run:ai's downloadable project tables. Computed from a snapshot with the admission decision itself, so
a state dump or a scenario file reads the same as a live cluster (pending team pods count as waiting)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from provisioner.api.team import Department, Team
from provisioner.finops.reports.text import csv_text, dump, records, table
from provisioner.quota import admission, status
from provisioner.quota.book import QuotaBook
from provisioner.quota.usage import pinned_pool
from provisioner.state import Snapshot

COLUMNS = (
    ("kind", "Kind"),
    ("name", "Name"),
    ("department", "Department"),
    ("nodepool", "NodePool"),
    ("resource", "Resource"),
    ("quota", "Quota"),
    ("allocated", "Allocated"),
    ("allocated_non_preemptible", "Non-preemptible"),
    ("over_quota", "Over quota"),
    ("pending", "Pending"),
)
"""(CSV column, and its JSON key in camelCase; header in words for the table)."""
KEYS = tuple(k for k, _ in COLUMNS)
HEADERS = tuple(h for _, h in COLUMNS)


def status_documents(snap: Snapshot) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, status) of every Team and Department, as the admission controller would write them."""
    book = QuotaBook.of(snap)
    waiting = [
        p
        for p in snap.pending_pods
        if not p.deleting and (p.gated or (book.team_of(p.namespace) is not None and pinned_pool(p) is None))
    ]
    return status.documents(book, admission.decide(snap, book, gated=waiting))


def rows(snap: Snapshot) -> list[tuple[str, ...]]:
    """The table's rows, computed from the snapshot."""
    return status_rows(snap.teams, status_documents(snap))


def written_rows(teams: Sequence[Team], departments: Sequence[Department]) -> list[tuple[str, ...]]:
    """The table's rows from the `status` the controller last wrote on each Team and Department."""
    objects: list[Team | Department] = [
        *sorted(teams, key=lambda t: t.name),
        *sorted(departments, key=lambda d: d.name),
    ]
    docs = [(o.kind, o.name, o.status.to_dict() if o.status is not None else {}) for o in objects]
    return status_rows(teams, docs)


def status_rows(
    teams: Sequence[Team], docs: Sequence[tuple[str, str, dict[str, Any]]]
) -> list[tuple[str, ...]]:
    departments = {t.name: t.spec.department or "" for t in teams}
    out: list[tuple[str, ...]] = []
    for kind, name, doc in docs:
        for pool in doc.get("pools") or ():
            fields = ("quota", "allocated", "allocatedNonPreemptible", "overQuota", "pending")
            resources = sorted({r for f in fields for r in pool.get(f) or {}})
            for resource in resources:
                out.append(
                    (
                        kind,
                        name,
                        departments.get(name, "") if kind == "Team" else "",
                        pool["nodePool"],
                        resource,
                        *((pool.get(f) or {}).get(resource, "-" if f == "quota" else "0") for f in fields),
                    )
                )
    return out


def render(values: Sequence[Sequence[str]], *, fmt: str) -> str:
    """`table` (headers in words), `csv` (snake_case columns), `json` or `yaml` (camelCase records)."""
    if fmt == "csv":
        return csv_text(KEYS, values)
    if fmt in ("json", "yaml"):
        return dump(records(KEYS, values), fmt)
    return table(HEADERS, values) + "\n"
