"""Informers: list, then watch from the list's resourceVersion, feeding ClusterState. A watch the server
ends (its timeoutSeconds, or the server's own request timeout) is started again from the last
resourceVersion seen, of an event or a BOOKMARK, with no list: the server sends only what changed since.
When that version is too old (410 Gone: compacted away), list again. Back off on errors. One daemon
thread per resource.

`StateFeeder` is the single door into ClusterState for this process: informer events and the answers to
our own writes (KubeClusterAPI feeds the object the server returned, so a controller never acts twice on
a stale view) both pass through it, and an object not newer than the one held (by resourceVersion) is
dropped, so a late watch event cannot roll the state back, nor the echo of our own write parse it again.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.kube.client import WATCHED, ApiError, Gone, KubeClient, Resource
from provisioner.state import ClusterState

log = logging.getLogger(__name__)


def _rv(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def object_key(res: Resource, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    if res.namespaced:
        return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    return str(meta.get("name"))


class StateFeeder:
    """Applies objects to ClusterState, newest resourceVersion wins.

    Several informers may feed one kind (a sharded replica watches pods through several scopes: its
    shards' label selector, a namespace of a team): each is a `source`, and the state holds an object
    while some source holds it. A source's DELETED (the object gone, or out of that source's selector)
    or relist drops only its own hold; the object leaves the state when no source holds it any more, and
    no source watching its namespace whole (`watches_whole`) is still to send its own word on it. The word
    of a source watching the namespace whole (its DELETED, or a relist without the object) is final: the
    object is gone, whichever other source still holds it, in whatever order their events come."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._versions: dict[tuple[str, str], int] = {}
        self._tombstones: dict[tuple[str, str], tuple[int, int | None]] = {}
        """Removed objects: the version removed at, and the source whose DELETED removed it."""
        self._holders: dict[tuple[str, str], frozenset[int]] = {}
        """The sources holding each object fed by a source (objects only written here have none)."""
        self._sets: dict[frozenset[int], frozenset[int]] = {}
        """One frozenset per combination of sources, shared by every object it holds."""
        self._retired: set[int] = set()
        """Sources stopped for good (`retire`): what they still send is ignored."""
        self._whole: dict[int, str] = {}
        """Sources that watch one namespace whole (no selector): source -> namespace."""
        self._lock = threading.Lock()

    def watches_whole(self, source: int, namespace: str | None) -> None:
        """Say that `source` watches every object of `namespace` (None: it does not, or no longer). An
        object of that namespace that leaves another source's selector stays in the state until this
        source lets it go: its watch may lag behind the other's, and the object (still there) would
        otherwise be missing meanwhile, as an admitted pod whose room quota then gives away again."""
        with self._lock:
            if namespace is None:
                self._whole.pop(source, None)
            else:
                self._whole[source] = namespace

    def _says_gone(self, res: Resource, key: str, source: int | None) -> bool:
        """Whether `source` watches the namespace of the object `key` whole: with no selector to fall
        out of, its DELETED (or a relist without the object) means the object is gone, for every source."""
        if source is None or not res.namespaced or source not in self._whole:
            return False
        return key.partition("/")[0] == self._whole[source]

    def _covering(self, res: Resource, obj: Mapping[str, Any], source: int) -> frozenset[int]:
        """The live sources other than `source` that watch the object's namespace whole."""
        if not res.namespaced or not self._whole:
            return frozenset()
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        return frozenset(
            s for s, ns in self._whole.items() if ns == namespace and s != source and s not in self._retired
        )

    def _hold(self, ident: tuple[str, str], held_by: frozenset[int]) -> None:
        if held_by:
            self._holders[ident] = self._sets.setdefault(held_by, held_by)
        else:
            self._holders.pop(ident, None)

    def _release(self, ident: tuple[str, str], source: int | None) -> bool:
        """Drops `source`'s hold on an object; True when no source holds it any more."""
        held_by = self._holders.get(ident)
        if source is None or held_by is None:
            self._holders.pop(ident, None)  # removed by our own write: gone for every source
            return True
        rest = held_by - {source}
        self._hold(ident, rest)
        return not rest

    def _newer(
        self,
        res: Resource,
        key: str,
        obj: Mapping[str, Any],
        *,
        deleting: bool = False,
        listed: bool = False,
        source: int | None = None,
    ) -> bool:
        rv = _rv((obj.get("metadata") or {}).get("resourceVersion"))
        ident = (res.kind, key)
        if deleting:
            held = self._versions.get(ident)
            if self._says_gone(res, key, source) and (rv is None or held is None or rv >= held):
                self._holders.pop(ident, None)
            elif not self._release(ident, source):
                return False  # another source still has it (it moved from this one's selector to its)
            elif (dead := self._tombstones.get(ident)) is not None and rv is not None and rv <= dead[0]:
                return False  # removed already, by the watch of its whole namespace: nothing to wait for
            elif source is not None and (whole := self._covering(res, obj, source)):
                # Out of this source's selector, or gone: the watch of its whole namespace has it too
                # (its events may come later), and sends its deletion if it is gone.
                self._hold(ident, whole)
                return False
            # Remember the version we removed at, so a late replay of the same object cannot revive it.
            self._versions.pop(ident, None)
            dead = self._tombstones.get(ident)
            at = max(v for v in (rv, held, dead[0] if dead else None, 0) if v is not None)
            self._tombstones[ident] = (at, source)
            return True
        if rv is not None and (dead := self._tombstones.get(ident)) is not None:
            # A list may hold an object at the very version it was removed at: a watch with a label
            # selector removes an object that stops matching at the version of that change (it is not
            # gone), and a list with a wider selector brings it back as it is; so may another source's
            # watch, whose selector it started matching at that version.
            if rv < dead[0] or (rv == dead[0] and not listed and (source is None or source == dead[1])):
                return False
            del self._tombstones[ident]
        if source is not None:
            held_by = self._holders.get(ident, frozenset())
            if source not in held_by:
                self._hold(ident, held_by | {source})
        if rv is None:
            return True  # opaque versions: trust arrival order
        held = self._versions.get(ident)
        if held is not None and rv <= held:
            # The same version is the same object: the watch event of our own write, whose answer was
            # fed already (a NodeClaim validated twice for each claim a batch writes), a relist, or
            # another source's event of the same change.
            return False
        self._versions[ident] = rv
        return True

    def upsert(
        self, res: Resource, obj: Mapping[str, Any], *, listed: bool = False, source: int | None = None
    ) -> None:
        """`listed`: from a list (see `_newer`), not a watch event or the answer to a write; `source`:
        the informer it came from (None: the answer to our own write)."""
        key = object_key(res, obj)
        with self._lock:
            if source in self._retired or not self._newer(res, key, obj, listed=listed, source=source):
                return
            try:
                self.state.upsert(res.kind, obj)
            except ValueError as err:
                # An object our models refuse (a hand-written NodePool with a typo) must not stop the
                # informer; the webhook-free API server accepted it, so say so and skip it.
                log.warning("ignoring invalid %s %s: %s", res.kind, key, err)

    def remove(self, res: Resource, obj: Mapping[str, Any], *, source: int | None = None) -> None:
        key = object_key(res, obj)
        with self._lock:
            if source in self._retired or not self._newer(res, key, obj, deleting=True, source=source):
                return
            self.state.remove(res.kind, key)

    def replace_all(
        self,
        res: Resource,
        items: Iterable[Mapping[str, Any]],
        *,
        source: int | None = None,
        version: str | None = None,
    ) -> None:
        """A relist: everything listed is upserted, everything `source` held (or no source holds) but
        not listed is dropped, unless the state holds it at a version newer than the list's (`version`:
        written after the list was taken, as our own claim just created; the watch from the list brings
        it, or its deletion)."""
        items = list(items)
        listed = {object_key(res, o) for o in items}
        at = _rv(version)
        with self._lock:
            if source in self._retired:
                return
            for key in self.state.keys_of(res.kind) - listed:
                ident = (res.kind, key)
                if at is not None and self._versions.get(ident, 0) > at:
                    continue
                if self._says_gone(res, key, source):
                    self._holders.pop(ident, None)
                    # Gone by this list's version: another source's late event cannot revive it.
                    held = self._versions.get(ident)
                    self._tombstones[ident] = (max(v for v in (at, held, 0) if v is not None), source)
                elif not self._release(ident, source):
                    continue
                self._versions.pop(ident, None)
                self.state.remove(res.kind, key)
        for obj in items:
            self.upsert(res, obj, listed=True, source=source)

    def retire(self, res: Resource, source: int) -> None:
        """A source stopped for good: the objects only it held leave the state, and what it still sends
        (its thread may be finishing a list) is ignored."""
        with self._lock:
            self._retired.add(source)
            self._whole.pop(source, None)
            for ident, held_by in list(self._holders.items()):
                if ident[0] == res.kind and source in held_by and self._release(ident, source):
                    self._versions.pop(ident, None)
                    self.state.remove(res.kind, ident[1])


