"""A Kubernetes API server for the controller tests: kmock's KubernetesEmulator, made strict where a real
server is (testkit/controllers/kube_rules.py and crd_schema.py say what it refuses and changes, from the
Kubernetes API documentation), served over real HTTP from a background thread with its own event loop.

Gaps filled (measured with kmock 0.8): resourceVersion (one counter, bumped on every write; a no-op
write bumps nothing and sends no event), uid, creationTimestamp, generateName, 201 on POST, the
namespaces a new cluster has (and 404 for objects in a namespace that does not exist), validation (422)
of names, labels, pods, nodes, workloads and Leases (400 for a MicroTime or number that does not
decode), custom objects admitted through their CRD schema (pruned,
defaulted, CEL rules), optimistic concurrency (a patch carrying a stale metadata.resourceVersion answers
409), `metadata.generation` and the status subresource (a patch to /status changes only status, one to
the object ignores status), graceful deletion (a bound pod stays Terminating until deleted again with
grace 0; finalizers hold any object, and none may be added once it is going), scheduling gates that can
only be removed, the `not-ready` taint on new Nodes, a list's resourceVersion, the Eviction subresource
(PDBs checked, 429 when they forbid; the pod then terminates gracefully), and watches as a real server
serves them (testkit/controllers/kube_watch.py): from resourceVersion unset or "0" the current objects
then the changes, from an exact version only the changes after it (from each resource's history, a real
server's watch cache window: its events of the last 75 s, at least 100, at most `store.history`; older,
or older than a `compact()`, answers 410 Gone), a selector's watch
resumed at a version judging each object by the version it had then, an end after `timeoutSeconds`, and
BOOKMARK events when allowed (`timing` sets the default timeout and the bookmarks' schedule), and
requests' deadlines (testkit/controllers/kube_deadline.py: the `timeout` parameter; a test can hold a
request at the server with `hold`, and one held past its deadline is answered 504, never served).

Made for 100,000 pods (bench/controller.py and bench/shards.py send hundreds of thousands of requests): a
request for one of RESOURCES is parsed once and served here from testkit/controllers/kube_store.py (a
key lookup per object, each version encoded once, each event once for all the watches it reaches), not
through kmock's reactions, which matched each request against every request served before and found
an object by scanning every object. kmock still runs the HTTP server, answers discovery, renders errors,
and serves any other resource its own way; it keeps no request (`last_request` stays, for the tests).
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, parsing, rendering

from provisioner.kube import client as kc
from provisioner.state.objects import Pod, PodDisruptionBudget
from testkit.controllers import kube_deadline, kube_watch
from testkit.controllers import kube_rules as rules
from testkit.controllers.crd_schema import Invalid
from testkit.controllers.kube_store import Expired, Store, Version, encode

RESOURCES = [*kc.WATCHED, kc.EVENT, kc.LEASE]
_KINDS = {r.plural: r.kind for r in RESOURCES}
_NAMESPACED = {r.plural: r.namespaced for r in RESOURCES}
_MATCHING: contextvars.ContextVar[rendering.Request] = contextvars.ContextVar("matching")
"""The request this task is serving (see FilledEmulator._handle)."""

_parse_path = parsing.parse_path


def _parse_path_with_namespaces(path: str) -> parsing.ParsedPath:
    # kmock 0.8 reads `/api/v1/namespaces[/NAME]` as a namespace prefix with nothing after it and fails;
    # the Namespace resource itself lives there.
    parts = path.strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) <= 4:
        return parsing.ParsedPath("", "v1", "namespaces", None, parts[3] if len(parts) == 4 else None, None)
    return _parse_path(path)


parsing.parse_path = _parse_path_with_namespaces


def _res(r: kc.Resource) -> kmock.resource:
    return kmock.resource(r.group, r.version, r.plural)


@attrs.define(kw_only=True)
class FilledEmulator(kmock.KubernetesEmulator):
    rv: int = 0
    compacted_below: int = 0
    """Watches from a resourceVersion below this one answer 410 Gone (`compact`)."""
    store: Store = attrs.field(factory=Store)
    """The objects of `RESOURCES`, their history and open watches (kmock's own store holds any other
    resource); its history is the window of each resource's events a watch can resume within (a real
