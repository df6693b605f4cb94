"""The strict test API server's indexes and caches (testkit/controllers/kube_store.py) never go stale: each
stored version is encoded once, each event line once for every watch, objects are found by resource and
key, and a watch is registered in the store until it ends. Each test reads through the official client
over HTTP after a write that would leave a stale index or cache showing the old answer."""

from __future__ import annotations

import copy
import itertools
import socket
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from provisioner.clusterapi import NotFoundError
from provisioner.kube import client as kc
from testkit.builders.pods import pod_manifest
from testkit.controllers import kube_rules as rules
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.kube_store import Expired, Store
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="checks the imitation itself")


def a_pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return pod_manifest(name, cpu="1", memory="1Gi", namespace=namespace, labels=labels)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def watch(client: kc.KubeClient, *, selector: str | None = None) -> Iterator[dict[str, Any]]:
    return client.watch(kc.POD, resource_version=None, timeout_seconds=60, label_selector=selector)


def seen(events: Iterator[dict[str, Any]]) -> tuple[str, str, str]:
    """The next event of a watch: (type, name, the `app` label)."""
    event = next(events)
    meta = event["object"]["metadata"]
    return event["type"], meta["name"], (meta.get("labels") or {}).get("app", "")


def test_get_and_list_answer_the_latest_version_after_each_write(kube_client: kc.KubeClient) -> None:
    kube_client.create(kc.POD, a_pod("p", app="a"), namespace="default")
    kube_client.patch(kc.POD, "p", {"metadata": {"labels": {"app": "b"}}}, namespace="default")
    assert kube_client.get(kc.POD, "p", namespace="default")["metadata"]["labels"] == {"app": "b"}
    assert names(kube_client.list(kc.POD, label_selector="app=b")[0]) == ["p"]
    assert kube_client.list(kc.POD, label_selector="app=a")[0] == [], "moved out of the selector"
    kube_client.delete(kc.POD, "p", namespace="default")
    with pytest.raises(NotFoundError):
        kube_client.get(kc.POD, "p", namespace="default")
    assert kube_client.list(kc.POD)[0] == []
    again = kube_client.create(kc.POD, a_pod("p", app="c"), namespace="default")
    assert kube_client.get(kc.POD, "p", namespace="default")["metadata"]["uid"] == again["metadata"]["uid"]


