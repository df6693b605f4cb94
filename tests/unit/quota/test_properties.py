"""Properties of admission over random teams, quotas and arrivals: whatever arrives, in what order,
a team's guaranteed (non-preemptible) use stays within its quota, a department or team that may not
borrow stays within its quota, and a pool stays within its limits."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Department, Team
from provisioner.quota import admission
from provisioner.quota.book import QuotaBook
from provisioner.quota.usage import count
from provisioner.state.objects import Pod
from provisioner.state.snapshot import Snapshot
from testkit.typed import present
from tests.unit.quota.builders import book, department, node_pool, pod, quota, snapshot, team

POOLS = ("a100", "t4")
TEAMS = ("vision", "nlp", "speech")
GPU = wk.GPU_RESOURCE


Arrival = tuple[str, int, bool, int, bool]
"""A pod arriving: its team, GPUs, preemptible, priority, and whether it lists its own pools."""
QuotaWorld = tuple[list[NodePool], list[Department], list[Team], list[list[Arrival]]]


@st.composite
def worlds(draw: st.DrawFn) -> QuotaWorld:
    pools = [node_pool(p, gpus=draw(st.integers(0, 24))) for p in POOLS]
    dept_quotas = [quota(p, draw(st.integers(0, 16)), over=draw(st.booleans())) for p in POOLS]
    departments = [department("research", *dept_quotas)]
    teams = []
    for name in TEAMS:
        entries = [
            quota(p, draw(st.integers(0, 12)), over=draw(st.booleans()), weight=draw(st.integers(1, 3)))
            for p in POOLS
            if draw(st.booleans())
        ]
        in_dept = draw(st.booleans())
        teams.append(team(name, *entries, department="research" if in_dept else None))
    rounds = draw(
        st.lists(
            st.lists(
                st.tuples(
                    st.sampled_from(TEAMS), st.integers(1, 8), st.booleans(), st.integers(0, 2), st.booleans()
                ),
                max_size=6,
            ),
            min_size=1,
            max_size=4,
        )
    )
    return pools, departments, teams, rounds


def _run(
    pools: list[NodePool],
    departments: list[Department],
    teams: list[Team],
    rounds: list[list[Arrival]],
) -> Iterator[tuple[Snapshot, QuotaBook]]:
    """Arrivals in rounds; after each decision the admitted pods run pinned and the victims go."""
    running: list[Pod] = []
    serial = 0
    for arrivals in rounds:
        pending = []
        for ns, gpus, pre, prio, own_list in arrivals:
            serial += 1
            pools_of = tuple(reversed(POOLS)) if own_list else ()
            pending.append(
                pod(
                    f"p{serial}", ns, gpus=gpus, preemptible=pre, priority=prio, pools=pools_of, minute=serial
                )
            )
        snap = snapshot(pools, pending=pending + running)
        qb = book(snap, teams, departments)
        plan = admission.decide(snap, qb, gated=pending)
        gone = {v.key for a in plan.admitted for v in a.victims}
        running = [p for p in running if p.key not in gone]
        for a in plan.admitted:
            raw = dict(a.pod.raw)
            spec = {k: v for k, v in raw["spec"].items() if k != "schedulingGates"}
            spec["nodeSelector"] = {wk.NODEPOOL: a.pool}
            admitted_pod = type(a.pod).from_dict({**raw, "spec": spec})
            running.append(dataclasses.replace(admitted_pod))
        yield snapshot(pools, pending=running), qb


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_quotas_and_limits_hold_whatever_arrives(world: QuotaWorld) -> None:
    pools, departments, teams, rounds = world
    for snap, qb in _run(pools, departments, teams, rounds):
        usage = count(snap, qb)
        for p in pools:
            limit = p.spec.limits_base_units().get(GPU)
            assert usage.of_pool(p.name).get(GPU, 0) <= present(limit), "a pool above its limits"
            for t in teams:
                entry = qb.team_entry(t, p.name)
                cap = entry.limit(GPU)
                guaranteed = usage.team_non_preemptible.get((t.name, p.name), {}).get(GPU, 0)
                assert cap is None or guaranteed <= cap, "non-preemptible use above the team's quota"
                if not entry.over_quota and cap is not None:
                    assert usage.of_team(t.name, p.name).get(GPU, 0) <= cap, "a team that may not borrow did"
            for d in departments:
                entry = qb.department_entry(d, p.name)
                cap = entry.limit(GPU)
                members = [t for t in teams if t.spec.department == d.name]
                guaranteed = sum(
                    usage.team_non_preemptible.get((t.name, p.name), {}).get(GPU, 0) for t in members
                )
                assert cap is None or guaranteed <= cap, "non-preemptible use above the department's quota"
                if not entry.over_quota and cap is not None:
                    assert usage.of_department(d.name, p.name).get(GPU, 0) <= cap, (
                        "a department above its quota"
                    )
