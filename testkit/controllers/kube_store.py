"""The strict API server's objects and open watches (testkit/controllers/kube_server.py serves them over
HTTP): the current version of each object, indexed by resource and then by (namespace, name), a bounded
history of each resource's events (what a watch from a resourceVersion replays), and each open watch
with what it has sent.

Made for 100,000 pods: a get, create, patch or delete is a key lookup; an event is queued once per open
watch of its resource, and the selector test is the only per-watch work; each stored version is encoded
to JSON once, and an event line once per event type, however many responses, lists and watches carry it.
This holds because a stored object is never changed in place: every write stores a new dict (`put`), so
a version, its encoding and the events that carry it stay what they were when written.

Only lists and a watch's first events read every object of one resource (as a real server's cache does);
a watch from a resourceVersion reads only the history after it.

The history is kube-apiserver's watch cache window (k8s.io/apiserver storage/cacher): a real server serves
a watch from a resourceVersion out of it and answers 410 for a version older than it holds. It keeps each
resource's events of the last 75 s (`eventFreshDuration`: the 60 s bookmark frequency plus 15 s), at
least 100 and at most 102,400 (its ring's lower and upper bound); etcd's compaction (every 5 minutes)
matters only to requests that bypass the cache. Here exactly that and no more: a client that resumes
within it here resumes within it on a real server.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Key = tuple[str | None, str]
"""(namespace, name) of an object; namespace None for a cluster-scoped one."""
Matcher = Callable[[Mapping[str, Any]], bool]

FRESH_SECONDS = 75.0
"""How long kube-apiserver's watch cache keeps an event (`eventFreshDuration`)..."""
LEAST_EVENTS = 100
"""...however old, the newest this many of each resource (its ring's lower bound)..."""
MOST_EVENTS = 100 * 1024
"""...and never more than this many (its upper bound)."""


def encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class Version:
    """One stored version of an object and its JSON, encoded on first use (never changed in place)."""

    __slots__ = ("_json", "obj")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self._json: bytes | None = None

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = encode(self.obj)
        return self._json

    @property
    def key(self) -> Key:
        meta = self.obj["metadata"]
        return meta.get("namespace"), meta["name"]


def version_of(obj: Mapping[str, Any]) -> int:
    """An object's metadata.resourceVersion as a number (0 when it has none)."""
    rv = obj["metadata"].get("resourceVersion")
    return int(rv) if rv else 0


class Event:
    """A watch event: a type, the version it carries (and its resourceVersion) and the version it
    replaced (None for a creation: a watch that began after it tells by it whether it had sent the
    object); its line (as each type a watch may send it as: a MODIFIED event reaches a watch whose
    selector it enters as ADDED, one it leaves as DELETED) is encoded once for all the watches that send
    it."""

    __slots__ = ("_lines", "at", "prev", "rv", "type", "version")

    def __init__(self, type_: str, version: Version, prev: Version | None = None) -> None:
        self.type = type_
        self.version = version
        self.prev = prev
        self.rv = version_of(version.obj)
        self.at = 0.0
        """When the store sent it (its clock), for the history's window."""
        self._lines: dict[str, bytes] = {}

    def line(self, type_: str) -> bytes:
        found = self._lines.get(type_)
        if found is None:
            found = self._lines[type_] = b'{"type":"%s","object":%s}\n' % (type_.encode(), self.version.json)
        return found