def test_one_event_reaches_each_watch_as_its_selector_sees_it(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    kube_client.create(kc.POD, a_pod("p", app="a"), namespace="default")
    every, only_a = watch(kube_client), watch(kube_client, selector="app=a")
    assert seen(every) == ("ADDED", "p", "a") and seen(only_a) == ("ADDED", "p", "a")
    assert kube_server.emulator.store.watching("pods") == 2
    kube_client.patch(kc.POD, "p", {"metadata": {"labels": {"app": "b"}}}, namespace="default")
    assert seen(every) == ("MODIFIED", "p", "b")
    assert seen(only_a) == ("DELETED", "p", "b"), "leaving the selector reads as a deletion"
    kube_client.patch(kc.POD, "p", {"metadata": {"labels": {"app": "a"}}}, namespace="default")
    assert seen(every) == ("MODIFIED", "p", "a")
    assert seen(only_a) == ("ADDED", "p", "a"), "entering it as an addition"
    kube_client.patch(kc.POD, "p", {"metadata": {"annotations": {"x": "1"}}}, namespace="default")
    assert seen(every) == ("MODIFIED", "p", "a") and seen(only_a) == ("MODIFIED", "p", "a")
    kube_client.delete(kc.POD, "p", namespace="default")
    assert seen(every) == ("DELETED", "p", "a") and seen(only_a) == ("DELETED", "p", "a")


def test_a_deleted_pod_is_not_sent_to_a_watch_that_never_saw_it(kube_client: kc.KubeClient) -> None:
    kube_client.create(kc.POD, a_pod("marker", app="a"), namespace="default")
    only_a = watch(kube_client, selector="app=a")
    assert seen(only_a) == ("ADDED", "marker", "a")
    kube_client.create(kc.POD, a_pod("other", app="b"), namespace="default")
    kube_client.delete(kc.POD, "other", namespace="default")
    kube_client.delete(kc.POD, "marker", namespace="default")
    assert seen(only_a) == ("DELETED", "marker", "a"), "nothing of `other` came first"


def test_a_namespace_scoped_list_and_a_deleted_namespace(kube_client: kc.KubeClient) -> None:
    kube_client.create(kc.NAMESPACE, {"metadata": {"name": "vision"}})
    kube_client.create(kc.POD, a_pod("p", namespace="vision"), namespace="vision")
    kube_client.create(kc.POD, a_pod("p"), namespace="default")
    vision = kube_client.request("GET", kc.POD.path(namespace="vision"))["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in vision] == [("vision", "p")]
    kube_client.delete(kc.NAMESPACE, "vision")
    with pytest.raises(NotFoundError):
        kube_client.create(kc.POD, a_pod("q", namespace="vision"), namespace="vision")
    kube_client.create(kc.NAMESPACE, {"metadata": {"name": "vision"}})
    kube_client.create(kc.POD, a_pod("q", namespace="vision"), namespace="vision")
    vision = kube_client.request("GET", kc.POD.path(namespace="vision"))["items"]
    assert names(vision) == ["p", "q"]
    assert kube_client.get(kc.POD, "p", namespace="default")["metadata"]["namespace"] == "default"


def test_a_patch_cannot_move_an_object_to_another_key(kube_client: kc.KubeClient) -> None:
    kube_client.create(kc.POD, a_pod("p"), namespace="default")
    kube_client.patch(
        kc.POD, "p", {"metadata": {"namespace": "kube-system", "labels": {"x": "1"}}}, namespace="default"
    )
    assert names(kube_client.list(kc.POD)[0]) == ["p"]
    assert kube_client.get(kc.POD, "p", namespace="default")["metadata"]["labels"] == {"x": "1"}


def test_a_watch_the_client_closed_leaves_the_store(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    kube_client.create(kc.POD, a_pod("p"), namespace="default")
    url = urllib.parse.urlsplit(kube_server.url)
    with socket.create_connection((url.hostname or "", url.port or 80), timeout=60) as conn:
        conn.sendall(b"GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: test\r\n\r\n")
        received = b""
        while b'"ADDED"' not in received:
            chunk = conn.recv(65536)
            assert chunk, "the watch ended before its first event"
            received += chunk
        assert kube_server.emulator.store.watching("pods") == 1
    bump = iter(range(1_000_000))
    wait_until(
        "the server to forget the closed watch",
        lambda: kube_server.emulator.store.watching("pods") == 0,
        # The server learns that a stream is closed when it next writes to it.
        step=lambda: kube_client.patch(
            kc.POD, "p", {"metadata": {"labels": {"n": str(next(bump))}}}, namespace="default"
        ),
    )


def test_the_store_encodes_each_version_once_and_never_reuses_an_old_encoding() -> None:
    store = Store()
    first = store.put("pods", {"metadata": {"namespace": "d", "name": "p"}, "spec": {"v": 1}}, "ADDED")
    assert first.json is first.json, "encoded once"
    second = store.put("pods", {"metadata": {"namespace": "d", "name": "p"}, "spec": {"v": 2}}, "MODIFIED")
    found = store.get("pods", "d", "p")
    assert found is second and b'"v":2' in found.json and b'"v":1' in first.json
    assert [v.obj["spec"] for v in store.items("pods")] == [{"v": 2}]
    store.remove("pods", second.obj)
    assert store.get("pods", "d", "p") is None and list(store.items("pods")) == []


def test_a_write_never_changes_the_version_it_was_made_from() -> None:
    old = {
        "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["f"]},
        "spec": {"x": {"y": 1}},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]},
    }
    before = copy.deepcopy(old)
    spec = rules.merge_write(
        "Pod", old, {"metadata": {"labels": {"b": "2"}}, "spec": {"x": {"z": 2}}}, status=False
    )
    spec["metadata"]["resourceVersion"] = "2"  # as the server fills in a new version's metadata
    status = rules.merge_write("Pod", old, {"status": {"phase": "Running"}}, status=True)
    status["metadata"]["resourceVersion"] = "3"
    status["metadata"]["finalizers"].append("g")
    assert old == before
    assert spec["spec"]["x"] == {"y": 1, "z": 2} and status["status"]["phase"] == "Running"


def test_what_a_create_stores_shares_nothing_with_the_document_sent() -> None:
    sent = pod_manifest("p", cpu="1", memory="1Gi", labels={"a": "1"})
    before = copy.deepcopy(sent)
    stored = rules.on_create("Pod", sent)
    stored["metadata"]["labels"]["a"] = "2"
    stored["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert sent == before


def test_the_history_keeps_a_real_servers_watch_cache_window() -> None:
    # kube-apiserver's watch cache: the events of the last 75 s, the newest 100 however old, 102,400 at most
    # (here 3 and 6).
    now = [0.0]
    store = Store(history=6, fresh=75.0, least=3, clock=lambda: now[0])
    versions = itertools.count(1)

    def write(name: str) -> int:
        rv = next(versions)
        store.put("nodes", {"metadata": {"name": name, "resourceVersion": str(rv)}}, "ADDED")
        return rv

    def replayed(since: int) -> list[int]:
        return [e.rv for e in store.watch("nodes", None, None, lambda _: True, since=since)[1]]

    first = [write(n) for n in "abcde"]
    assert replayed(0) == first, "all fresh: all kept"
    now[0] = 76.0
    later = write("f")
    assert replayed(first[2]) == [first[3], first[4], later], "the stale ones go but for the newest 3"
    with pytest.raises(Expired):
        replayed(first[1])
    fresh = [write(n) for n in "ghijklm"]
    assert replayed(fresh[0]) == fresh[1:], "all fresh, but never more than 6"
    with pytest.raises(Expired):
        replayed(later)
