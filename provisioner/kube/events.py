"""Events as client-go's recorder writes them: an Event the same as one recorded before (same involved
object, reason, type, message and source) is not written again but counted on the first, by a PATCH of
its `count` and `lastTimestamp` (client-go's `EventCorrelator`, its `EventLogger` part: an LRU of the
last 4,096 Events seen). If that Event is gone (expired, deleted) it is created again with the count.

Only the same Event is correlated: client-go's aggregation of similar ones (ten with other messages
become one "combined from similar events") and its per-object spam filter are not done, so every
message a controller writes is kept, and a pod's `Nominated` stays one Event per pod.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

from provisioner.clusterapi.port import ClusterError, NotFoundError
from provisioner.kube import client as kc

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
"""Events remembered for correlation (client-go's `maxLruCacheEntries`)."""


class Recorded(NamedTuple):
    """An Event to write: its `count` above 1 means the same Event exists under `body`'s name."""

    namespace: str
    body: dict[str, Any]

    @property
    def times(self) -> int:
        """The Event's `count`: how many times it was recorded."""
        return int(self.body["count"])


class EventCorrelator:
    """Remembers the Events recorded (see the module) and says, of each new one, whether it repeats
    one of them. Thread-safe: controllers record from several threads."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._seen: OrderedDict[tuple[str, ...], tuple[str, int, str]] = OrderedDict()
        """Event key -> (the Event's name, its count, its firstTimestamp)."""
        self._lock = threading.Lock()

    def observe(self, namespace: str, body: Mapping[str, Any]) -> Recorded:
        """`body` (a new Event, count 1) as it is to be written: itself, or, when the same Event was
        recorded before, that Event's name and first time with the count that follows."""
        involved = body["involvedObject"]
        source = body.get("source") or {}
        key = (
            namespace,
            str(source.get("component", "")),
            str(source.get("host", "")),
            str(involved.get("kind", "")),
            str(involved.get("namespace", "")),
            str(involved.get("name", "")),
            str(involved.get("uid", "")),
            str(involved.get("apiVersion", "")),
            str(involved.get("fieldPath", "")),
            str(body.get("type", "")),
            str(body["reason"]),
            str(body["message"]),
        )
        with self._lock:
            seen = self._seen.pop(key, None)
            if seen is None:
                name, count, first = body["metadata"]["name"], 1, body["firstTimestamp"]
            else:
                name, count, first = seen[0], seen[1] + 1, seen[2]
            self._seen[key] = (name, count, first)
            if len(self._seen) > self.size:
                self._seen.popitem(last=False)
        if seen is None:
            return Recorded(namespace, dict(body))
        again = {
            **body,
            "metadata": {**body["metadata"], "name": name},
            "firstTimestamp": first,
            "count": count,
        }
        return Recorded(namespace, again)


def write(client: kc.KubeClient, event: Recorded) -> None:
    """Create the Event, or count a repeat on the one it repeats (created again if that one is gone).
    A failure is logged, not raised: an Event is a note, not state."""
    body = event.body
    try:
        if event.times > 1:
            try:
                patch = {"count": event.times, "lastTimestamp": body["lastTimestamp"]}
                client.patch(kc.EVENT, body["metadata"]["name"], patch, namespace=event.namespace)
                return
            except NotFoundError:
                pass
        client.create(kc.EVENT, body, namespace=event.namespace)
    except ClusterError as err:
        involved = body["involvedObject"]
        log.warning(
            "could not record event %s on %s/%s: %s", body["reason"], involved["kind"], involved["name"], err
        )


__all__ = ["CACHE_SIZE", "EventCorrelator", "Recorded", "write"]
