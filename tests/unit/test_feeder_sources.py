"""One kind fed by several informers (`StateFeeder` sources): a sharded replica's pods come through its
shards' label selector and, as quota admission holder, through namespaced watches and the watch of pods
labelled for no shard. The state holds an object while some source holds it, whatever order the
sources' events come in."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.kube import client as kc
from provisioner.kube.informers import StateFeeder
from provisioner.state import ClusterState
from testkit.controllers.world import gpu_pod

SHARDS, TEAM = 1, 2
"""Two sources: the shards' selector, a team namespace's watch."""


def _pod(rv: int, shard: str = "0") -> dict[str, Any]:
    doc = gpu_pod("p")
    doc["metadata"] |= {"resourceVersion": str(rv), "labels": {"provisioner.sh/shard": shard}}
    return doc


def test_an_object_two_sources_hold_stays_until_both_let_it_go() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.upsert(kc.POD, _pod(5), source=SHARDS)
    feeder.upsert(kc.POD, _pod(5), source=TEAM)
    feeder.remove(kc.POD, _pod(6, shard="1"), source=SHARDS)  # relabelled out of the shards' selector
    assert "default/p" in state.pods, "the team namespace's watch still has it"
    feeder.upsert(kc.POD, _pod(6, shard="1"), source=TEAM)
    assert state.pods["default/p"].labels["provisioner.sh/shard"] == "1"
    feeder.remove(kc.POD, _pod(7, shard="1"), source=TEAM)  # deleted
    assert "default/p" not in state.pods


@pytest.mark.parametrize("delete_first", [True, False], ids=["DELETED-first", "ADDED-first"])
def test_an_object_moving_between_sources_is_kept_in_either_order_of_their_events(delete_first: bool) -> None:
    # Out of one source's selector and into another's at the same version: the DELETED of the one may
    # come before or after the ADDED of the other.
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.upsert(kc.POD, _pod(5), source=SHARDS)
    moved = _pod(6, shard="1")
    if delete_first:
        feeder.remove(kc.POD, moved, source=SHARDS)
    feeder.upsert(kc.POD, moved, source=TEAM)
    if not delete_first:
        feeder.remove(kc.POD, moved, source=SHARDS)
    assert "default/p" in state.pods
    assert state.pods["default/p"].labels["provisioner.sh/shard"] == "1"


def test_a_late_event_of_the_source_that_removed_an_object_does_not_revive_it() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.upsert(kc.POD, _pod(5), source=SHARDS)
    feeder.remove(kc.POD, _pod(6), source=SHARDS)
    feeder.upsert(kc.POD, _pod(6), source=SHARDS)  # a replay of the same version
    feeder.upsert(kc.POD, _pod(6))  # the answer to our own write, late
    assert "default/p" not in state.pods


def test_a_relist_drops_only_what_its_own_source_held() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    a, b = _pod(5), _pod(6)
    b["metadata"]["name"] = "q"
    feeder.upsert(kc.POD, a, source=SHARDS)
    feeder.upsert(kc.POD, b, source=TEAM)
    feeder.replace_all(kc.POD, [], source=SHARDS)
    assert set(state.pods) == {"default/q"}, "the team watch's pod is not the shards' relist's to drop"
    feeder.replace_all(kc.POD, [], source=TEAM)
    assert not state.pods


def test_a_retired_source_takes_what_only_it_held_and_is_ignored_after() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    shared, own = _pod(5), _pod(6)
    own["metadata"]["name"] = "q"
    feeder.upsert(kc.POD, shared, source=SHARDS)
    feeder.upsert(kc.POD, shared, source=TEAM)
    feeder.upsert(kc.POD, own, source=TEAM)
    feeder.retire(kc.POD, TEAM)
    assert set(state.pods) == {"default/p"}
    late = _pod(9)
    late["metadata"]["name"] = "r"
    feeder.upsert(kc.POD, late, source=TEAM)  # its thread was finishing a list
    assert set(state.pods) == {"default/p"}


def test_a_relist_keeps_what_was_written_after_the_list_was_taken() -> None:
    # A claim this replica created while its claims were being listed again (a shard won): the list
    # does not hold it, and the watch from the list's version brings it; dropping it meanwhile would
    # let the next solve launch its pods again.
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.upsert(kc.POD, _pod(12))  # the answer to our own write
    feeder.replace_all(kc.POD, [], source=SHARDS, version="10")
    assert "default/p" in state.pods
    feeder.replace_all(kc.POD, [], source=SHARDS, version="12")
    assert "default/p" not in state.pods, "listed at or after its version and not in the list: gone"


@pytest.mark.parametrize("gone", [False, True], ids=["relabelled", "deleted"])
def test_an_object_out_of_a_selector_stays_until_the_watch_of_its_whole_namespace_says(gone: bool) -> None:
    # The admission holder watches pods labelled for no shard and a team's namespace whole. A pod it
    # admitted and relabelled leaves the first before the namespace's watch (lagging) has sent it: it
    # must not be missing meanwhile, or quota gives its room away again.
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.watches_whole(TEAM, "default")
    feeder.upsert(kc.POD, _pod(5), source=SHARDS)
    feeder.remove(kc.POD, _pod(6, shard="1"), source=SHARDS)
    assert "default/p" in state.pods, "its namespace's watch has not spoken yet"
    feeder.upsert(kc.POD, _pod(5), source=TEAM)  # the lagging watch catches up
    if gone:
        feeder.remove(kc.POD, _pod(7, shard="1"), source=TEAM)
        assert "default/p" not in state.pods, "deleted: its namespace's watch lets it go"
    else:
        feeder.upsert(kc.POD, _pod(6, shard="1"), source=TEAM)
        assert state.pods["default/p"].labels["provisioner.sh/shard"] == "1"
    other = gpu_pod("q", namespace="web")
    other["metadata"]["resourceVersion"] = "8"
    feeder.upsert(kc.POD, other, source=SHARDS)
    feeder.remove(kc.POD, other, source=SHARDS)
    assert "web/q" not in state.pods, "a namespace no source watches whole: gone with its last source"
    feeder.retire(kc.POD, TEAM)
    feeder.upsert(kc.POD, _pod(9), source=SHARDS)
    feeder.remove(kc.POD, _pod(10, shard="1"), source=SHARDS)
    assert "default/p" not in state.pods, "its namespace no longer watched: gone with its last source"


@pytest.mark.parametrize("how", ["DELETED", "relist"])
def test_an_object_its_whole_namespaces_watch_let_go_first_is_gone_when_the_other_source_follows(
    how: str,
) -> None:
    # The admission holder holds a team's pod through its shard's selector and its namespace's watch.
    # A user deletes it: the namespace's watch may send its word first. The selector's DELETED that
    # follows must not leave it held for a word the namespace's watch has already sent (a pod left in
    # the state, a node whose drain waits on it forever).
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.watches_whole(TEAM, "default")
    feeder.upsert(kc.POD, _pod(5), source=SHARDS)
    feeder.upsert(kc.POD, _pod(5), source=TEAM)
    if how == "DELETED":
        feeder.remove(kc.POD, _pod(7), source=TEAM)
    else:
        feeder.replace_all(kc.POD, [], source=TEAM, version="7")
    feeder.remove(kc.POD, _pod(7), source=SHARDS)
    assert "default/p" not in state.pods
    feeder.upsert(kc.POD, _pod(6), source=SHARDS)  # a late event of the selector's watch
    assert "default/p" not in state.pods
    feeder.upsert(kc.POD, _pod(9), source=SHARDS)  # a new pod of the same name
    feeder.upsert(kc.POD, _pod(9), source=TEAM)
    feeder.remove(kc.POD, _pod(10), source=SHARDS)
    assert "default/p" in state.pods, "its namespace's watch has not let the new one go"
    feeder.remove(kc.POD, _pod(10), source=TEAM)
    assert "default/p" not in state.pods


def test_a_late_deleted_of_its_whole_namespaces_watch_leaves_a_newer_object_of_the_same_name() -> None:
    state = ClusterState()
    feeder = StateFeeder(state)
    feeder.watches_whole(TEAM, "default")
    feeder.upsert(kc.POD, _pod(5), source=TEAM)
    feeder.upsert(kc.POD, _pod(9), source=SHARDS)  # deleted and made again: the selector's watch is ahead
    feeder.remove(kc.POD, _pod(7), source=TEAM)  # the namespace's watch: the first one's deletion
    assert state.pods["default/p"].raw["metadata"]["resourceVersion"] == "9"
