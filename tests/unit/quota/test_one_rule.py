"""One rule for a pod's team, and one pool order, read alike by quota, the solver, the ledger and the
disruption records (issue 22)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from provisioner.api import labels as wk
from provisioner.finops.meter import UsageMeter
from provisioner.quota.book import QuotaBook
from provisioner.scheduling import pool_order
from provisioner.state.cluster import team_of
from testkit.builders import NOW as T0
from tests.unit.disruption.builders import NAMESPACE, instance_type, pod, snapshot, state_node
from tests.unit.quota.builders import team


def test_a_teams_own_namespace_list_wins_over_a_label_everywhere() -> None:
    listed = team("vision")
    listed = listed.model_copy(update={"spec": listed.spec.model_copy(update={"namespaces": [NAMESPACE]})})
    snap = dataclasses.replace(
        snapshot([]), teams=(listed,), namespaces={NAMESPACE: {wk.TEAM: "stale"}, "other": {wk.TEAM: "nlp"}}
    )
    owners = snap.team_names()
    assert owners == {NAMESPACE: "vision", "other": "nlp"}
    book = QuotaBook(teams=snap.teams, departments=(), nodepools=(), namespaces=snap.namespaces)
    found = book.team_of(NAMESPACE)
    assert found is not None and found.name == "vision"
    assert book.team_of("other") is None  # a label naming no Team: cost is booked to it, no quota applies
    assert team_of(pod("p"), owners) == "vision"


def test_the_ledger_books_a_listed_namespace_to_its_team_without_a_label() -> None:
    listed = team("vision")
    listed = listed.model_copy(update={"spec": listed.spec.model_copy(update={"namespaces": [NAMESPACE]})})
    node = state_node("a", it=instance_type("g", gpus=1), pods=[pod("train", gpus=1, node="a")])
    snap = dataclasses.replace(snapshot([node]), teams=(listed,), namespaces={})
    meter = UsageMeter(interval=timedelta(minutes=5))
    meter.observe(snap, T0)
    (row,) = meter.observe(snap, T0 + timedelta(minutes=5))
    assert row.teams == ("vision",)


def test_the_solver_and_the_quota_book_resolve_a_pods_pools_alike() -> None:
    listed = team("vision", default=("a100", "l4"))
    snap = dataclasses.replace(snapshot([]), teams=(listed,), namespaces={})
    lists = pool_order.team_lists(snap)
    assert lists == {"vision": ("a100", "l4")}
    p = dataclasses.replace(pod("p"), namespace="vision")
    book = QuotaBook(teams=snap.teams, departments=(), nodepools=(), namespaces={})
    solver = pool_order.resolve(p, team_default=lists, defaults=pool_order.NO_DEFAULTS, pool_names=())
    assert solver.pools == book.pool_order(p, listed) == ("a100", "l4")
    assert solver.origin == "team"
