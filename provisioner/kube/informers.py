"""Informers: list, then watch from the list's resourceVersion, feeding ClusterState; relist on 410 Gone;
back off on errors. One daemon thread per resource.

`StateFeeder` is the single door into ClusterState for this process: informer events and the answers to
our own writes (KubeClusterAPI feeds the object the server returned, so a controller never acts twice on
a stale view) both pass through it, and an object not newer than the one held (by resourceVersion) is
dropped, so a late watch event cannot roll the state back, nor the echo of our own write parse it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
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
    """Applies objects to ClusterState, newest resourceVersion wins."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._versions: dict[tuple[str, str], int] = {}
        self._tombstones: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _newer(
        self, res: Resource, key: str, obj: Mapping[str, Any], *, deleting: bool = False, listed: bool = False
    ) -> bool:
        rv = _rv((obj.get("metadata") or {}).get("resourceVersion"))
        ident = (res.kind, key)
        if deleting:
            # Remember the version we removed at, so a late replay of the same object cannot revive it.
            held = self._versions.pop(ident, None)
            self._tombstones[ident] = max(
                v for v in (rv, held, self._tombstones.get(ident), 0) if v is not None
            )
            return True
        if rv is None:
            return True  # opaque versions: trust arrival order
        dead = self._tombstones.get(ident)
        if dead is not None:
            # A list may hold an object at the very version it was removed at: a watch with a label
            # selector removes an object that stops matching at the version of that change (it is not
            # gone), and a list with a wider selector brings it back as it is.
            if rv < dead or (rv == dead and not listed):
                return False
            del self._tombstones[ident]
        held = self._versions.get(ident)
        if held is not None and rv <= held:
            # The same version is the same object: the watch event of our own write, whose answer was
            # fed already (a NodeClaim validated twice for each claim a batch writes), or a relist.
            return False
        self._versions[ident] = rv
        return True

    def upsert(self, res: Resource, obj: Mapping[str, Any], *, listed: bool = False) -> None:
        """`listed`: from a list (see `_newer`), not a watch event or the answer to a write."""
        key = object_key(res, obj)
        with self._lock:
            if not self._newer(res, key, obj, listed=listed):
                return
            try:
                self.state.upsert(res.kind, obj)
            except ValueError as err:
                # An object our models refuse (a hand-written NodePool with a typo) must not stop the
                # informer; the webhook-free API server accepted it, so say so and skip it.
                log.warning("ignoring invalid %s %s: %s", res.kind, key, err)

    def remove(self, res: Resource, obj: Mapping[str, Any]) -> None:
        key = object_key(res, obj)
        with self._lock:
            if not self._newer(res, key, obj, deleting=True):
                return
            self.state.remove(res.kind, key)

    def replace_all(self, res: Resource, items: Iterable[Mapping[str, Any]]) -> None:
        """A relist: everything listed is upserted, everything held but not listed is removed."""
        items = list(items)
        listed = {object_key(res, o) for o in items}
        for key in self.state.keys_of(res.kind) - listed:
            with self._lock:
                self._versions.pop((res.kind, key), None)
                self.state.remove(res.kind, key)
        for obj in items:
            self.upsert(res, obj, listed=True)


class Informer(threading.Thread):
    """List then watch one resource until stopped: every object, or those a label selector matches.

    The selector may change while it runs (`rescope`: a sharded replica took or gave up shards): the
    watch under way is ended and the resource listed again with the new selector, which also drops from
    the state what it no longer matches."""

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
    ) -> None:
        super().__init__(name=f"informer-{res.plural}", daemon=True)
        self.client = client
        self.res = res
        self.feeder = feeder
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.synced = threading.Event()
        self.relists = 0
        self.resource_version: str | None = None
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

    def _rescoped(self) -> bool:
        with self._scope:
            return self._listed != (self._wanted,)

    def _opened(self, end: Callable[[], None]) -> None:
        with self._scope:
            if self._listed == (self._wanted,):
                self._end_watch = end
                return
        end()  # the selector changed while this watch opened

    def _relist(self) -> None:
        with self._scope:
            selector = self._wanted
        items, rv = self.client.list(self.res, label_selector=selector)
        self.feeder.replace_all(self.res, items)
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
            self.feeder.upsert(self.res, obj)
        elif kind == "DELETED":
            self.feeder.remove(self.res, obj)
        if rv:
            self.resource_version = rv

    def run(self) -> None:
        backoff = 0.2
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list or self._rescoped():
                    self._relist()
                    need_list = False
                for event in self.client.watch(
                    self.res,
                    resource_version=self.resource_version,
                    timeout_seconds=self.watch_timeout,
                    label_selector=self._listed[0] if self._listed else None,
                    on_open=self._opened,
                ):
                    if self.stop.is_set() or self._rescoped():
                        break
                    self._apply(event)
                backoff = 0.2
            except Gone:
                log.info("watch of %s expired (410); relisting", self.res.plural)
                need_list = True
            except ApiError as err:
                if self.stop.is_set():
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
                if self._rescoped() and not self.stop.is_set():
                    continue  # a stream ended mid-line to list again with a new selector
                log.exception("informer %s crashed: %s", self.res.plural, err)
                self.stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
                need_list = True


class Informers:
    """The set of informers feeding one ClusterState."""

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
            )
            for res in resources
        ]

    def of(self, res: Resource) -> Informer:
        """The informer of one resource."""
        return next(inf for inf in self.informers if inf.res == res)

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """True when every informer finished its first list (CRDs not served count as synced never)."""
        import time

        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers)

    def stop(self) -> None:
        self.stop_event.set()
