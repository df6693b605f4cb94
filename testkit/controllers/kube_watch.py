"""How the strict API server (testkit/controllers/kube_server.py) serves a watch, as kube-apiserver serves
one (the Kubernetes API Concepts: "Efficient detection of changes", "Watch bookmarks", "Resource versions",
semantics for watch): what the query asks, and the stream of a watch the store opened.

- `resourceVersion` unset or "0": every object as ADDED, then the changes; an exact version: only the
  changes after it (the store answers `Expired` when its history no longer holds them all: 410 Gone, sent
  as an ERROR event with a Status, reason Expired).
- `timeoutSeconds`: the stream ends cleanly after it; unset or 0, after a random time between the
  server's minimum request timeout and twice it (kube-apiserver's --min-request-timeout, 1800 s).
- `allowWatchBookmarks=true`: BOOKMARK events, an object of the watched kind with only its
  resourceVersion set (the newest the server handed out), scheduled as kube-apiserver's watch cache
  schedules them: roughly every minute, and 2 s before the watch ends.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp.web
import kmock

from provisioner.kube import client as kc
from testkit.controllers.kube_store import Event, Watch, encode

CHUNK = 500
"""Watch events written in one go at most (a watch's first events may be every object of a resource)."""


@dataclass(frozen=True, slots=True)
class Timing:
    """The server's watch timers (seconds)."""

    min_request_timeout: float = 1800.0
    """A watch without `timeoutSeconds` ends after between this and twice this."""
    bookmark_every: float = 60.0
    """Between the bookmarks of a watch that allows them..."""
    bookmark_before_end: float = 2.0
    """...and how long before the watch ends its last one is sent."""


@dataclass(frozen=True, slots=True)
class Query:
    """What a watch request asks."""

    since: int | None
    """The resourceVersion it starts at (None: unset or "0", the current state first)."""
    timeout: float
    """Seconds until the server ends it."""
    bookmarks: bool


def query(params: Mapping[str, str], timing: Timing) -> Query:
    """The watch a request's query asks for (400 for a resourceVersion or timeoutSeconds that does not
    parse, as a real server answers)."""
    value = params.get("resourceVersion")
    since = None
    if value not in (None, "", "0"):
        if not str(value).isdigit():
            raise _bad(f"invalid resourceVersion {value!r}: not a number")
        since = int(str(value))
    raw = params.get("timeoutSeconds")
    try:
        seconds = 0 if raw is None else int(raw)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise _bad(f"timeoutSeconds {raw!r}: a whole number of seconds >= 0")
    minimum = timing.min_request_timeout
    timeout = float(seconds) if seconds else random.uniform(minimum, 2 * minimum)
    return Query(since, timeout, params.get("allowWatchBookmarks") == "true")


def gone(message: str) -> bytes:
    """The ERROR event of a watch from a resourceVersion too old (410 Gone, reason Expired)."""
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Expired",
        "code": 410,
    }
    return encode({"type": "ERROR", "object": status}) + b"\n"


def bookmark(res: kc.Resource, rv: int) -> bytes:
    """A BOOKMARK: an object of the watched kind with only its resourceVersion set."""
    obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": str(rv)}}
    return encode({"type": "BOOKMARK", "object": obj}) + b"\n"


def next_bookmark(now: float, deadline: float, timing: Timing) -> float | None:
    """When a watch sends its next bookmark: after `bookmark_every`, or `bookmark_before_end` before
    the watch ends if that is sooner; None once that time has passed."""
    at = min(now + timing.bookmark_every, deadline - timing.bookmark_before_end)
    return at if at >= now else None


async def stream(
    response: aiohttp.web.StreamResponse,
    watch: Watch,
    events: list[Event],
    *,
    res: kc.Resource,
    asked: Query,
    timing: Timing,
    newest: Callable[[], int],
) -> None:
    """Write the watch's first `events`, then each change the store offers it, with bookmarks when
    asked (`newest`: the newest resourceVersion), until the query's timeout; then end the stream.
    Raises ConnectionError when the client went away."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + asked.timeout
    bookmark_at = next_bookmark(loop.time(), deadline, timing) if asked.bookmarks else None
    timer: asyncio.TimerHandle | None = None
    try:
        while True:
            for start in range(0, len(events), CHUNK):
                lines = [watch.line(e) for e in events[start : start + CHUNK]]
                data = b"".join(line for line in lines if line)
                if data:
                    await response.write(data)
            now = loop.time()
            # A bookmark only when every event offered to this watch is written: its version then covers
            # all this watch was sent (the queue fills during the writes above).
            if bookmark_at is not None and now >= bookmark_at and not watch.queue:
                await response.write(bookmark(res, newest()))
                bookmark_at = next_bookmark(now, deadline, timing)
            if now >= deadline:
                break
            wake = deadline if bookmark_at is None else min(deadline, bookmark_at)
            if timer is None or timer.when() != wake:
                if timer is not None:
                    timer.cancel()
                timer = loop.call_at(wake, watch.ready.set)
            await watch.ready.wait()
            events = watch.drain()
    finally:
        if timer is not None:
            timer.cancel()
    await response.write_eof()


def _bad(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=400, reason="BadRequest", message=message)
