"""The strict test API server's watch behaves as kube-apiserver's (the Kubernetes API Concepts: "Efficient
detection of changes", "Watch bookmarks", "Resource versions": semantics for watch), read through the
official `kubernetes` client over HTTP; and our informers across what a real server does to a watch: ends
it (they resume from the last resourceVersion, with no list and no replay) or answers 410 Gone (they
list again), with nothing lost.

Every wait is for a condition (tests/polling.py), never for a time; the server's timeouts are small so
that the waits are short, but no assertion depends on how long anything took."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from provisioner.kube import client as kc
from provisioner.kube.informers import Informer, Informers, StateFeeder
from provisioner.state import ClusterState
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.kube_watch import Timing
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="tunes the imitation's history and timers")

READ_TIMEOUT = 60
"""The client's read timeout: a watch the server never ends fails the test with a read timeout."""


@pytest.fixture
def core(kube_server: KubeServer) -> Iterator[kubernetes.client.CoreV1Api]:
    configuration = kubernetes.client.Configuration()
    configuration.host = kube_server.url
    with kubernetes.client.ApiClient(configuration) as api:
        yield kubernetes.client.CoreV1Api(api)


def a_node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def watched(core: kubernetes.client.CoreV1Api, **kw: Any) -> list[tuple[str, str]]:
    """Every event of one watch of nodes until the server ends it: (type, name or the bookmark's
    resourceVersion)."""
    out = []
    stream = kubernetes.watch.Watch().stream(core.list_node, _request_timeout=READ_TIMEOUT, **kw)
    for event in stream:
        meta = event["raw_object"]["metadata"]
        out.append((event["type"], meta["resourceVersion"] if event["type"] == "BOOKMARK" else meta["name"]))
    return out


def list_version(client: kc.KubeClient) -> str:
    return client.list(kc.NODE)[1]


