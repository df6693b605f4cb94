"""The strict API server's objects and open watches (testkit/controllers/kube_server.py serves them over
HTTP): the current version of each object, indexed by resource and then by (namespace, name), and each
open watch with what it has sent.

Made for 100,000 pods: a get, create, patch or delete is a key lookup; an event is queued once per open
watch of its resource, and the selector test is the only per-watch work; each stored version is encoded
to JSON once, and an event line once per event type, however many responses, lists and watches carry it.
This holds because a stored object is never changed in place: every write stores a new dict (`put`), so
a version, its encoding and the events that carry it stay what they were when written.

Only lists and a watch's first events read every object of one resource (as a real server's cache does).
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Key = tuple[str | None, str]
"""(namespace, name) of an object; namespace None for a cluster-scoped one."""
Matcher = Callable[[Mapping[str, Any]], bool]


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


class Event:
    """A watch event: a type and the version it carries; its line (as each type a watch may send it as:
    a MODIFIED event reaches a watch whose selector it enters as ADDED, one it leaves as DELETED) is
    encoded once for all the watches that send it."""

    __slots__ = ("_lines", "type", "version")

    def __init__(self, type_: str, version: Version) -> None:
        self.type = type_
        self.version = version
        self._lines: dict[str, bytes] = {}

    def line(self, type_: str) -> bytes:
        found = self._lines.get(type_)
        if found is None:
            found = self._lines[type_] = b'{"type":"%s","object":%s}\n' % (type_.encode(), self.version.json)
        return found


class Watch:
    """One open watch: its scope (namespace, name: None for any), its selectors, the objects it has sent
    and not yet deleted, and its queue of events not yet written."""

    def __init__(self, namespace: str | None, name: str | None, matches: Matcher) -> None:
        self.namespace = namespace
        self.name = name
        self.matches = matches
        self.sent: set[Key] = set()
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
    """Objects by resource (its plural) and key, in the order they were created; open watches by
    resource."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[Key, Version]] = collections.defaultdict(dict)
        self._watches: dict[str, set[Watch]] = collections.defaultdict(set)

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
        self._objects[plural][version.key] = version
        self._send(plural, Event(type_, version))
        return version

    def remove(self, plural: str, obj: dict[str, Any]) -> Version:
        """Forget the object and send DELETED with this last version of it."""
        version = Version(obj)
        self._objects[plural].pop(version.key, None)
        self._send(plural, Event("DELETED", version))
        return version

    def _send(self, plural: str, event: Event) -> None:
        for watch in self._watches.get(plural, ()):
            watch.offer(event)

    def watch(
        self, plural: str, namespace: str | None, name: str | None, matches: Matcher
    ) -> tuple[Watch, list[Event]]:
        """Open a watch and hand back its first events (ADDED for every object in its scope now): taken in
        one step, so no write falls between the two."""
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
