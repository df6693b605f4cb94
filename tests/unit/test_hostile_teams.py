"""Hostile Teams and Departments as they arrive from the API server (property-based): huge, negative or
malformed quotas, unknown fields, deep nesting, wrong types and large lists. Whatever arrives, the feed
into the cluster state never raises; a refused object is skipped with a warning naming its kind, name and
field; the objects beside it are kept; and admission goes on admitting the other teams' pods."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from provisioner.api import labels as wk
from provisioner.kube import client as kc
from provisioner.kube.informers import StateFeeder
from provisioner.quota import admission
from provisioner.quota.book import QuotaBook
from provisioner.state import ClusterState
from testkit.controllers.world import gpu_pod, node_class, node_pool
from tests.hostile import examples, hostile_objects

GOOD_NAMESPACE = "the-good-namespace"


def _department(name: str = "research") -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Department",
        "metadata": {"name": name},
        "spec": {
            "quotas": [
                {"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: "32", "cpu": "512"}, "overQuota": True}
            ]
        },
    }


def _team(
    name: str = "vision", *, namespace: str = "vision", department: str | None = "research"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaces": [namespace, f"{namespace}-dev"],
        "defaultNodePools": ["gpu"],
        "quotas": [
            {
                "nodePool": "gpu",
                "resources": {wk.GPU_RESOURCE: "16", "memory": "512Gi"},
                "overQuota": True,
                "overQuotaWeight": 2,
            }
        ],
    }
    if department:
        spec["department"] = department
    return {"apiVersion": "provisioner.sh/v1", "kind": "Team", "metadata": {"name": name}, "spec": spec}


BASES = {"Team": (kc.TEAM, _team), "Department": (kc.DEPARTMENT, _department)}


def _good_team_pod() -> dict[str, Any]:
    doc = gpu_pod("good-job", gpus=1, namespace=GOOD_NAMESPACE)
    doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    return doc


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_objects({kind: make for kind, (_, make) in BASES.items()}))
def test_no_team_or_department_from_the_api_breaks_the_feed_or_admission_of_other_teams(
    obj: tuple[str, dict[str, Any]],
) -> None:
    kind, doc = obj
    res = BASES[kind][0]
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.upsert(kc.nodeclass("AWSNodeClass"), node_class())
    feeder.upsert(kc.NODEPOOL, node_pool("gpu", limits={wk.GPU_RESOURCE: "64"}))
    good_team = _team("the-good-one", namespace=GOOD_NAMESPACE, department="the-good-department")
    good_department = _department("the-good-department")
    # As a relist (one bad item among good ones) and as a watch event.
    feeder.replace_all(kc.TEAM, [copy.deepcopy(doc), good_team] if kind == "Team" else [good_team])
    feeder.replace_all(
        kc.DEPARTMENT, [copy.deepcopy(doc), good_department] if kind == "Department" else [good_department]
    )
    feeder.upsert(res, copy.deepcopy(doc))
    feeder.upsert(kc.POD, _good_team_pod())
    assert "the-good-one" in state.keys_of("Team")
    assert "the-good-department" in state.keys_of("Department")
    snap = state.snapshot()
    book = QuotaBook(
        teams=snap.teams, departments=snap.departments, nodepools=snap.nodepools, namespaces=snap.namespaces
    )
    plan = admission.decide(snap, book)
    assert [a.pod.key for a in plan.admitted] == [f"{GOOD_NAMESPACE}/good-job"], "the good team is served"


def _refused(caplog: pytest.LogCaptureFixture, res: kc.Resource, doc: dict[str, Any]) -> str:
    feeder = StateFeeder(ClusterState())
    with caplog.at_level(logging.WARNING):
        feeder.upsert(res, doc)
    (record,) = [r for r in caplog.records if "ignoring invalid" in r.getMessage()]
    return record.getMessage()


def test_a_refused_team_is_named_with_its_field_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    doc = _team()
    doc["spec"]["quotas"][0]["resources"][wk.GPU_RESOURCE] = "-5Gi"
    message = _refused(caplog, kc.TEAM, doc)
    assert "Team vision" in message
    assert "spec.quotas.0.resources" in message
    assert "-5Gi" in message


def test_a_refused_department_is_named_with_its_field_in_the_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doc = _department()
    doc["spec"]["quotas"][0]["overQuota"] = "sometimes"
    message = _refused(caplog, kc.DEPARTMENT, doc)
    assert "Department research" in message
    assert "spec.quotas.0.overQuota" in message