class Informer(threading.Thread):
    """List then watch one resource until stopped: every object, or those a label selector matches (in
    every namespace, or in one).

    The selector may change while it runs (`rescope`: a sharded replica took or gave up shards): the
    watch under way is ended and the resource listed again with the new selector, which also drops from
    the state what it no longer matches. `halt` ends this informer alone (a scope no longer wanted)."""

    def __init__(
        self,
        client: KubeClient,
        res: Resource,
        feeder: StateFeeder,
        *,
        stop: threading.Event,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        selector: str | None = None,
        namespace: str | None = None,
        source: int = 0,
    ) -> None:
        where = f"-{namespace}" if namespace else ""
        super().__init__(name=f"informer-{res.plural}{where}", daemon=True)
        self.client = client
        self.res = res
        self.feeder = feeder
        self.stop = stop
        self.namespace = namespace
        self.source = source
        """This informer's id as a source of the feeder (several may feed one kind)."""
        self.halted = threading.Event()
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.synced = threading.Event()
        self.relists = 0
        """Lists taken: the first, then one per 410 Gone, rescope or failure that lost the position."""
        self.watches = 0
        """Watches opened (a watch the server ended is followed by another, from `resource_version`)."""
        self.events = 0
        """Watch events applied (ADDED, MODIFIED, DELETED): what a resumed watch replays shows here."""
        self.resource_version: str | None = None
        """The newest resourceVersion seen (a list's, an event's or a bookmark's): where a watch resumes."""
        self._scope = threading.Condition()
        self._wanted: str | None = selector
        """The label selector asked for (None: every object)."""
        self._listed: tuple[str | None] | None = None
        """The selector of the last list that fed the state (None: no list yet)."""
        self._end_watch: Callable[[], None] | None = None

    def rescope(self, selector: str | None, *, wait: float = 0.0) -> bool:
        """Watch the objects `selector` matches from now on (None: every object). True once the state
        holds what a list with it answered; waits up to `wait` seconds for that."""
        with self._scope:
            if selector != self._wanted:
                log.info("watching %s: %s", self.res.plural, selector or "all")
                self._wanted = selector
                end = self._end_watch
                if end is not None:
                    self._end_watch = None
                    try:
                        end()  # the informer's thread lists again when its watch ends
                    except Exception as err:  # a stream already closed
                        log.debug("ending the watch of %s: %s", self.res.plural, err)
            return self._scope.wait_for(lambda: self._listed == (self._wanted,), timeout=wait)

    @property
    def selector(self) -> str | None:
        """The label selector asked for (None: every object)."""
        with self._scope:
            return self._wanted

    def listed(self) -> bool:
        """Whether the state holds what a list with the wanted selector answered."""
        with self._scope:
            return self._listed == (self._wanted,)

    def wait_listed(self, wait: float) -> bool:
        """`listed`, waiting up to `wait` seconds for it."""
        with self._scope:
            return self._scope.wait_for(lambda: self._listed == (self._wanted,), timeout=wait)

    def halt(self) -> None:
        """End this informer: its watch is ended and its thread returns (the feeder is told apart)."""
        self.halted.set()
        with self._scope:
            end, self._end_watch = self._end_watch, None
        if end is not None:
            try:
                end()
            except Exception as err:  # a stream already closed
                log.debug("ending the watch of %s: %s", self.res.plural, err)

    def _ended(self) -> bool:
        return self.stop.is_set() or self.halted.is_set()

    def _rescoped(self) -> bool:
        with self._scope:
            return self._listed != (self._wanted,)

    def _opened(self, end: Callable[[], None]) -> None:
        self.watches += 1
        with self._scope:
            if self._listed == (self._wanted,) and not self.halted.is_set():
                self._end_watch = end
                return
        end()  # the selector changed while this watch opened

    def _relist(self) -> None:
        with self._scope:
            selector = self._wanted
        items, rv = self.client.list(self.res, label_selector=selector, namespace=self.namespace)
        self.feeder.replace_all(self.res, items, source=self.source, version=rv)
        self.resource_version = rv
        self.relists += 1
        with self._scope:
            self._listed = (selector,)
            self._scope.notify_all()
        self.synced.set()

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(410, str(obj.get("message") or "resourceVersion too old"))
            raise ApiError(int(code or 500), str(obj.get("message") or obj))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        if kind in ("ADDED", "MODIFIED"):
            self.events += 1
            self.feeder.upsert(self.res, obj, source=self.source)
        elif kind == "DELETED":
            self.events += 1
            self.feeder.remove(self.res, obj, source=self.source)
        if rv:
            self.resource_version = rv

    def run(self) -> None:
        backoff = 0.2
        need_list = True
        while not self._ended():
            try:
                if need_list or self._rescoped():
                    self._relist()
                    need_list = False
                for event in self.client.watch(
                    self.res,
                    resource_version=self.resource_version,
                    timeout_seconds=self.watch_timeout,
                    label_selector=self._listed[0] if self._listed else None,
                    namespace=self.namespace,
                    on_open=self._opened,
                ):
                    if self._ended() or self._rescoped():
                        break
                    self._apply(event)
                backoff = 0.2
            except Gone:
                log.info("watch of %s expired (410); relisting", self.res.plural)
                need_list = True
            except ApiError as err:
                if self._ended():
                    return
                if self._rescoped():
                    continue  # the watch was ended to list again with a new selector
                if err.status == 404:
                    # The CRD is not installed (yet): keep trying, slowly, without flooding the log.
                    log.debug("%s not served: %s", self.res.plural, err)
                else:
                    log.warning("watch of %s failed: %s; retrying in %.1fs", self.res.plural, err, backoff)
                self.stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
                # After an error the stream position is uncertain for servers without resourceVersion
                # support; a relist is cheap and always correct.
                need_list = need_list or self.resource_version in (None, "", "...")
            except Exception as err:  # a bug must not kill the informer silently
                if self._ended():
                    return  # a stream ended mid-line by `halt`
                if self._rescoped():
                    continue  # a stream ended mid-line to list again with a new selector
                log.exception("informer %s crashed: %s", self.res.plural, err)
                self.stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
                need_list = True


