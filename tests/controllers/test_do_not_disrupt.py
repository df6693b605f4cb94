"""`provisioner.sh/do-not-disrupt` with a duration during a drain: it holds the eviction until the
duration has passed since the pod started, then the pod is evicted like any other."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from provisioner.api import labels as wk
from testkit.controllers.world import World, gpu_pod, node_class, node_pool


def test_a_do_not_disrupt_duration_holds_a_drain_only_until_it_lapses(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("pinned", annotations={wk.DO_NOT_DISRUPT: "30m"}))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    started = w.state.pods["default/pinned"].started
    assert started is not None
    w.backend.delete("NodeClaim", claim.name)
    w.run_until(lambda: w.clock.now() - started >= timedelta(minutes=25), max_ticks=40, seconds=60)
    assert claim.name in w.state.claims and "default/pinned" in w.state.pods, "still protected"
    (blocked,) = [e for e in w.events("DrainBlocked") if e["involvedObject"]["name"] == claim.name]
    assert wk.DO_NOT_DISRUPT in blocked["message"]
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10, seconds=60)
    assert w.clock.now() - started >= timedelta(minutes=30)
    assert w.metric("provisioner_evictions_total", result="evicted") == 1
