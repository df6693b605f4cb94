"""A pod's new version takes the parse of what it shares with the last one (and a pod the parse of its
template's spec): what comes out must be what a parse from scratch gives, and a write that changes a
parsed field must never be served from what was parsed before."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.clusterapi import merge_patch
from provisioner.state import ClusterState, Pod


def pod_doc(name: str = "p", *, cpu: str = "1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": labels or {"app": "train"}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
        },
    }


def parsed(pod: Pod) -> tuple[Any, ...]:
    """Every field of a parsed pod (Pod's == compares only the key)."""
    return tuple(
        getattr(pod, f.name)
        for f in dataclasses.fields(pod)
        if f.name != "raw" and not f.name.startswith("_")
    )


def fresh(doc: dict[str, Any]) -> Pod:
    return Pod.from_dict(copy.deepcopy(doc))


BIND = {"spec": {"nodeName": "n1"}, "status": {"phase": "Running", "startTime": "2026-03-02T00:00:00Z"}}


def test_a_bind_takes_the_spec_and_metadata_parse_of_the_last_version() -> None:
    state = ClusterState()
    doc = pod_doc()
    state.upsert("Pod", doc)
    before = state.pods["ml/p"]
    state.upsert("Pod", merge_patch(doc, BIND))
    after = state.pods["ml/p"]
    assert (after.node_name, after.phase) == ("n1", "Running")
    assert after.requests is before.requests and after.tolerations is before.tolerations
    assert after.labels is before.labels
    assert parsed(after) == parsed(fresh(merge_patch(doc, BIND)))


@pytest.mark.parametrize(
    ("patch", "field", "value"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}},
            "requests",
            {"cpu": 3000, "pods": 1},
            id="requests",
        ),
        pytest.param({"spec": {"tolerations": None}}, "tolerations", (), id="tolerations-removed"),
        pytest.param(
            {"spec": {"nodeSelector": {"zone": "a"}}}, "node_selector", {"zone": "a"}, id="node-selector"
        ),
        pytest.param({"spec": {"priority": 7, "nodeName": "n2"}}, "priority", 7, id="priority-with-a-bind"),
        pytest.param({"metadata": {"labels": {"app": "serve"}}}, "labels", {"app": "serve"}, id="labels"),
        pytest.param(
            {"metadata": {"deletionTimestamp": "2026-03-02T00:00:00Z"}}, "deleting", True, id="deleting"
        ),
    ],
)
def test_a_write_that_changes_a_parsed_field_is_parsed_again(
    patch: dict[str, Any], field: str, value: Any
) -> None:
    state = ClusterState()
    doc = pod_doc()
    state.upsert("Pod", doc)
    new = merge_patch(doc, patch)
    state.upsert("Pod", new)
    assert getattr(state.pods["ml/p"], field) == value
    assert parsed(state.pods["ml/p"]) == parsed(fresh(new))


def test_the_same_document_changed_in_place_and_given_again_is_parsed_in_full() -> None:
    state = ClusterState()
    doc = pod_doc()
    state.upsert("Pod", doc)
    doc["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    state.upsert("Pod", doc)
    assert state.pods["ml/p"].requests["cpu"] == 2000


def test_pods_of_one_template_share_its_parse_and_a_different_spec_is_parsed_itself() -> None:
    state = ClusterState()
    template = pod_doc()["spec"]
    for i in range(3):
        # As the simulator's workloads create pods: a spec dict of their own, the template's objects in it.
        state.upsert("Pod", {"metadata": {"name": f"p{i}", "namespace": "ml"}, "spec": dict(template)})
    other = {**template, "containers": [{"name": "c", "resources": {"requests": {"cpu": "5"}}}]}
    state.upsert("Pod", {"metadata": {"name": "q", "namespace": "ml"}, "spec": other})
    pods = [state.pods[f"ml/p{i}"] for i in range(3)]
    assert pods[1].requests is pods[0].requests and pods[2].requests is pods[0].requests
    assert [p.name for p in pods] == ["p0", "p1", "p2"]
    assert state.pods["ml/q"].requests["cpu"] == 5000


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param({"spec": {"nodeName": 5}}, id="node-name-not-text"),
        pytest.param({"status": {"startTime": "yesterday"}}, id="bad-start-time"),
        pytest.param({"status": {"conditions": "Ready"}}, id="conditions-not-a-list"),
        pytest.param({"metadata": {"labels": {"app": 3}}}, id="label-not-text"),
        pytest.param(
            {"metadata": {"ownerReferences": {"kind": "Job"}}, "spec": {"nodeName": 1}}, id="two-bad"
        ),
    ],
)
def test_a_bad_write_is_refused_with_the_error_a_full_parse_gives(patch: dict[str, Any]) -> None:
    state = ClusterState()
    doc = pod_doc()
    state.upsert("Pod", doc)
    bad = merge_patch(doc, patch)
    with pytest.raises(ValueError) as full:
        ClusterState().upsert("Pod", copy.deepcopy(bad))
    with pytest.raises(ValueError) as reused:
        state.upsert("Pod", bad)
    assert str(reused.value) == str(full.value)
    assert state.pods["ml/p"].raw is doc, "the last good version is kept"


