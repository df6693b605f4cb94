"""Crash points: named places between an API write and a cloud call where the chaos campaign
(bench/chaos.py) kills the controller with SIGKILL, to prove a restart neither leaks nor launches twice.

Off unless armed: `provisioner run` reads `PROVISIONER_CRASH_AT=POINT:N` once at start-up and calls
`arm()`; every `reached(POINT)` then counts, and the N-th time POINT is reached the process kills itself
(SIGKILL: no finally block, no lease release, exactly a lost node). Unarmed, `reached` is one global
read. Only the I/O layer calls it (provisioner.kube.api, the provider wrappers, the run command, the
disruption controller and the ledger recorder), never the pure rooms.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "PROVISIONER_CRASH_AT"

POINTS = (
    "claim-written",  # a NodeClaim was created, nothing launched for it yet
    "launch-called",  # the cloud launched an instance, its claim's status does not say so yet
    "status-written",  # a NodeClaim status patch landed
    "node-registering",  # the fake cloud launched an instance, its kubelet has not registered the Node
    "node-registered",  # the fake cloud's kubelet registered the Node, the launch has not returned
    "node-patched",  # labels, taints or cordon written on a Node
    "drain-started",  # a pod was evicted from a node being terminated
    "instance-deleted",  # the cloud terminated an instance, its claim still holds the finalizer
    "claim-deleted",  # a NodeClaim deletion was requested (garbage collection, disruption)
    "finalizer-removed",  # the termination finalizer is off; the claim is gone
    "node-deleted",  # a Node was deleted
    "ledger-pending",  # disruption deleted its claims, their ledger rows are not handed to the recorder
    "ledger-written",  # action rows committed to the ledger, the claims they ride on not yet gone
)
"""Every point a spec may name."""

_target: tuple[str, int] | None = None
_counts: dict[str, int] = {}
_lock = threading.Lock()


def parse(spec: str) -> tuple[str, int]:
    """`POINT:N` (N >= 1, default 1) -> (POINT, N); ValueError naming what is allowed."""
    point, _, count = spec.partition(":")
    if point not in POINTS:
        raise ValueError(f"{ENV}: unknown crash point {point!r}; allowed: {', '.join(POINTS)}")
    try:
        n = int(count or "1")
    except ValueError:
        raise ValueError(f"{ENV}: {spec!r}: the count after ':' must be an integer >= 1") from None
    if n < 1:
        raise ValueError(f"{ENV}: {spec!r}: the count after ':' must be an integer >= 1")
    return point, n


def arm(spec: str | None) -> None:
    """Arm (a spec) or disarm (None or empty). Called once, at start-up."""
    global _target
    with _lock:
        _counts.clear()
        _target = parse(spec) if spec else None


def reached(point: str) -> None:
    """Count one pass through `point`; SIGKILL this process when it is the armed one's N-th."""
    if _target is None:
        return
    with _lock:
        _counts[point] = _counts.get(point, 0) + 1
        if (point, _counts[point]) != _target:
            return
    os.kill(os.getpid(), signal.SIGKILL)