@dataclass(frozen=True, slots=True)
class Scope:
    """Where and what an extra informer of a resource watches (`Informers.scope`)."""

    namespace: str | None = None
    """One namespace's objects; None: every namespace's."""
    selector: str | None = None
    """A label selector; None: every object."""


class Informers:
    """The set of informers feeding one ClusterState: one per resource, and for a resource watched in
    parts (a sharded replica's pods) extra informers, one per `Scope`, feeding the same state."""

    def __init__(
        self,
        client: KubeClient,
        state: ClusterState,
        *,
        resources: Iterable[Resource] = WATCHED,
        watch_timeout: int = 300,
        selectors: Mapping[Resource, str] | None = None,
    ) -> None:
        """`selectors`: the label selector a resource's informer starts with (`Informer.rescope`
        changes it); the others watch every object."""
        self.client = client
        self.watch_timeout = watch_timeout
        self.stop_event = threading.Event()
        self.feeder = StateFeeder(state)
        self.informers = [
            Informer(
                client,
                res,
                self.feeder,
                stop=self.stop_event,
                watch_timeout=watch_timeout,
                selector=(selectors or {}).get(res),
                source=i,
            )
            for i, res in enumerate(resources)
        ]
        self._sources = itertools.count(len(self.informers))
        self._extra: dict[tuple[str, str], Informer] = {}
        self._started = False
        self._lock = threading.Lock()

    def of(self, res: Resource) -> Informer:
        """The informer of one resource."""
        return next(inf for inf in self.informers if inf.res == res)

    def scope(self, res: Resource, wanted: Mapping[str, Scope]) -> dict[str, Informer]:
        """Watch `res` through the scopes `wanted` (name -> scope) besides its own informer: an informer
        is started for a new scope, rescoped for a changed selector, and halted for a scope no longer
        wanted (the objects only it held leave the state). The informers of the wanted scopes (by name),
        whose `listed` says when the state holds their objects."""
        with self._lock:
            for (kind, name), inf in list(self._extra.items()):
                if kind != res.kind:
                    continue
                want = wanted.get(name)
                if want is None or want.namespace != inf.namespace:
                    log.info("no longer watching %s of %s", res.plural, name)
                    inf.halt()
                    self.feeder.retire(res, inf.source)
                    del self._extra[(kind, name)]
                else:
                    inf.rescope(want.selector)
            out: dict[str, Informer] = {}
            for name, want in wanted.items():
                found = self._extra.get((res.kind, name))
                if found is None:
                    log.info("watching %s of %s", res.plural, name)
                    found = self._extra[(res.kind, name)] = Informer(
                        self.client,
                        res,
                        self.feeder,
                        stop=self.stop_event,
                        watch_timeout=self.watch_timeout,
                        selector=want.selector,
                        namespace=want.namespace,
                        source=next(self._sources),
                    )
                    if self._started:
                        found.start()
                self.feeder.watches_whole(found.source, want.namespace if want.selector is None else None)
                out[name] = found
            return out

    def scopes(self, res: Resource) -> dict[str, Informer]:
        """The extra informers of `res` now (`scope`), by name."""
        with self._lock:
            return {name: inf for (kind, name), inf in self._extra.items() if kind == res.kind}

    def start(self) -> None:
        with self._lock:
            self._started = True
            for inf in [*self.informers, *self._extra.values()]:
                inf.start()

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """True when every informer finished its first list (CRDs not served count as synced never)."""
        import time

        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers)

    def stop(self) -> None:
        self.stop_event.set()
