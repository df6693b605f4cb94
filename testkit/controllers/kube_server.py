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
(PDBs checked, 429 when they forbid; the pod then terminates gracefully), and a `compact()` hook that
makes watches from older versions answer 410 Gone.

Made linear in the requests served (bench/controller.py sends tens of thousands): kmock matched each
request by scanning every request it had served, and found a named object by scanning every object. Here
a request is matched alone and none is kept (`last_request` stays, for the tests), and a named object is
a key lookup.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import datetime
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, parsing, rendering

from provisioner.kube import client as kc
from provisioner.state.objects import Pod, PodDisruptionBudget
from testkit.controllers import kube_rules as rules
from testkit.controllers.crd_schema import Invalid

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

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for r in RESOURCES:
            info = self.resources[_res(r)]
            info.kind = r.kind
            info.namespaced = r.namespaced
            info.verbs = {"get", "list", "watch", "create", "patch", "delete"}
        for name in rules.INITIAL_NAMESPACES:  # what a new cluster has
            self._objects[(_res(kc.NAMESPACE), None, name)] = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": self._next_rv()},
                "status": {"phase": "Active"},
            }

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def compact(self) -> None:
        """Forget history: watches from any version seen so far answer 410 Gone."""
        self.compacted_below = self.rv + 1

    def _KubernetesEmulator__get_objs(  # kmock's private lookup, by its mangled name
        self, request: rendering.Request, strict: bool
    ) -> list[Any]:
        # kmock finds the one object a get, create, patch or delete names by scanning every object it
        # holds: quadratic over a run that creates thousands. A named request is a key lookup; only
        # lists and watches (no name) scan.
        name, resource = request.name, request.resource
        # (A request that names an object always names its resource: the name follows it in the path.)
        if name is not None and resource is not None and (strict or request.namespace is not None):
            obj = self._objects._objects.get((resource, request.namespace, name))
            return [] if obj is None else [obj]
        return [
            obj
            for (resource, namespace, obj_name), obj in self._objects.items()
            if resource == request.resource
            and (namespace == request.namespace if strict else request.namespace in (None, namespace))
            and (name is None or obj_name == name)
        ]

    def _find(self, resource: Any, namespace: str | None, name: str | None) -> Any:
        if name is None:  # (a name-less key is never held)
            return None
        key = (resource, namespace, name)
        if key in self._objects and not self._objects[key].deleted:
            return self._objects[key]
        return None

    def __iter__(self) -> Iterator[rendering.Request]:
        # What kmock's views see of the requests this root served: only the one being matched.
        request = _MATCHING.get(None)
        if request is not None:
            yield request

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # kmock keeps every request it serves, and matches a new one to a reaction by scanning that
        # history through the reaction's filters (`request in view`) for every reaction: cost linear in
        # the requests served so far, quadratic over a run (1,000 pod creates took 80 CPU s). Here a
        # request is matched alone (a context variable, per task, holds it) and none is kept: kmock
        # appended this one just before calling here, with no await between, so the list holds no other.
        _MATCHING.set(request)
        self._requests.clear()
        self.last_request = request
        try:
            return await self._handle_k8s(request)
        finally:
            # Each reaction also keeps the requests it answered.
            for reaction in self._payloads:
                answered = reaction._requests
                for i in range(len(answered) - 1, -1, -1):
                    if answered[i] is request:
                        del answered[i]
                        break

    async def _handle_k8s(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None:
            return await super()._handle(request)
        chaos = f"{request.method.value.upper()} {request.resource.plural}"
        self.requests[chaos] = self.requests.get(chaos, 0) + 1
        if self.fail_next.get(chaos):
            self.fail_next[chaos] -= 1
            status = self.fail_status.get(chaos, 500)
            raise kmock.KubernetesError(status=status, reason="Injected", message=f"injected {status}")
        if request.subresource == "eviction" and request.method == enums.method.POST:
            return await self._evict(request)
        if request.subresource == "binding" and request.method == enums.method.POST:
            return await self._bind(request)
        action = request.action
        kind = _KINDS.get(request.resource.plural or "", "")
        if action == enums.action.CREATE and isinstance(request.data, dict):
            return await self._create(request, kind)
        if action == enums.action.UPDATE and request.name and isinstance(request.data, dict):
            return await self._update(request, kind)
        if action == enums.action.DELETE and request.name:
            return await self._delete(request, kind)
        return await super()._handle(request)

    async def _create(self, request: rendering.Request, kind: str) -> aiohttp.web.StreamResponse:
        meta = request.data.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        namespaced = request.resource is not None and _NAMESPACED.get(request.resource.plural or "", False)
        if namespaced:
            namespace = request.namespace or meta.get("namespace") or "default"
            meta["namespace"] = namespace
            if self._find(_res(kc.NAMESPACE), None, namespace) is None:
                raise kmock.KubernetesError(
                    status=404, reason="NotFound", message=f'namespaces "{namespace}" not found'
                )
        _decodable(kind, request.data)
        try:
            stored = rules.on_create(kind, request.data)
        except Invalid as err:
            raise _invalid(kind, meta.get("name"), err.problems) from None
        problems = rules.problems_on_create(kind, stored)
        if problems:
            raise _invalid(kind, meta.get("name"), problems)
        stored_meta = stored.setdefault("metadata", {})
        stored_meta["uid"] = str(uuid.uuid4())
        stored_meta["creationTimestamp"] = _now()
        stored_meta["generation"] = 1
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            stored_meta.pop(server_set, None)
        async with self._lock:
            stored_meta["resourceVersion"] = self._next_rv()
        request.data.clear()
        request.data.update(stored)
        response = await super()._handle(request)
        if response.status == 200:
            response.set_status(201)
        return response

    async def _update(self, request: rendering.Request, kind: str) -> aiohttp.web.StreamResponse:
        async with self._lock:
            obj = self._find(request.resource, request.namespace, request.name)
            if obj is None:
                return await super()._handle(request)  # 404 as kmock answers it
            old = copy.deepcopy(obj.raw)
            patch = json.loads(request.body or b"{}")
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
            for server_set in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "name"):
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
                return aiohttp.web.json_response(old)
            new["metadata"]["resourceVersion"] = self._next_rv()
            request.data.clear()
            request.data.update(_diff(old, new))
        return await super()._handle(request)

    async def _delete(self, request: rendering.Request, kind: str) -> aiohttp.web.StreamResponse:
        async with self._lock:
            obj = self._find(request.resource, request.namespace, request.name)
            if obj is not None and kind == "Pod":
                return await self._delete_pod(request, obj)
            if obj is not None:
                obj.patch({"metadata": {"resourceVersion": self._next_rv()}})
        return await super()._handle(request)

    async def _delete_pod(self, request: rendering.Request, obj: Any) -> aiohttp.web.StreamResponse:
        body = request.data if isinstance(request.data, dict) else {}
        grace = request.params.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        assert request.resource is not None
        return await self._terminate(request.resource, obj, grace=grace)

    async def _terminate(self, resource: Any, obj: Any, *, grace: Any) -> aiohttp.web.StreamResponse:
        """Graceful deletion of a pod: bound to a node, it stays Terminating (deletionTimestamp set)
        until its kubelet finishes it (deletes it again with grace 0); unbound, it goes at once; with
        finalizers, it stays until they are removed. Called under the lock."""
        meta = obj.raw["metadata"]
        bound = bool((obj.raw.get("spec") or {}).get("nodeName"))
        finishing = str(grace) == "0" or not bound
        if not meta.get("deletionTimestamp") and (not finishing or meta.get("finalizers")):
            seconds = (
                int(grace)
                if grace is not None
                else int((obj.raw.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            )
            obj.patch(
                {
                    "metadata": {
                        "deletionTimestamp": _now(),
                        "deletionGracePeriodSeconds": seconds,
                        "resourceVersion": self._next_rv(),
                    }
                }
            )
            await self._buses[resource].put({"type": "MODIFIED", "object": obj.raw})
            return aiohttp.web.json_response(obj.raw)
        if meta.get("finalizers") or not finishing:
            return aiohttp.web.json_response(obj.raw)  # still Terminating
        raw = copy.deepcopy(obj.raw)
        raw["metadata"]["resourceVersion"] = self._next_rv()
        obj.delete()
        await self._buses[resource].put({"type": "DELETED", "object": raw})
        return aiohttp.web.json_response(raw)

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        pods_res, pdb_res = _res(kc.POD), _res(kc.PDB)
        async with self._lock:
            obj = self._find(pods_res, request.namespace, request.name)
            if obj is None:
                raise kmock.KubernetesObjectNotFoundError()
            if obj.raw["metadata"].get("deletionTimestamp"):  # already going: nothing to budget
                return aiohttp.web.json_response(
                    {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, status=201
                )
            pod = Pod.from_dict(obj.raw)
            pods = [
                Pod.from_dict(o.raw)
                for (r, _, _), o in self._objects.items()
                if r == pods_res and not o.deleted
            ]
            for (r, _, _), o in list(self._objects.items()):
                if r != pdb_res or o.deleted:
                    continue
                pdb = PodDisruptionBudget.from_dict(o.raw)
                if pdb.matches(pod) and _allowed(pdb, pods) <= 0:
                    raise kmock.KubernetesError(
                        status=429,
                        reason="TooManyRequests",
                        message=f"Cannot evict pod as it would violate the pod's disruption budget {pdb.name}",
                    )
            await self._terminate(pods_res, obj, grace=None)
        return aiohttp.web.json_response(
            {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, status=201
        )

    async def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        pods_res = _res(kc.POD)
        async with self._lock:
            obj = self._find(pods_res, request.namespace, request.name)
            if obj is None:
                raise kmock.KubernetesObjectNotFoundError()
            if (obj.get("spec") or {}).get("nodeName"):
                raise kmock.KubernetesError(status=409, reason="Conflict", message="pod is already assigned")
            target = ((request.data or {}).get("target") or {}).get("name")
            obj.patch({"spec": {"nodeName": target}, "metadata": {"resourceVersion": self._next_rv()}})
            await self._buses[pods_res].put({"type": "MODIFIED", "object": obj.raw})
        return aiohttp.web.json_response(
            {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, status=201
        )

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        matches = _selected(request)
        payload = cast(dict[str, Any], await super()._serve_list(request))
        payload["metadata"]["resourceVersion"] = str(self.rv)
        payload["items"] = [obj for obj in payload["items"] if matches(obj)]
        return payload

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        since = request.params.get("resourceVersion")
        if since and since.isdigit() and int(since) < self.compacted_below:
            yield b""
            yield {
                "type": "ERROR",
                "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
            }
            return
        matches = _selected(request)
        task = asyncio.current_task()
        if task is not None:
            self.watches.add(task)
        # As a real server filters a watch by its selectors: an object that starts matching comes as
        # ADDED, one that stops as DELETED (the keys this watch has sent and not yet deleted).
        sent: set[tuple[Any, Any]] = set()
        try:
            async for item in super()._serve_watch(request):
                if not isinstance(item, dict) or item.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
                    yield item
                    continue
                meta = (item.get("object") or {}).get("metadata") or {}
                key = (meta.get("namespace"), meta.get("name"))
                if item["type"] == "DELETED":
                    if key in sent:
                        sent.discard(key)
                        yield item
                elif matches(item["object"]):
                    yield item if key in sent else {**item, "type": "ADDED"}
                    sent.add(key)
                elif key in sent:
                    sent.discard(key)
                    yield {**item, "type": "DELETED"}
        finally:
            if task is not None:
                self.watches.discard(task)


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


def _diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns `old` into `new` (how kmock is told to store a computed object)."""
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key in old and old[key] == value:
            continue
        if isinstance(value, dict) and isinstance(old.get(key), dict) and value:
            out[key] = _diff(old[key], value)
        else:
            out[key] = value
    return out


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
