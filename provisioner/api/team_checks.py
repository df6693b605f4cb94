"""Checks across Teams, Departments and NodePools, located as `FILE:LINE: Kind/name: field: message`.

Over-subscription, per pool and resource: a department's teams promised more than the department holds
(a pool the department names no quota for counts as 0), or the departments (and teams of no department)
promised more than the pool's `limits`. A promise the fleet cannot keep is an error by default;
`allow_oversubscription` (`templates validate --allow-oversubscription`, a Scenario's
`spec.allowOversubscription`) makes it a warning, for platforms that count on teams not all asking at
once. Also: a namespace claimed by two teams (an error: its pods would have two owners), and references
to a Department or NodePool not among the files (warnings: they may exist in the cluster).
"""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.api import quantities
from provisioner.api.located import LoadedObject, format_path
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Department, Team
from provisioner.api.yamldoc import FieldPath, Problem, Severity


def _amount(resource: str, value: int) -> str:
    return quantities.format_quantity(resource, value)


def check(objects: Sequence[LoadedObject], *, allow_oversubscription: bool = False) -> list[Problem]:
    """Every cross-object problem of the Teams and Departments among `objects`."""
    teams = [o for o in objects if isinstance(o.obj, Team)]
    departments = {o.name: o for o in objects if isinstance(o.obj, Department)}
    pools = {o.name: o for o in objects if isinstance(o.obj, NodePool)}
    problems: list[Problem] = []
    over: Severity = "warning" if allow_oversubscription else "error"
    hint = (
        ""
        if allow_oversubscription
        else " (--allow-oversubscription, or a Scenario's spec.allowOversubscription, makes this a warning)"
    )

    def add(loaded: LoadedObject, path: FieldPath, message: str, severity: Severity) -> None:
        problems.append(
            Problem(
                loaded.document.source,
                loaded.document.line_of(path),
                message,
                kind=loaded.kind,
                name=loaded.name,
                path=format_path(path),
                severity=severity,
            )
        )

    owner: dict[str, LoadedObject] = {}
    for loaded in teams:
        team: Team = loaded.obj  # type: ignore[assignment]
        for i, ns in enumerate(team.spec.namespaces):
            first = owner.setdefault(ns, loaded)
            if first is not loaded:
                add(
                    loaded,
                    ("spec", "namespaces", i),
                    f"namespace {ns!r} belongs to Team {first.name!r} already; a namespace has one team",
                    "error",
                )
        dept = team.spec.department
        if dept is not None and dept not in departments:
            add(
                loaded,
                ("spec", "department"),
                f"no Department named {dept!r} among the files checked (fine if it exists in the cluster)",
                "warning",
            )
        if pools:
            for field_name, names in (
                ("quotas", [q.node_pool for q in team.spec.quotas]),
                ("defaultNodePools", team.spec.default_node_pools),
            ):
                for i, pool in enumerate(names):
                    if pool not in pools:
                        path: FieldPath = (
                            ("spec", field_name, i, "nodePool")
                            if field_name == "quotas"
                            else (
                                "spec",
                                field_name,
                                i,
                            )
                        )
                        add(
                            loaded,
                            path,
                            f"no NodePool named {pool!r} among the files checked (fine if it exists in the "
                            "cluster)",
                            "warning",
                        )

    # A department's teams within the department's quota, per pool and resource.
    for dept_name, dloaded in departments.items():
        department: Department = dloaded.obj  # type: ignore[assignment]
        members = [t for t in teams if t.obj.spec.department == dept_name]  # type: ignore[attr-defined]
        sums: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for t in members:
            for q in t.obj.spec.quotas:  # type: ignore[attr-defined]
                for resource, amount in q.amounts().items():
                    sums.setdefault((q.node_pool, resource), []).append((t.name, amount))
        for (pool, resource), parts in sorted(sums.items()):
            total = sum(a for _, a in parts)
            entry = department.quota_for(pool)
            if entry is None:
                if total == 0:
                    continue
                cap, path = 0, ("spec", "quotas")
                what = f"has no quota on {pool} (counts as 0)"
            else:
                amounts = entry.amounts()
                if resource not in amounts:
                    continue
                index = department.spec.quotas.index(entry)
                cap, path = amounts[resource], ("spec", "quotas", index, "resources", resource)
                what = f"holds {_amount(resource, cap)}"
            if total > cap:
                who = ", ".join(f"{n} {_amount(resource, a)}" for n, a in parts)
                add(
                    dloaded,
                    path,
                    f"over-subscribed: its teams are promised {_amount(resource, total)} {resource} on {pool} "
                    f"({who}) but the department {what}{hint}",
                    over,
                )

    # Departments (and teams of no department) within the pool's limits.
    for pool_name, ploaded in pools.items():
        limits = ploaded.obj.spec.limits_base_units()  # type: ignore[attr-defined]
        holders: list[tuple[str, dict[str, int]]] = []
        for dept_name, dloaded in departments.items():
            entry = dloaded.obj.quota_for(pool_name)  # type: ignore[attr-defined]
            if entry is not None:
                holders.append((f"Department {dept_name}", entry.amounts()))
        for t in teams:
            if t.obj.spec.department is None:  # type: ignore[attr-defined]
                entry = t.obj.quota_for(pool_name)  # type: ignore[attr-defined]
                if entry is not None:
                    holders.append((f"Team {t.name}", entry.amounts()))
        for resource, limit in sorted(limits.items()):
            parts = [(n, a[resource]) for n, a in holders if a.get(resource)]
            total = sum(a for _, a in parts)
            if total > limit:
                who = ", ".join(f"{n} {_amount(resource, a)}" for n, a in parts)
                add(
                    ploaded,
                    ("spec", "limits", resource),
                    f"over-subscribed: quotas promise {_amount(resource, total)} {resource} ({who}) but the pool "
                    f"is limited to {_amount(resource, limit)}{hint}",
                    over,
                )
    return problems