server's watch cache window: `kube_store`)."""
    timing: kube_watch.Timing = attrs.field(factory=kube_watch.Timing)
    """A watch's timers: its default timeout and bookmarks (a test may set shorter ones)."""
    watches: set[asyncio.Task[Any]] = attrs.field(factory=set)
    fail_next: dict[str, int] = attrs.field(factory=dict)
    """`"POST nodeclaims"` -> how many such requests answer an error (chaos for the tests)..."""
    fail_status: dict[str, int] = attrs.field(factory=dict)
    """...with this status (default 500: 409, 429, 503... as a real server under load answers)."""
    requests: dict[str, int] = attrs.field(factory=dict)
    """`"PATCH nodeclaims"` -> how many such requests arrived (to bound a controller's call rate)."""
    last_request: rendering.Request | None = None
    conflicts: int = 0
    """How many writes were refused for a stale resourceVersion (409)."""
    holds: dict[str, list[kube_deadline.Hold]] = attrs.field(factory=dict)
    """`"POST nodeclaims"` -> the next such requests to hold until released (test-only: `hold`)."""
    clock: Callable[[], float] = time.monotonic
    """Seconds, for requests' deadlines (`kube_deadline`); a test on a virtual clock sets its own."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for r in RESOURCES:
            info = self.resources[_res(r)]
            info.kind = r.kind
            info.namespaced = r.namespaced
            info.verbs = {"get", "list", "watch", "create", "patch", "delete"}
        for name in rules.INITIAL_NAMESPACES:  # what a new cluster has
            namespace = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": self._next_rv()},
                "status": {"phase": "Active"},
            }
            self.store.put(kc.NAMESPACE.plural, namespace, "ADDED")

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def compact(self) -> None:
        """Forget history: watches from any version seen so far answer 410 Gone (callable from any
        thread: one assignment)."""
        self.compacted_below = self.rv + 1

    def __iter__(self) -> Iterator[rendering.Request]:
        # What kmock's views see of the requests this root served: only the one being matched.
        request = _MATCHING.get(None)
        if request is not None:
            yield request

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # A request for one of RESOURCES is parsed here, once (kmock decodes a body three times and
        # rebuilds the URL), and served by _handle_k8s; kmock serves anything else its own way.
        request = await _parse(raw_request)
        if request is None:
            return await super().__call__(raw_request)
        try:
            return await self._handle(request)
        except Exception as err:  # as kmock answers an error: a Status, 500 unless a KubernetesError
            return await self._render_error(err)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # kmock keeps every request it serves (and each reaction every one it answered), and matches a
        # request to a reaction by scanning that history through every reaction's filters: linear in the
        # requests served so far. None is kept here (kmock appended this one just before calling here,
        # with no await between, so the list holds no other): `last_request` stays, for the tests.
        self._requests.clear()
        self.last_request = request
        resource = _served(request)
        if resource is not None:
            return await self._handle_k8s(request, resource)
        # Discovery and any resource not in RESOURCES: kmock's reactions, matched alone (a context
        # variable, per task, holds the request; see __iter__).
        _MATCHING.set(request)
        try:
            return await super()._handle(request)
        finally:
            for reaction in self._payloads:
                answered = reaction._requests
                for i in range(len(answered) - 1, -1, -1):
                    if answered[i] is request:
                        del answered[i]
                        break

    def hold(self, what: str, *, enforced: bool = True) -> kube_deadline.Hold:
        """Hold the next request `what` (`"POST nodeclaims"`) at the server until released (any thread);
        `enforced` False: served then even past its deadline (as no real server does)."""
        held = kube_deadline.Hold(enforced=enforced)
        self.holds.setdefault(what, []).append(held)
        return held

    async def _handle_k8s(self, request: rendering.Request, res: kc.Resource) -> aiohttp.web.StreamResponse:
        chaos = f"{request.method.value.upper()} {res.plural}"
        self.requests[chaos] = self.requests.get(chaos, 0) + 1
        held = self.holds[chaos].pop(0) if self.holds.get(chaos) else None
        if held is None:
            return await self._serve(request, res, chaos)
        try:
            await held.until_released(request.params, self.clock)
            response = await self._serve(request, res, chaos)
        except Exception as err:
            held.status = getattr(err, "status", None) or 500
            raise
        finally:
            held.answered.set()
        held.status = response.status
        return response

    async def _serve(
        self, request: rendering.Request, res: kc.Resource, chaos: str
    ) -> aiohttp.web.StreamResponse:
        if request.action != enums.action.WATCH:
            kube_deadline.request_timeout(request.params.get("timeout"))  # 400 when malformed
        if self.fail_next.get(chaos):
            self.fail_next[chaos] -= 1
            status = self.fail_status.get(chaos, 500)
            raise kmock.KubernetesError(status=status, reason="Injected", message=f"injected {status}")
        post = request.method == enums.method.POST
        if request.subresource == "eviction" and post:
            return self._evict(request)
        if request.subresource == "binding" and post:
            return self._bind(request)
        action = request.action
        if action == enums.action.WATCH:
            return await self._serve_watch_stream(request, res)
        if action == enums.action.LIST:
            return self._list(request, res)
        if action == enums.action.FETCH:
            return _answer(self._held(res, request.namespace, request.name).json)
        if action == enums.action.CREATE and isinstance(request.data, dict):
            return self._create(request, res)
        if action == enums.action.UPDATE and request.name:
            return self._update(request, res)
        if action == enums.action.DELETE and request.name:
            return self._delete(request, res)
        raise kmock.KubernetesEndpointNotFoundError()

    def _held(self, res: kc.Resource, namespace: str | None, name: str | None) -> Version:
        found = self.store.get(res.plural, namespace, name or "")
        if found is None:
            raise kmock.KubernetesError(
                status=404, reason="NotFound", message=f'{res.plural} "{name}" not found'
            )
        return found

    def _create(self, request: rendering.Request, res: kc.Resource) -> aiohttp.web.StreamResponse:
        kind = res.kind
        meta = request.data.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if res.namespaced:
            namespace = request.namespace or meta.get("namespace") or "default"
            meta["namespace"] = namespace
            if self.store.get(kc.NAMESPACE.plural, None, namespace) is None:
                raise kmock.KubernetesError(
                    status=404, reason="NotFound", message=f'namespaces "{namespace}" not found'
                )
        else:
            meta.pop("namespace", None)
        _decodable(kind, request.data)
        try:
            stored = rules.on_create(kind, request.data)
        except Invalid as err:
            raise _invalid(kind, meta.get("name"), err.problems) from None
        problems = rules.problems_on_create(kind, stored)
        if problems:
            raise _invalid(kind, meta.get("name"), problems)
        stored_meta = stored.setdefault("metadata", {})
        if self.store.get(res.plural, stored_meta.get("namespace"), stored_meta["name"]) is not None:
            raise kmock.KubernetesError(
                status=409,
                reason="AlreadyExists",
                message=f'{res.plural} "{stored_meta["name"]}" already exists',
            )
        stored_meta["uid"] = str(uuid.uuid4())
        stored_meta["creationTimestamp"] = _now()
        stored_meta["generation"] = 1
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            stored_meta.pop(server_set, None)
        stored_meta["resourceVersion"] = self._next_rv()
        version = self.store.put(res.plural, stored, "ADDED")
        request.data.clear()
        request.data.update(stored)  # what the benchmarks' subclasses read of the created object
        return _answer(version.json, status=201)

    def _update(self, request: rendering.Request, res: kc.Resource) -> aiohttp.web.StreamResponse:
        kind = res.kind
        old = self._held(res, request.namespace, request.name).obj
        try:
            patch = json.loads(request.body or b"{}")
        except ValueError:
            patch = None
        if not isinstance(patch, dict):
            raise kmock.KubernetesError(
                status=400, reason="BadRequest", message="the body must be a JSON merge patch (an object)"
            )
        _decodable(kind, patch)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        held = old["metadata"].get("resourceVersion")
        if wanted is not None and str(wanted) != str(held):
            self.conflicts += 1
            raise kmock.KubernetesError(
                status=409,
                reason="Conflict",
                message=f"the object has been modified (resourceVersion {wanted} != {held})",
            )
        try:
            new = rules.merge_write(kind, old, patch, status=request.subresource == "status")
        except Invalid as err:
            raise _invalid(kind, request.name, err.problems) from None
        for server_set in (
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "name",
            "namespace",
        ):
            if server_set in old["metadata"]:
                new["metadata"][server_set] = old["metadata"][server_set]
            else:
                new["metadata"].pop(server_set, None)
        problems = rules.problems_on_update(kind, old, new)
        if old["metadata"].get("deletionTimestamp"):
            added = set(new["metadata"].get("finalizers") or []) - set(
                old["metadata"].get("finalizers") or []
            )
            if added:
                problems.append(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted"
                )
        if problems:
            raise _invalid(kind, request.name, problems)
        if new == old:  # a no-op write: no new resourceVersion, no watch event
            return _answer(encode(old))
        new["metadata"]["resourceVersion"] = self._next_rv()
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # Going, and nothing (any longer) holds it: removed by this write, one DELETED event at its
            # version (no MODIFIED at the same version, which a watch resumed there would never see).
            return _answer(self.store.remove(res.plural, new).json)
        return _answer(self.store.put(res.plural, new, "MODIFIED").json)

    def _delete(self, request: rendering.Request, res: kc.Resource) -> aiohttp.web.StreamResponse:
        obj = self._held(res, request.namespace, request.name).obj
        if res.kind == "Pod":
            body = request.data if isinstance(request.data, dict) else {}
            grace = request.params.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
            return self._terminate(res, obj, grace=grace)
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):  # already going
            return _answer(encode(obj))
        if meta.get("finalizers"):  # held until they are removed
            going = {
                **obj,
                "metadata": {**meta, "deletionTimestamp": _now(), "resourceVersion": self._next_rv()},
            }
            return _answer(self.store.put(res.plural, going, "MODIFIED").json)
        gone = {**obj, "metadata": {**meta, "resourceVersion": self._next_rv()}}
        return _answer(self.store.remove(res.plural, gone).json)

    def _terminate(self, res: kc.Resource, obj: dict[str, Any], *, grace: Any) -> aiohttp.web.StreamResponse:
        """Graceful deletion of a pod: bound to a node, it stays Terminating (deletionTimestamp set)
        until its kubelet finishes it (deletes it again with grace 0); unbound, it goes at once; with
        finalizers, it stays until they are removed."""
        meta = obj["metadata"]
        bound = bool((obj.get("spec") or {}).get("nodeName"))
        finishing = str(grace) == "0" or not bound
        if not meta.get("deletionTimestamp") and (not finishing or meta.get("finalizers")):
            seconds = (
                int(grace)
                if grace is not None
                else int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            )
            going = {
                **obj,
                "metadata": {
                    **meta,
                    "deletionTimestamp": _now(),
                    "deletionGracePeriodSeconds": seconds,
                    "resourceVersion": self._next_rv(),
                },
            }
            return _answer(self.store.put(res.plural, going, "MODIFIED").json)
        if meta.get("finalizers") or not finishing:
            return _answer(encode(obj))  # still Terminating
        gone = {**obj, "metadata": {**meta, "resourceVersion": self._next_rv()}}
        return _answer(self.store.remove(res.plural, gone).json)

    def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        pods, pdbs = kc.POD.plural, kc.PDB.plural
        obj = self._held(kc.POD, request.namespace, request.name).obj
        if not obj["metadata"].get("deletionTimestamp"):  # already going: nothing to budget
            pod = Pod.from_dict(obj)
            budgets = [PodDisruptionBudget.from_dict(v.obj) for v in self.store.items(pdbs, pod.namespace)]
            budgets = [pdb for pdb in budgets if pdb.matches(pod)]
            if budgets:  # the pods they count: of their namespace, with labels one of them selects
                selectors = [pdb.selector for pdb in budgets if pdb.selector is not None]
                peers = [
                    Pod.from_dict(v.obj)
                    for v in self.store.items(pods, pod.namespace)
                    if any(s.matches(v.obj["metadata"].get("labels") or {}) for s in selectors)
                ]
                for pdb in budgets:
                    if _allowed(pdb, peers) <= 0:
                        raise kmock.KubernetesError(
                            status=429,
                            reason="TooManyRequests",
                            message=f"Cannot evict pod as it would violate the pod's disruption budget {pdb.name}",
                        )
            self._terminate(kc.POD, obj, grace=None)
        return _answer(_SUCCESS, status=201)

    def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        obj = self._held(kc.POD, request.namespace, request.name).obj
        if (obj.get("spec") or {}).get("nodeName"):
            raise kmock.KubernetesError(status=409, reason="Conflict", message="pod is already assigned")
        target = ((request.data or {}).get("target") or {}).get("name")
        bound = {
            **obj,
            "spec": {**(obj.get("spec") or {}), "nodeName": target},
            "metadata": {**obj["metadata"], "resourceVersion": self._next_rv()},
        }
        self.store.put(kc.POD.plural, bound, "MODIFIED")
        return _answer(_SUCCESS, status=201)

    def _list(self, request: rendering.Request, res: kc.Resource) -> aiohttp.web.StreamResponse:
        matches = _selected(request)
        items = [v.json for v in self.store.items(res.plural, request.namespace) if matches(v.obj)]
        head = b'{"metadata":{"resourceVersion":"%d"},"items":[' % self.rv
        return _answer(head + b",".join(items) + b"]}")

    async def _serve_watch_stream(
        self, request: rendering.Request, res: kc.Resource
    ) -> aiohttp.web.StreamResponse:
        """A watch as kube-apiserver serves one (testkit/controllers/kube_watch.py)."""
        raw_request = request._raw_request
        assert raw_request is not None
        matches = _selected(request)
        asked = kube_watch.query(request.params, self.timing)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(raw_request)
        try:
            if asked.since is not None and asked.since < self.compacted_below:
                raise Expired(asked.since, self.compacted_below)
            watch, events = self.store.watch(
                res.plural, request.namespace, request.name, matches, asked.since
            )
        except Expired as err:
            await response.write(kube_watch.gone(str(err)))
            await response.write_eof()
            return response
        task = asyncio.current_task()
        if task is not None:
            self.watches.add(task)
        try:
            await kube_watch.stream(
                response, watch, events, res=res, asked=asked, timing=self.timing, newest=lambda: self.rv
            )
        except ConnectionError:  # the client went away
            pass
        finally:
            self.store.unwatch(res.plural, watch)
            if task is not None:
                self.watches.discard(task)
        return response


_SUCCESS = encode({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201})
_SERVED: dict[tuple[str | None, str | None, str | None], kc.Resource] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}


_KMOCK_RESOURCES = {key: _res(r) for key, r in _SERVED.items()}


async def _parse(raw: aiohttp.web.BaseRequest) -> rendering.Request | None:
    """The request, when it is for one of RESOURCES (else None)."""
    path = parsing.parse_path(raw.path)
    resource = None if path is None else _KMOCK_RESOURCES.get((path.group, path.version, path.plural))
    if path is None or resource is None:
        return None
    body = await raw.read()
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    query = dict(raw.query)
    return rendering.Request(
        raw_request=raw,
        method=raw.method,
        params=query,
        headers=dict(raw.headers),
        body=body,
        text=body.decode("utf-8", "replace"),
        data=data,
        action=parsing.guess_k8s(path, enums.method(raw.method), query),
        resource=resource,
        namespace=path.namespace,
        name=path.name,
        subresource=path.subresource,
    )


def _served(request: rendering.Request) -> kc.Resource | None:
    """The resource of RESOURCES a request is for (None for anything else)."""
    res = request.resource
    return None if res is None else _SERVED.get((res.group, res.version, res.plural))


def _answer(body: bytes, *, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=body, status=status, content_type="application/json")


def _selected(request: rendering.Request) -> rules.Matcher:
    """The objects a list or watch's `labelSelector` and `fieldSelector` match (400 when one does not
    parse, as a real server answers)."""
    try:
        labels = rules.label_selector(request.params.get("labelSelector"))
        fields = rules.field_selector(request.params.get("fieldSelector"))
    except ValueError as err:
        raise kmock.KubernetesError(status=400, reason="BadRequest", message=str(err)) from None
    return lambda obj: labels(obj) and fields(obj)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decodable(kind: str, doc: dict[str, Any]) -> None:
    """A body the server cannot decode into its type is refused with 400 before any validation."""
    problems = rules.lease_decode_problems(doc) if kind == "Lease" else []
    if problems:
        raise kmock.KubernetesError(status=400, reason="BadRequest", message="; ".join(problems))


def _invalid(kind: str, name: Any, problems: list[str]) -> kmock.KubernetesError:
    return kmock.KubernetesError(
        status=422, reason="Invalid", message=f'{kind} "{name}" is invalid: ' + "; ".join(problems)
    )


def _allowed(pdb: PodDisruptionBudget, pods: list[Pod]) -> int:
    from provisioner.clusterapi.in_memory import disruptions_allowed

    return disruptions_allowed(pdb, pods)


class KubeServer:
    """Runs FilledEmulator + kmock.Server on 127.0.0.1 in a thread; `url` for the client."""

    def __init__(self) -> None:
        self.url = ""
        self._emulator: FilledEmulator | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # surfaced by start()
            self._error = err
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        async with FilledEmulator() as emulator, kmock.Server(emulator) as server:
            self._emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stopping.wait()
            # Open watches would hold the server's shutdown until the clients' read timeouts.
            for task in list(emulator.watches):
                task.cancel()

    @property
    def emulator(self) -> FilledEmulator:
        """The running emulator (once started)."""
        assert self._emulator is not None, "the server is not started"
        return self._emulator

    def cpu_seconds(self) -> float:
        """The CPU seconds (user + system) the server's thread has used so far (Linux /proc)."""
        fields = Path(f"/proc/self/task/{self._thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start(self) -> KubeServer:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Any) -> Any:
        """Run a function on the server's loop (for hooks such as compact())."""
        assert self._loop is not None
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            box.append(fn())
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(5)
        return box[0] if box else None

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)