class Expired(Exception):
    """A watch from a resourceVersion whose later events the history no longer holds (410 Gone)."""

    def __init__(self, since: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {since} ({oldest})")


class Watch:
    """One open watch: its scope (namespace, name: None for any), its selectors, the objects it has sent
    and not yet deleted, and its queue of events not yet written.

    A watch that began with every object (`since` None) knows what it sent. One that began at a
    resourceVersion (its client holds that version's objects) learns it per object from the first event
    of the object it meets: the client holds the object if the version that event replaced matches."""

    def __init__(
        self, namespace: str | None, name: str | None, matches: Matcher, since: int | None = None
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.matches = matches
        self.sent: set[Key] = set()
        self.known: set[Key] | None = None if since is None else set()
        """Objects whose place in `sent` is known (None: every object's, the watch began with all)."""
        self.after = since or 0
        """Events at or before this resourceVersion are not sent (a watch from a version not reached)."""
        self.queue: collections.deque[Event] = collections.deque()
        self.ready = asyncio.Event()

    def offer(self, event: Event) -> None:
        self.queue.append(event)
        self.ready.set()

    def drain(self) -> list[Event]:
        events = list(self.queue)
        self.queue.clear()
        self.ready.clear()
        return events

    def line(self, event: Event) -> bytes | None:
        """What this watch sends for the event, if anything. As a real server filters a watch by its
        selectors: an object that starts matching comes as ADDED, one that stops as DELETED, and a
        DELETED is sent only for an object this watch has sent."""
        key = event.version.key
        if (self.namespace is not None and key[0] != self.namespace) or (
            self.name is not None and key[1] != self.name
        ):
            return None
        if self.known is not None and key not in self.known:
            if event.rv <= self.after:
                return None
            self.known.add(key)
            if event.prev is not None and self.matches(event.prev.obj):
                self.sent.add(key)
        if event.type == "DELETED":
            if key in self.sent:
                self.sent.discard(key)
                return event.line("DELETED")
            return None
        if self.matches(event.version.obj):
            line = event.line(event.type if key in self.sent else "ADDED")
            self.sent.add(key)
            return line
        if key in self.sent:
            self.sent.discard(key)
            return event.line("DELETED")
        return None


class Store:
    """Objects by resource (its plural) and key, in the order they were created; each resource's events of
    the last `fresh` seconds (at least `least` of them, at most `history`), in resourceVersion order; open
    watches by resource."""

    def __init__(
        self,
        history: int = MOST_EVENTS,
        *,
        fresh: float = FRESH_SECONDS,
        least: int = LEAST_EVENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._objects: dict[str, dict[Key, Version]] = collections.defaultdict(dict)
        self._watches: dict[str, set[Watch]] = collections.defaultdict(set)
        self.history = history
        """At most how many events of each resource are kept for watches from a resourceVersion..."""
        self.fresh = fresh
        """...those of the last this many seconds..."""
        self.least = least
        """...and however old, the newest this many (or `history`, if fewer)."""
        self._clock = clock
        self._history: dict[str, collections.deque[Event]] = collections.defaultdict(collections.deque)
        self._dropped: dict[str, int] = {}
        """The resourceVersion of each resource's newest event dropped from its history."""

    def get(self, plural: str, namespace: str | None, name: str) -> Version | None:
        return self._objects[plural].get((namespace, name))

    def items(self, plural: str, namespace: str | None = None) -> Iterator[Version]:
        """Every object of the resource (in one namespace, when given)."""
        held = self._objects[plural].values()
        if namespace is None:
            return iter(list(held))
        return (v for v in list(held) if v.key[0] == namespace)

    def count(self, plural: str) -> int:
        return len(self._objects[plural])

    def put(self, plural: str, obj: dict[str, Any], type_: str) -> Version:
        """Store a new version (never change `obj` afterwards) and send it to the resource's watches as
        `type_` (ADDED or MODIFIED)."""
        version = Version(obj)
        held, key = self._objects[plural], version.key
        prev = held.get(key)
        held[key] = version
        self._send(plural, Event(type_, version, prev))
        return version

    def remove(self, plural: str, obj: dict[str, Any]) -> Version:
        """Forget the object and send DELETED with this last version of it."""
        version = Version(obj)
        prev = self._objects[plural].pop(version.key, None)
        self._send(plural, Event("DELETED", version, prev))
        return version

    def _send(self, plural: str, event: Event) -> None:
        history = self._history[plural]
        event.at = now = self._clock()
        history.append(event)
        stale = now - self.fresh
        while len(history) > self.history or (len(history) > self.least and history[0].at < stale):
            self._dropped[plural] = history.popleft().rv
        for watch in self._watches.get(plural, ()):
            watch.offer(event)

    def watch(
        self, plural: str, namespace: str | None, name: str | None, matches: Matcher, since: int | None = None
    ) -> tuple[Watch, list[Event]]:
        """Open a watch and hand back its first events, taken in one step, so no write falls between the
        two: with `since` None, ADDED for every object in its scope now; else the events after that
        resourceVersion (`Expired` when the history no longer holds them all)."""
        if since is not None:
            dropped = self._dropped.get(plural, 0)
            if since < dropped:
                raise Expired(since, dropped + 1)
            history = self._history[plural]
            start = len(history)
            while start and history[start - 1].rv > since:
                start -= 1
            watch = Watch(namespace, name, matches, since)
            self._watches[plural].add(watch)
            return watch, list(itertools.islice(history, start, None))
        watch = Watch(namespace, name, matches)
        self._watches[plural].add(watch)
        held = self._objects[plural]
        if name is not None:
            found = held.get((namespace, name)) if namespace is not None else None
            versions = [found] if found else [v for k, v in held.items() if k[1] == name]
        else:
            versions = list(self.items(plural, namespace))
        return watch, [Event("ADDED", v) for v in versions]

    def unwatch(self, plural: str, watch: Watch) -> None:
        self._watches[plural].discard(watch)

    def watching(self, plural: str) -> int:
        """How many watches of the resource are open."""
        return len(self._watches.get(plural, ()))
