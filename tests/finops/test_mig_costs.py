"""FinOps on MIG nodes: a node partitioned into slices is paid for its slices, so a team's share is its
slices' share, its GPU-hours are slice-hours, and the slices no pod holds are idle (the pool owner's)."""

from __future__ import annotations

import pytest

from provisioner.api import mig
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import with_mig_layout
from provisioner.finops.reports import costs
from provisioner.finops.samples import usage_row
from testkit.builders import NOW, pod, state_node


def test_a_teams_share_of_a_mig_node_is_its_slices_and_the_rest_is_idle() -> None:
    p5 = next(t for t in catalog.load("aws") if t.name == "p5.4xlarge")
    parted = with_mig_layout(p5, "all-1g.10gb")
    assert not isinstance(parted, str)
    slices = [
        pod(f"s{i}", namespace="vision", cpu="1", extra_requests={"nvidia.com/mig-1g.10gb": "1"})
        for i in range(3)
    ]
    node = state_node("m", it=parted, pods=slices, price=7.0, labels={mig.MIG_STATE_LABEL: "success"})
    row = usage_row(node, time=NOW, hours=1.0, teams={"vision": "vision"})

    assert (row.gpu_capacity, row.gpu_allocated) == (7, 3)
    assert row.used_fraction == pytest.approx(3 / 7)
    (vision,) = [c for c in costs.lines([row]) if c.team == "vision"]
    (idle,) = [c for c in costs.lines([row]) if c.team == costs.UNALLOCATED]
    # $7/h for seven slices: $1 per slice-hour; three used, four idle.
    assert (round(vision.cost, 6), vision.gpu_hours) == (3.0, 3.0)
    assert (round(idle.idle_cost, 6), idle.gpu_idle_hours) == (4.0, 4.0)
