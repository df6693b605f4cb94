"""The lifecycle controller runs its steps (liveness, launch, registration, initialization) per claim on
the claim of the pass's snapshot: a claim moves at most one step per pass, in order, whatever an earlier
step wrote during the pass."""

from __future__ import annotations

from typing import Any

from provisioner.api.nodeclaim import INITIALIZED, LAUNCHED, REGISTERED
from provisioner.controllers.conditions import condition_status
from testkit.controllers.world import gpu_pod, node_class, node_pool

STEPS = (LAUNCHED, REGISTERED, INITIALIZED)


def _done(w: Any) -> tuple[str, ...]:
    """The steps the one claim has completed, in order."""
    claims = w.claims()
    if not claims:
        return ()
    return tuple(s for s in STEPS if condition_status(claims[0], s) == "True")


def test_a_claim_moves_one_lifecycle_step_per_pass_in_order(make_world: Any) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    seen = [_done(w)]
    for _ in range(30):
        w.tick()
        seen.append(_done(w))
        if seen[-1] == STEPS:
            break
    assert seen[-1] == STEPS, seen
    progress = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert progress == [(), STEPS[:1], STEPS[:2], STEPS], "one step per pass, never two"


def test_the_steps_run_in_karpenters_order_with_liveness_first(make_world: Any) -> None:
    w = make_world()
    names = [type(step).__name__ for step in w.manager.lifecycle.steps]
    assert names == ["Liveness", "Launch", "Registration", "Initialization"]