def test_a_watch_from_a_resource_version_sends_only_the_changes_after_it(
    kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_client.create(kc.NODE, a_node("a"))
    kube_client.create(kc.NODE, a_node("b"))
    rv = list_version(kube_client)
    kube_client.patch(kc.NODE, "a", {"metadata": {"labels": {"x": "1"}}})
    kube_client.delete(kc.NODE, "b")
    kube_client.create(kc.NODE, a_node("c"))
    assert watched(core, resource_version=rv, timeout_seconds=1) == [
        ("MODIFIED", "a"),
        ("DELETED", "b"),
        ("ADDED", "c"),
    ], "no synthetic ADDED for what the client holds at that version"
    now = list_version(kube_client)
    assert watched(core, resource_version=now, timeout_seconds=1) == [], "nothing changed since"
    for unset in ({}, {"resource_version": "0"}):
        assert watched(core, timeout_seconds=1, **unset) == [("ADDED", "a"), ("ADDED", "c")], (
            "unset or 0: the current state as ADDED first"
        )


def test_a_selectors_watch_resumed_at_a_version_judges_each_object_by_its_version_then(
    kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_client.create(kc.NODE, a_node("leaves", app="a"))
    kube_client.create(kc.NODE, a_node("enters", app="b"))
    kube_client.create(kc.NODE, a_node("stays", app="a"))
    kube_client.create(kc.NODE, a_node("never", app="b"))
    rv = list_version(kube_client)
    kube_client.patch(kc.NODE, "leaves", {"metadata": {"labels": {"app": "b"}}})
    kube_client.patch(kc.NODE, "enters", {"metadata": {"labels": {"app": "a"}}})
    kube_client.patch(kc.NODE, "stays", {"metadata": {"labels": {"x": "1"}}})
    kube_client.patch(kc.NODE, "never", {"metadata": {"labels": {"x": "1"}}})
    kube_client.delete(kc.NODE, "never")
    kube_client.delete(kc.NODE, "stays")
    assert watched(core, resource_version=rv, timeout_seconds=1, label_selector="app=a") == [
        ("DELETED", "leaves"),
        ("ADDED", "enters"),
        ("MODIFIED", "stays"),
        ("DELETED", "stays"),
    ]


def test_a_watch_from_a_version_not_reached_yet_waits_for_it(
    kube_server: KubeServer, kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    rv = int(list_version(kube_client))
    first: list[str] = []

    def read() -> None:
        stream = kubernetes.watch.Watch().stream(
            core.list_node, resource_version=str(rv + 2), timeout_seconds=600, _request_timeout=READ_TIMEOUT
        )
        first.append(next(stream)["raw_object"]["metadata"]["name"])
        stream.close()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until("the watch to open", lambda: kube_server.emulator.store.watching("nodes") == 1)
    for name in ("one", "two", "three"):  # at versions rv + 1, rv + 2, rv + 3
        kube_client.create(kc.NODE, a_node(name))
    reader.join(READ_TIMEOUT)
    assert first == ["three"], "the changes up to the version asked for are not sent"


def test_removing_the_last_finalizer_of_a_going_object_deletes_it_in_one_event(
    kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_client.create(kc.NODE, {"metadata": {"name": "held", "finalizers": ["example.com/f"]}})
    kube_client.delete(kc.NODE, "held")
    rv = list_version(kube_client)
    gone = kube_client.patch(kc.NODE, "held", {"metadata": {"finalizers": None}})
    # One event at the write's version (as kube-apiserver deletes it in that write): a MODIFIED at the
    # same version before it would leave a watch resumed there short of the deletion.
    assert watched(core, resource_version=rv, timeout_seconds=1) == [("DELETED", "held")]
    assert watched(core, resource_version=gone["metadata"]["resourceVersion"], timeout_seconds=1) == []


def test_a_watch_from_a_version_the_history_no_longer_holds_answers_410_expired(
    kube_server: KubeServer, kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_server.emulator.store.history = 3
    rv = list_version(kube_client)
    for name in "abcd":
        kube_client.create(kc.NODE, a_node(name))
    with pytest.raises(kubernetes.client.ApiException) as err:
        watched(core, resource_version=rv, timeout_seconds=1)
    assert err.value.status == 410 and str(err.value.reason).startswith("Expired")
    # The last three events are still held: a watch from the version before them replays them.
    kept = kube_client.get(kc.NODE, "a")["metadata"]["resourceVersion"]
    assert watched(core, resource_version=kept, timeout_seconds=1) == [("ADDED", n) for n in "bcd"]
    kube_server.call(kube_server.emulator.compact)
    with pytest.raises(kubernetes.client.ApiException) as err:
        watched(core, resource_version=kept, timeout_seconds=1)
    assert err.value.status == 410, "compacted: every version seen so far is too old"


def test_a_watch_ends_cleanly_after_its_timeout_seconds(
    kube_server: KubeServer, kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_client.create(kc.NODE, a_node("a"))
    # Ended by the server, with no error: a watch it never ended would raise the client's read timeout.
    assert watched(core, timeout_seconds=1) == [("ADDED", "a")]
    wait_until(
        "the server to forget the ended watch", lambda: kube_server.emulator.store.watching("nodes") == 0
    )
    with pytest.raises(kubernetes.client.ApiException) as err:
        watched(core, timeout_seconds=-1)
    assert err.value.status == 400


def test_bookmarks_carry_the_newest_resource_version_only_when_allowed(
    kube_server: KubeServer, kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_server.emulator.timing = Timing(bookmark_every=3600.0)  # only the one before the end
    rv = list_version(kube_client)
    kube_client.create(kc.NODE, a_node("a"))
    newest = kube_client.create(kc.NAMESPACE, {"metadata": {"name": "elsewhere"}})["metadata"][
        "resourceVersion"
    ]
    # timeoutSeconds 3: the bookmark comes 2 s before the end, as kube-apiserver sends it.
    events = watched(core, resource_version=rv, timeout_seconds=3, allow_watch_bookmarks=True)
    assert events == [("ADDED", "a"), ("BOOKMARK", newest)], "a bookmark may carry another kind's version"
    assert watched(core, resource_version=rv, timeout_seconds=3) == [("ADDED", "a")], "not asked for"
    assert watched(core, resource_version=newest, timeout_seconds=1) == [], "resumable at the bookmark"


def test_a_long_watch_sends_a_bookmark_now_and_then_with_only_a_resource_version(
    kube_server: KubeServer, kube_client: kc.KubeClient, core: kubernetes.client.CoreV1Api
) -> None:
    kube_server.emulator.timing = Timing(bookmark_every=0.05)
    rv = list_version(kube_client)
    stream = kubernetes.watch.Watch().stream(
        core.list_node,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=600,
        _request_timeout=READ_TIMEOUT,
    )
    first = next(stream)
    assert first["type"] == "BOOKMARK"
    assert first["raw_object"] == {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": rv}}
    made = kube_client.create(kc.NODE, a_node("a"))["metadata"]["resourceVersion"]
    assert next(e for e in stream if e["type"] != "BOOKMARK")["raw_object"]["metadata"]["name"] == "a"
    later = next(stream)
    assert later["type"] == "BOOKMARK" and later["raw_object"]["metadata"]["resourceVersion"] == made
    stream.close()


class GatedClient(kc.KubeClient):
    """Our client, whose watches wait at a gate while it is closed (a watch that could not reopen for a
    while: a network partition, an API server restart)."""

    def __init__(self, url: str) -> None:
        super().__init__(kc.load_configuration(url=url))
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()
        """Set once a watch waits at the closed gate."""

    def watch(self, res: kc.Resource, **kw: Any) -> Iterator[dict[str, Any]]:
        if not self.gate.is_set():
            self.held.set()
            assert self.gate.wait(READ_TIMEOUT), "the test never opened the gate"
        yield from super().watch(res, **kw)


@pytest.fixture
def gated(kube_server: KubeServer) -> Iterator[GatedClient]:
    client = GatedClient(kube_server.url)
    try:
        yield client
    finally:
        client.gate.set()
        client.close()


def node_informer(client: kc.KubeClient, state: ClusterState, stop: threading.Event) -> Informer:
    informer = Informer(client, kc.NODE, StateFeeder(state), stop=stop, watch_timeout=1, max_backoff=0.2)
    informer.start()
    assert informer.synced.wait(READ_TIMEOUT), "the informer never listed"
    return informer


def test_an_informer_resumes_a_watch_the_server_ended_with_no_replay_and_no_list(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    for i in range(30):
        kube_client.create(kc.NODE, a_node(f"n{i}"))
    informers = Informers(kube_client, ClusterState(), resources=[kc.NODE], watch_timeout=1)
    informers.start()
    try:
        (informer,) = informers.informers
        state = informers.feeder.state
        wait_until("three watches, two ended by the server", lambda: informer.watches >= 3)
        assert informer.events == 0, "a resumed watch replayed objects the informer holds"
        kube_client.patch(kc.NODE, "n0", {"metadata": {"labels": {"x": "1"}}})
        kube_client.delete(kc.NODE, "n1")
        kube_client.create(kc.NODE, a_node("later"))
        wait_until(
            "the three changes in the state", lambda: "later" in state.nodes and "n1" not in state.nodes
        )
        wait_until("n0's label", lambda: state.nodes["n0"].labels.get("x") == "1")
        watches = informer.watches
        wait_until("two more server-ended watches", lambda: informer.watches >= watches + 2)
        assert informer.events == 3, "each change applied once, however the watches fell"
        assert informer.relists == 1, "no list after a watch the server ended"
    finally:
        informers.stop()


def test_an_informer_follows_bookmarks_to_the_newest_resource_version(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    kube_server.emulator.timing = Timing(bookmark_every=0.05)
    informers = Informers(kube_client, ClusterState(), resources=[kc.NODE], watch_timeout=600)
    informers.start()
    try:
        (informer,) = informers.informers
        assert informers.wait_synced(READ_TIMEOUT)
        newest = kube_client.create(kc.NAMESPACE, {"metadata": {"name": "x"}})["metadata"]["resourceVersion"]
        wait_until(
            f"the node informer at version {newest}, which no node carries",
            lambda: informer.resource_version == newest,
        )
        assert informer.events == 0 and informer.relists == 1
    finally:
        informers.stop()


@contextlib.contextmanager
def away_for_three_changes(
    kube_client: kc.KubeClient, gated: GatedClient, *, first: Callable[[], object] = lambda: None
) -> Iterator[tuple[ClusterState, Informer]]:
    """Nodes `kept`, `changed` and `deleted`, and an informer over them whose watch then ends and stays
    away while one is deleted, one changed and `added` created (`first` runs before those); the watch
    comes back when the block starts."""
    for name in ("kept", "changed", "deleted"):
        kube_client.create(kc.NODE, a_node(name))
    state, stop = ClusterState(), threading.Event()
    informer = node_informer(gated, state, stop)
    try:
        gated.gate.clear()
        assert gated.held.wait(READ_TIMEOUT), "the informer's watch never ended"
        first()
        kube_client.delete(kc.NODE, "deleted")
        kube_client.patch(kc.NODE, "changed", {"metadata": {"labels": {"x": "1"}}})
        kube_client.create(kc.NODE, a_node("added"))
        gated.gate.set()
        yield state, informer
    finally:
        stop.set()


def test_an_informer_whose_watch_was_away_replays_the_gap_deletions_included(
    kube_client: kc.KubeClient, gated: GatedClient
) -> None:
    with away_for_three_changes(kube_client, gated) as (state, informer):
        wait_until("'deleted' to leave the state", lambda: "deleted" not in state.nodes)
        wait_until("'added' in the state", lambda: "added" in state.nodes)
        assert state.nodes["changed"].labels.get("x") == "1" and "kept" in state.nodes
        assert informer.relists == 1 and informer.events == 3, "resumed: the gap's three events, no list"


def test_an_informer_whose_watch_was_away_too_long_lists_again_and_loses_nothing(
    kube_server: KubeServer, kube_client: kc.KubeClient, gated: GatedClient
) -> None:
    def shorten() -> None:
        kube_server.emulator.store.history = 2  # the gap's first event falls out of the history

    with away_for_three_changes(kube_client, gated, first=shorten) as (state, informer):
        wait_until("a list after 410 Gone", lambda: informer.relists >= 2)
        wait_until("'deleted' to leave the state", lambda: "deleted" not in state.nodes)
        assert "added" in state.nodes and "kept" in state.nodes
        assert state.nodes["changed"].labels.get("x") == "1"
        kube_client.create(kc.NODE, a_node("after"))
        wait_until("'after' in the state: watching again from the new list", lambda: "after" in state.nodes)
