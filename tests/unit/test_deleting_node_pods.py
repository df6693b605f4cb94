"""Which pods of a node being deleted the provisioner finds capacity for, as Karpenter's scheduling suite
says ("should (not) re-schedule pods from a deleting node ..."): the active ones, and a terminating pod
only when a StatefulSet owns it (its replacement, same name, is made only once it is gone)."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner.controllers.provisioning import pods_needing_capacity
from provisioner.state.objects import Pod
from testkit import builders


def terminating(pod: Pod) -> Pod:
    raw = dict(pod.raw)
    raw["metadata"] = {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    return Pod.from_dict(raw)


@pytest.mark.parametrize(
    ("owner", "ending", "solved"),
    [
        ("ReplicaSet", False, True),
        ("ReplicaSet", True, False),
        (None, True, False),
        ("DaemonSet", False, False),
        ("StatefulSet", True, True),
        ("StatefulSet", False, True),
    ],
)
def test_the_pods_of_a_deleting_node_that_need_capacity(
    owner: str | None, ending: bool, solved: bool
) -> None:
    pod = builders.pod("p", node_name="gone", owner=owner)
    if ending:
        pod = terminating(pod)
    node = builders.state_node("gone", pods=[pod], deleting=True)
    snap = builders.state_snapshot([node])
    assert [p.key for p in pods_needing_capacity(snap)] == ([pod.key] if solved else [])


def test_the_pods_of_a_node_staying_need_no_capacity() -> None:
    pod = builders.pod("p", node_name="stays", owner="StatefulSet")
    snap = builders.state_snapshot([builders.state_node("stays", pods=[terminating(pod)])])
    assert pods_needing_capacity(dataclasses.replace(snap, pending_pods=())) == []
