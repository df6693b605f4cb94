"""The strict API server's request deadlines, as kube-apiserver applies them, and requests a test holds
at the server.

kube-apiserver bounds every request that is not a watch by the `timeout` query parameter (a Go duration,
"4500ms", "1m30s"; capped by its `--request-timeout`, 60 s by default): the request's context ends at
that deadline, counted from its arrival, and a write not stored by then is abandoned and answered
504 Timeout (k8s.io/apiserver, `filters.WithRequestDeadline`). A malformed `timeout` is answered 400.

`Hold` is test-only: a request delayed at the server (as a real one is by a slow etcd, priority and
fairness queues or a long GC pause) until the test releases it, so a test can land a write just after
some other event, the way a request in flight does.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Mapping

import attrs
import kmock

MAX_TIMEOUT = 60.0
"""kube-apiserver's default `--request-timeout`: the longest deadline a request gets."""

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def request_timeout(value: str | None) -> float:
    """The seconds a request may take: its `timeout` parameter (a Go duration), at most MAX_TIMEOUT."""
    if value is None:
        return MAX_TIMEOUT
    pos, seconds = 0, 0.0
    while pos < len(value):
        part = _PART.match(value, pos)
        if part is None:
            break
        seconds += float(part.group(1)) * _UNITS[part.group(2)]
        pos = part.end()
    if not value or pos != len(value):
        raise kmock.KubernetesError(
            status=400,
            reason="BadRequest",
            message=f'invalid timeout specified in the request URL: "{value}" (a duration such as "5s")',
        )
    return min(seconds, MAX_TIMEOUT)


def timed_out(seconds: float) -> kmock.KubernetesError:
    """What kube-apiserver answers a request whose deadline passed before it was served."""
    return kmock.KubernetesError(
        status=504,
        reason="Timeout",
        message=f"request did not complete within the requested timeout ({seconds:g}s)",
    )


@attrs.define(eq=False)
class Hold:
    """One request held at the server (test-only; `FilledEmulator.hold`): `arrived` is set once it is
    there, and it is served when `release()` is called, if its deadline has not passed by then."""

    arrived: threading.Event = attrs.field(factory=threading.Event)
    released: threading.Event = attrs.field(factory=threading.Event)
    enforced: bool = True
    """False: served when released even past its deadline (a delay no real server allows)."""
    status: int | None = None
    """What the server answered it (once served)."""
    answered: threading.Event = attrs.field(factory=threading.Event)

    def release(self) -> None:
        self.released.set()

    async def until_released(self, params: Mapping[str, str], clock: Callable[[], float]) -> None:
        """At the server: wait for `release`; 504 when the request's deadline (`params`' `timeout`,
        from now on `clock`) passed meanwhile and this hold is `enforced`."""
        arrived = clock()
        timeout = request_timeout(params.get("timeout"))
        self.arrived.set()
        while not self.released.is_set():
            await asyncio.sleep(0.01)
        if self.enforced and clock() - arrived > timeout:
            raise timed_out(timeout)

    def wait_arrived(self, timeout: float = 60.0) -> None:
        if not self.arrived.wait(timeout):
            raise AssertionError(f"the held request did not reach the server within {timeout} s")

    def wait_answered(self, timeout: float = 60.0) -> int:
        if not self.answered.wait(timeout):
            raise AssertionError(f"the held request was not answered within {timeout} s of its release")
        assert self.status is not None
        return self.status