HOSTILE = st.one_of(st.none(), st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2))
PATCHES = st.one_of(
    st.builds(lambda n: {"spec": {"nodeName": n}}, st.one_of(st.sampled_from(["n1", "n2"]), HOSTILE)),
    st.builds(lambda p: {"status": {"phase": p}}, st.sampled_from(["Running", "Succeeded", None])),
    st.builds(
        lambda r: {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": r}]}},
        st.sampled_from(["Unschedulable", "Other"]),
    ),
    st.builds(lambda t: {"status": {"startTime": t}}, st.sampled_from(["2026-03-02T00:00:00Z", "bad", None])),
    st.builds(
        lambda c: {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": c}}}]}}, HOSTILE
    ),
    st.builds(lambda v: {"spec": {"nodeSelector": {"zone": v}}}, st.one_of(st.just("a"), HOSTILE)),
    st.builds(lambda v: {"metadata": {"labels": {"app": v}}}, st.one_of(st.just("x"), HOSTILE)),
    st.builds(lambda v: {"metadata": {"annotations": {"a": v}}}, st.one_of(st.just("y"), HOSTILE)),
    st.builds(lambda v: {"spec": {"schedulingGates": v}}, st.one_of(st.just([{"name": "g"}]), HOSTILE)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PATCHES, max_size=12))
def test_every_version_equals_a_parse_from_scratch(patches: list[dict[str, Any]]) -> None:
    """Merge patch after merge patch (sharing what they leave, as the embedded cluster writes): each
    version the state takes reads as a fresh parse of its document, and each it refuses is refused
    with the fresh parse's error."""
    state = ClusterState()
    doc = pod_doc()
    state.upsert("Pod", doc)
    for patch in patches:
        new = merge_patch(doc, patch)
        try:
            expected = fresh(new)
        except Exception as err:  # whatever a full parse raises, the state refuses alike
            with pytest.raises(ValueError) as refused:
                state.upsert("Pod", new)
            with pytest.raises(ValueError) as full:
                ClusterState().upsert("Pod", copy.deepcopy(new))
            assert str(refused.value) == str(full.value), err
            continue
        state.upsert("Pod", new)
        assert parsed(state.pods["ml/p"]) == parsed(expected)
        doc = new


def test_unbound_is_the_pod_as_dataclasses_replace_makes_it_without_a_node() -> None:
    doc = merge_patch(
        {
            **pod_doc(),
            "metadata": {**pod_doc()["metadata"], "annotations": {"provisioner.sh/nodepools": "a, b"}},
        },
        BIND,
    )
    bound = fresh(doc)
    assert bound.node_name == "n1"
    unbound = bound.unbound()
    assert unbound.node_name is None and bound.node_name == "n1"
    assert parsed(unbound) == parsed(dataclasses.replace(bound, node_name=None))
    assert unbound.raw is bound.raw and unbound.key == bound.key and unbound.nodepools == ("a", "b")
    # Every slot is set: one left out would raise AttributeError on reading.
    assert all(
        getattr(unbound, f.name, AttributeError) is not AttributeError for f in dataclasses.fields(unbound)
    )
