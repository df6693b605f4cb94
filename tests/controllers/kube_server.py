"""A Kubernetes API server for the controller tests: kmock's KubernetesEmulator, filled where the
controller relies on the real server's behaviour, served over real HTTP from a background thread with its
own event loop.

Gaps filled (measured with kmock 0.8): resourceVersion (one counter, bumped on every write), uid,
creationTimestamp, generateName, 201 on POST, optimistic concurrency (a patch carrying a stale
metadata.resourceVersion answers 409), the status subresource (a patch to /status changes only status),
a list's resourceVersion, the Eviction subresource (PDBs checked, 429 when they forbid), and a
`compact()` hook that makes watches from older versions answer 410 Gone.

Made linear in the requests served (bench/controller.py sends tens of thousands): kmock matched each
request by scanning every request it had served, and found a named object by scanning every object. Here
a request is matched alone and none is kept (`last_request` stays, for the tests), and a named object is
a key lookup.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, parsing, rendering

from provisioner.kube import client as kc
from provisioner.state.objects import Pod, PodDisruptionBudget

RESOURCES = [*kc.WATCHED, kc.EVENT, kc.LEASE]
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

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for r in RESOURCES:
            info = self.resources[_res(r)]
            info.kind = r.kind
            info.namespaced = r.namespaced
            info.verbs = {"get", "list", "watch", "create", "patch", "delete"}

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
        name = request.name
        if name is not None and (strict or request.namespace is not None):
            obj = self._objects._objects.get((request.resource, request.namespace, name))
            return [] if obj is None else [obj]
        return [
            obj
            for (resource, namespace, obj_name), obj in self._objects.items()
            if resource == request.resource
            and (namespace == request.namespace if strict else request.namespace in (None, namespace))
            and (name is None or obj_name == name)
        ]

    def _find(self, resource: Any, namespace: str | None, name: str) -> Any:
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
        if action == enums.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["generation"] = 1
            meta.pop("deletionTimestamp", None)
            async with self._lock:
                meta["resourceVersion"] = self._next_rv()
            response = await super()._handle(request)
            if response.status == 200:
                response.set_status(201)
            return response
        if action == enums.action.UPDATE and request.name and isinstance(request.data, dict):
            async with self._lock:
                obj = self._find(request.resource, request.namespace, request.name)
                if obj is not None:
                    meta = request.data.get("metadata") or {}
                    wanted = meta.get("resourceVersion")
                    held = (obj.get("metadata") or {}).get("resourceVersion")
                    if wanted is not None and str(wanted) != str(held):
                        raise kmock.KubernetesError(
                            status=409,
                            reason="Conflict",
                            message=f"the object has been modified (resourceVersion {wanted} != {held})",
                        )
                    if request.subresource == "status":
                        request.data.clear()
                        request.data.update({"status": json.loads(request.body or b"{}").get("status")})
                    request.data.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
            return await super()._handle(request)
        if action == enums.action.DELETE and request.name:
            async with self._lock:
                obj = self._find(request.resource, request.namespace, request.name)
                if obj is not None:
                    obj.patch({"metadata": {"resourceVersion": self._next_rv()}})
            return await super()._handle(request)
        return await super()._handle(request)

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        pods_res, pdb_res = _res(kc.POD), _res(kc.PDB)
        async with self._lock:
            obj = self._find(pods_res, request.namespace, request.name)
            if obj is None:
                raise kmock.KubernetesObjectNotFoundError()
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
            raw = obj.raw
            raw["metadata"]["resourceVersion"] = self._next_rv()
            obj.delete()
            await self._buses[pods_res].put({"type": "DELETED", "object": raw})
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
        payload = await super()._serve_list(request)
        payload["metadata"]["resourceVersion"] = str(self.rv)
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
        task = asyncio.current_task()
        if task is not None:
            self.watches.add(task)
        try:
            async for item in super()._serve_watch(request):
                yield item
        finally:
            if task is not None:
                self.watches.discard(task)


def _allowed(pdb: PodDisruptionBudget, pods: list[Pod]) -> int:
    from provisioner.clusterapi.memory import disruptions_allowed

    return disruptions_allowed(pdb, pods)


class KubeServer:
    """Runs FilledEmulator + kmock.Server on 127.0.0.1 in a thread; `url` for the client."""

    def __init__(self) -> None:
        self.url = ""
        self.emulator: FilledEmulator | None = None
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
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stopping.wait()
            # Open watches would hold the server's shutdown until the clients' read timeouts.
            for task in list(emulator.watches):
                task.cancel()

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
