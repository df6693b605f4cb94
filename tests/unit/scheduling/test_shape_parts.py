"""`shapes.shape_parts`, the identities a solve keys its shapes by before building a `shape_key`: pods
with the same parts must have the same key, so every part `shape_key` reads must be among them."""

from __future__ import annotations

import dataclasses

from provisioner.api import labels as wk
from provisioner.scheduling.shapes import selected_keys, shape_key, shape_parts
from testkit.builders.pods import pod, spread, term


def test_every_field_the_shape_key_reads_is_a_part() -> None:
    # Two pods that differ in every field: each of the first's fields in turn replaced by the second's.
    first = pod(
        "a",
        namespace="ml",
        labels={"app": "a"},
        node_selector={wk.ZONE: "us-east-1a"},
        required=[[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]],
        preferred=[(10, [{"key": wk.ZONE, "operator": "In", "values": ["us-east-1a"]}])],
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        spread=[spread(app="a")],
        affinity=[term(app="a")],
        anti_affinity=[term(app="a")],
        preferred_affinity=[(5, term(app="a"))],
        preferred_anti_affinity=[(5, term(app="a"))],
        pools=["x"],
    )
    second = pod(
        "b",
        namespace="web",
        cpu="2",
        labels={"app": "b"},
        node_selector={wk.ZONE: "us-east-1b"},
        required=[[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]],
        preferred=[(20, [{"key": wk.ZONE, "operator": "In", "values": ["us-east-1b"]}])],
        tolerations=[{"key": "tpu", "operator": "Exists"}],
        spread=[spread(app="b", max_skew=2)],
        affinity=[term(app="b")],
        anti_affinity=[term(app="b")],
        preferred_affinity=[(7, term(app="b"))],
        preferred_anti_affinity=[(7, term(app="b"))],
        pools=["y"],
    )
    selected = selected_keys([first, second])
    read = []
    for field in dataclasses.fields(first):
        if not field.init:
            continue
        changed = dataclasses.replace(first, **{field.name: getattr(second, field.name)})
        if shape_key(changed, selected) != shape_key(first, selected):
            read.append(field.name)
            assert shape_parts(changed) != shape_parts(first), f"shape_parts misses {field.name}"
    assert {"labels", "requests", "tolerations", "annotations", "namespace"} <= set(read)


def test_pods_of_one_template_share_their_parts() -> None:
    a, b = pod("a", labels={"app": "a"}), pod("b", labels={"app": "a"})
    template = dataclasses.replace(b, labels=a.labels, requests=a.requests, annotations=a.annotations)
    template = dataclasses.replace(template, node_selector=a.node_selector)
    assert shape_parts(template) == shape_parts(a)
    assert shape_key(template, frozenset({"app"})) == shape_key(a, frozenset({"app"}))
