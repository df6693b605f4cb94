"""Hostile objects as they arrive from the API server (property-based): NodePools, NodeClasses, Pods and
Nodes with huge, negative or malformed quantities, unknown fields, deep nesting, wrong types and large
lists. Whatever arrives, the informers' feed into the cluster state never raises: the object is either
taken or skipped with a warning naming its kind, name and field, and the objects beside it are kept."""

from __future__ import annotations

import copy
import logging
import re
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.kube import client as kc
from provisioner.kube.informers import StateFeeder
from provisioner.state import ClusterState
from testkit.controllers.world import gpu_pod, node_class, node_pool
from tests.hostile import HOSTILE, examples, hostile_objects, paths


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"provisioner.sh/nodepool": "gpu"}},
        "spec": {"providerID": "fake://z/n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "capacity": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod() -> dict[str, Any]:
    doc = gpu_pod("p1")
    doc["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    doc["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    doc["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    return doc


BASES = {
    "Pod": (kc.POD, _pod),
    "Node": (kc.NODE, _node),
    "NodePool": (kc.NODEPOOL, lambda: node_pool("gpu", limits={"nvidia.com/gpu": "8", "cpu": "100"})),
    "AWSNodeClass": (kc.nodeclass("AWSNodeClass"), node_class),
}


def _other(kind: str) -> dict[str, Any]:
    doc = BASES[kind][1]()
    doc["metadata"]["name"] = "the-good-one"
    return doc


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_objects({kind: make for kind, (_, make) in BASES.items()}))
def test_no_object_from_the_api_breaks_the_feed_or_its_neighbours(obj: tuple[str, dict[str, Any]]) -> None:
    kind, doc = obj
    res = BASES[kind][0]
    state = ClusterState()
    feeder = StateFeeder(state)
    good = _other(kind)
    # As a relist (one bad item among good ones) and as a watch event.
    feeder.replace_all(res, [copy.deepcopy(doc), good])
    feeder.upsert(res, copy.deepcopy(doc))
    assert "the-good-one" in {k.rsplit("/", 1)[-1] for k in state.keys_of(kind)}
    snap = state.snapshot()  # the decision code's view builds from whatever was taken
    assert snap is not None


def test_a_refused_object_is_named_with_its_field_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    doc = node_pool("gpu", limits={"nvidia.com/gpu": "-5Gi"})
    doc["spec"]["weight"] = "heavy"
    feeder = StateFeeder(ClusterState())
    with caplog.at_level(logging.WARNING):
        feeder.upsert(kc.NODEPOOL, doc)
    (record,) = [r for r in caplog.records if "ignoring invalid" in r.getMessage()]
    message = record.getMessage()
    assert "NodePool gpu" in message
    assert "spec.weight" in message


SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "demo.yaml"


@st.composite
def hostile_scenarios(draw: st.DrawFn) -> list[Any]:
    docs = list(yaml.safe_load_all(SCENARIO.read_text()))
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        i = draw(st.integers(min_value=0, max_value=len(docs) - 1))
        path = draw(st.sampled_from(paths(docs[i])))
        parent: Any = docs[i]
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(HOSTILE)
    return docs


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_scenarios())
def test_a_hostile_scenario_file_is_refused_with_a_clear_error_or_simulated(
    tmp_path_factory: pytest.TempPathFactory, docs: list[Any]
) -> None:
    path = tmp_path_factory.mktemp("scenario") / "hostile.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(app, ["simulate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), "".join(
        traceback.format_exception(result.exception)
    )
    assert result.exit_code in (0, 1)
    if result.exit_code == 1:
        assert f"{path}:" in result.output, "each problem names the file (and line)"
    assert "Traceback" not in result.output


def test_a_node_with_a_non_string_provider_id_is_refused_not_taken_to_break_every_snapshot() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    bad = _node()
    bad["spec"]["providerID"] = {"a": "b"}
    feeder.replace_all(kc.NODE, [bad, _other("Node")])
    assert set(state.keys_of("Node")) == {"the-good-one"}
    assert len(state.snapshot().nodes) == 1


def test_a_pod_with_a_list_for_a_node_selector_value_names_the_field() -> None:
    bad = _pod()
    bad["spec"]["nodeSelector"] = {"provisioner.sh/gpu-name": ["a10g"]}
    state = ClusterState()
    try:
        state.upsert("Pod", bad)
    except ValueError as err:
        assert "Pod default/p1: spec.nodeSelector.provisioner.sh/gpu-name: expected a string" in str(err)
    else:
        raise AssertionError("taken")
    assert not state.keys_of("Pod")


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        (
            ("affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
            [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": ["x"] * 50}},
                }
            ],
            "spec.affinity.podAntiAffinity.required...[0].labelSelector.matchLabels.app: expected a string",
        ),
        (
            ("affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
            [{"topologyKey": ["zone"], "labelSelector": {}}],
            "spec.affinity.podAffinity.required...[0].topologyKey: expected a string",
        ),
        (
            ("topologySpreadConstraints",),
            [{"maxSkew": 1, "topologyKey": "zone", "matchLabelKeys": [{"a": 1}]}],
            "spec.topologySpreadConstraints[0].matchLabelKeys[0]: expected a string",
        ),
        (
            ("topologySpreadConstraints",),
            [{"maxSkew": 1, "topologyKey": "zone", "minDomains": [3]}],
            "spec.topologySpreadConstraints[0].minDomains: expected an integer",
        ),
        (
            ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": None, "operator": "Gt", "values": ["4"]}]}]},
            "spec.affinity.nodeAffinity...nodeSelectorTerms[0].matchExpressions[0].key: required",
        ),
    ],
)
def test_a_pod_with_a_non_text_selector_field_is_refused_naming_it(
    where: tuple[str, ...],
    value: Any,
    field: str,
) -> None:
    """The solver hashes selectors and topology keys into its groups: a list there (found by the scenario
    fuzzing) broke the whole solve."""
    bad = _pod()
    parent = bad["spec"]
    for step in where[:-1]:
        parent = parent.setdefault(step, {})
    parent[where[-1]] = value
    state = ClusterState()
    with pytest.raises(ValueError, match=re.escape(f"Pod default/p1: {field}")):
        state.upsert("Pod", bad)
    assert not state.keys_of("Pod")


def test_a_scenario_pod_whose_node_requirement_has_no_key_is_refused_naming_the_field(tmp_path: Path) -> None:
    """Found by the scenario fuzzing: a requirement with a null key reached the solver, which failed
    sorting the keys."""
    pod = gpu_pod("finetune")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": None, "operator": "Gt", "values": ["4"]}]}
                ]
            }
        }
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all([node_pool("gpu"), node_class(), pod]))
    result = CliRunner().invoke(app, ["simulate", str(path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "nodeSelectorTerms[0].matchExpressions[0].key: key is required" in result.output
