"""Events correlated as client-go's recorder does (`provisioner.kube.events`), against a Kubernetes API over
HTTP: the same Event recorded again is counted on the first (a PATCH), not written again; one that is
gone is created again with its count; Events that differ in anything that names them stay apart."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from provisioner.clock import VirtualClock, isoformat
from provisioner.kube import client as kc
from provisioner.kube.api import EventWriter, KubeClusterAPI
from provisioner.kube.events import EventCorrelator


def _ours(client: kc.KubeClient, prefix: str) -> list[dict[str, Any]]:
    items, _ = client.list(kc.EVENT, namespace="default")
    found = [e for e in items if e["involvedObject"]["name"].startswith(prefix)]
    return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))


def test_the_same_event_again_is_counted_on_the_first_and_other_messages_stay_apart(
    kube_client: kc.KubeClient,
) -> None:
    clock = VirtualClock()
    api = KubeClusterAPI(kube_client, clock=clock)
    pod = f"corr-{uuid.uuid4().hex[:8]}"
    first = clock.now()
    for _ in range(3):
        api.record_event(kind="Pod", name=pod, namespace="default", reason="FailedProvisioning", message="a")
        clock.advance(10)
    api.record_event(kind="Pod", name=pod, namespace="default", reason="FailedProvisioning", message="b")
    api.record_event(kind="Pod", name=pod, namespace="default", reason="Nominated", message="a")
    events = _ours(kube_client, pod)
    assert [(e["reason"], e["message"], e["count"]) for e in events] == [
        ("FailedProvisioning", "a", 3),
        ("FailedProvisioning", "b", 1),
        ("Nominated", "a", 1),
    ]
    repeated = events[0]
    assert repeated["firstTimestamp"] == isoformat(first)
    assert repeated["lastTimestamp"] == isoformat(first + timedelta(seconds=20))


def test_a_repeat_of_an_event_that_is_gone_creates_it_again_with_its_count(
    kube_client: kc.KubeClient,
) -> None:
    api = KubeClusterAPI(kube_client)
    pod = f"gone-{uuid.uuid4().hex[:8]}"
    api.record_event(kind="Pod", name=pod, namespace="default", reason="Nominated", message="m")
    (event,) = _ours(kube_client, pod)
    kube_client.delete(kc.EVENT, event["metadata"]["name"], namespace="default")
    api.record_event(kind="Pod", name=pod, namespace="default", reason="Nominated", message="m")
    (again,) = _ours(kube_client, pod)
    assert again["count"] == 2 and again["message"] == "m"


def test_the_background_writer_counts_repeats_in_the_order_they_were_recorded(
    kube_client: kc.KubeClient,
) -> None:
    writer = EventWriter(kube_client).start()
    api = KubeClusterAPI(kube_client, event_writer=writer)
    prefix = f"bg-{uuid.uuid4().hex[:8]}"
    for i in range(12):
        api.record_event(kind="Pod", name=f"{prefix}-{i % 3}", namespace="default", reason="R", message="m")
    writer.stop()
    events = _ours(kube_client, prefix)
    assert [(e["involvedObject"]["name"], e["count"]) for e in events] == [
        (f"{prefix}-{i}", 4) for i in range(3)
    ]


def test_the_correlator_remembers_only_its_last_events() -> None:
    correlator = EventCorrelator(size=2)

    def body(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:8]}"},
            "involvedObject": {"kind": "Pod", "name": name},
            "reason": "R",
            "message": "m",
            "firstTimestamp": "t",
            "lastTimestamp": "t",
            "count": 1,
        }

    seen = [correlator.observe("default", body(name)).times for name in ("a", "b", "a", "c", "b", "a")]
    # a b a: a counted twice; c pushes b out (a was used since), so b starts again and then a is gone too.
    assert seen == [1, 1, 2, 1, 1, 1]
