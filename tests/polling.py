"""Waiting on work that happens in other threads or processes (watches, a controller process).

The limit only keeps a broken run from hanging; no test asserts on how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    what: str,
    done: Callable[[], bool],
    *,
    step: Callable[[], object] = lambda: None,
    limit: float = 60.0,
    interval: float = 0.05,
) -> None:
    """Call `step` then `done` until `done` is true; fail naming `what` if it never is."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        step()
        if done():
            return
        time.sleep(interval)
    raise AssertionError(f"gave up waiting for {what}")


def in_turn(*steps: Callable[[], object]) -> Callable[[], None]:
    """One `step` for wait_until that calls each of `steps` in order."""

    def step() -> None:
        for s in steps:
            s()

    return step
