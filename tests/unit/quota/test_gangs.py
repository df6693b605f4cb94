"""Admission of gangs: all members within quota, or none (no team holds part of a gang)."""

from __future__ import annotations

import dataclasses
from typing import Any

from provisioner.api import labels as wk
from provisioner.state.objects import Pod
from tests.unit.quota.builders import node_pool, pod, quota, team
from tests.unit.quota.test_admission import A100, admitted, decide


def member(name: str, *, group: str = "train", total: int = 4, **kw: Any) -> Pod:
    p = pod(name, "vision", gpus=8, **kw)
    return dataclasses.replace(
        p,
        labels={**p.labels, wk.KUEUE_POD_GROUP_NAME: group},
        annotations={**p.annotations, wk.KUEUE_POD_GROUP_TOTAL_COUNT: str(total)},
    )


def test_a_gang_that_fits_the_quota_whole_is_admitted_whole() -> None:
    plan = decide(
        [node_pool(A100)],
        [team("vision", quota(A100, 32, over=False), default=(A100,))],
        pending=[member(f"t-{i}") for i in range(4)],
    )
    assert set(admitted(plan)) == {f"vision/t-{i}" for i in range(4)}


def test_a_gang_the_quota_holds_only_part_of_is_not_admitted_at_all() -> None:
    # Quota for 3 of the 4 members: none is admitted, and the quota stays free for others.
    plan = decide(
        [node_pool(A100)],
        [team("vision", quota(A100, 24, over=False), default=(A100,))],
        pending=[*(member(f"t-{i}") for i in range(4)), pod("solo", "vision", gpus=8, minute=5)],
    )
    assert set(admitted(plan)) == {"vision/solo"}, "the quota the gang could not use goes to the next pod"
    held = {h.pod.key: h for h in plan.held}
    assert {f"vision/t-{i}" for i in range(4)} <= set(held)
    assert "gang vision/train: 1 of its members wait for quota" in held["vision/t-0"].message
    assert plan.usage.of_team("vision", A100).get(wk.GPU_RESOURCE, 0) == 8
