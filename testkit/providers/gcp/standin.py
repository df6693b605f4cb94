"""A local stand-in for the Compute Engine REST API (v1), enough for the GCP provider: instances
insert/get/list/aggregatedList/delete with label filters and paging, zone operations get/list/wait,
zones, machine types and accelerator types (aggregated and per zone); bulkInsert with minCount, finite
capacity per offering, and compact placement resource policies (bulk.py).

It speaks the JSON the real google-cloud-compute client sends and parses, over real HTTP on 127.0.0.1,
and keeps everything in memory. Hooks let a test make the cloud say no the way Compute Engine does:
a stockout per (machine type, zone, provisioning model) ends the insert operation with
`ZONE_RESOURCE_POOL_EXHAUSTED`; a quota hook ends it with `QUOTA_EXCEEDED`; `throttle` answers 429 to the
next N calls; `preempt` takes a spot instance back and records a `compute.instances.preempted` operation.
Like the real API it refuses names, labels and GPU scheduling the real API would refuse, so the provider
cannot get away with what Google would reject.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from testkit.providers.gcp import bulk
from testkit.providers.gcp.fixtures import Catalog

API = "https://www.googleapis.com/compute/v1"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][-_a-z0-9]{0,62}$")
_LABEL_VALUE = re.compile(r"^[-_a-z0-9]{0,63}$")
_PACIFIC = timezone(timedelta(hours=-8))
_FILTER_TERM = re.compile(r'\(?\s*([\w.\-]+)\s*(=|!=|eq|ne)\s*(?:"([^"]*)"|([^\s)]+))\s*\)?')


def _now() -> str:
    # Compute Engine writes RFC 3339 timestamps with a local offset and milliseconds.
    return datetime.now(_PACIFIC).isoformat(timespec="milliseconds")


class ApiError(Exception):
    """An HTTP error answer in Google's JSON error shape."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
            }
        }


@dataclass
class Call:
    """One request the stand-in answered."""

    method: str
    path: str
    query: dict[str, str]
    status: int = 200
    authorization: str | None = None
    """The Authorization header received, to show which credentials the client used."""


@dataclass
class State:
    """Everything the stand-in holds; guarded by `lock`."""

    catalog: Catalog
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    insert_bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    operations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pending: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Operation key -> what finishing it does (create or fail an instance)."""
    stockouts: set[tuple[str, str, str]] = field(default_factory=set)
    sync_stockouts: set[tuple[str, str, str]] = field(default_factory=set)
    quota: dict[tuple[str, str], str] = field(default_factory=dict)
    throttle_left: int = 0
    throttle_methods: frozenset[str] | None = None
    errors_5xx_left: int = 0
    hang_operations: bool = False
    stale_aggregated: bool = False
    max_page_size: int = 500
    launches: int = 0
    reservations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(zone, name) -> a reservation resource as reservations.list answers it."""
    capacity: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(machine type, zone, provisioning model) -> instances it can still create (unset: no limit)."""
    ignore_min_count: bool = False
    resource_policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(region, name) -> a resource policy."""
    calls: list[Call] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    lock: threading.RLock = field(default_factory=threading.RLock)


class ComputeStandIn:
    """The server and its hooks. `url` is what goes into `client_options={"api_endpoint": url}`."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.state = State(catalog=catalog or Catalog())
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.timeout = 0.05
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="gce-standin", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def project(self) -> str:
        return self.state.catalog.project

    def start(self) -> ComputeStandIn:
        self._thread.start()
        return self

    def _serve(self) -> None:
        # Our own loop instead of serve_forever(): stop() then never waits unboundedly (serve_forever's
        # shutdown() hangs when called while the interpreter is finalizing daemon threads).
        while not self._stopping.is_set():
            self._server.handle_request()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._server.server_close()

    # Hooks -------------------------------------------------------------------------------------------

    def add_reservation(
        self, name: str, *, zone: str, machine_type: str, count: int, specific: bool = True
    ) -> dict[str, Any]:
        """A READY reservation of `count` VMs of the machine type (`specific`: only instances naming it
        may use it, as `specificReservationRequired`)."""
        with self.state.lock:
            resource = {
                "kind": "compute#reservation",
                "name": name,
                "zone": f"{API}/projects/{self.state.catalog.project}/zones/{zone}",
                "status": "READY",
                "specificReservationRequired": specific,
                "specificReservation": {
                    "count": str(count),
                    "inUseCount": "0",
                    "instanceProperties": {"machineType": machine_type},
                },
            }
            self.state.reservations[(zone, name)] = resource
            return resource

    def stockout(
        self, *, machine_type: str, zone: str, provisioning_model: str = "STANDARD", synchronous: bool = False
    ) -> None:
        """Inserts of this machine type in this zone with this model (`SPOT` or `STANDARD`) end with
        ZONE_RESOURCE_POOL_EXHAUSTED from now on: in the insert operation's error.errors, or (with
        `synchronous`) as the insert call's own 503 answer, which Compute Engine also gives."""
        with self.state.lock:
            target = self.state.sync_stockouts if synchronous else self.state.stockouts
            target.add((machine_type, zone, provisioning_model))

    def set_capacity(
        self, *, machine_type: str, zone: str, provisioning_model: str = "STANDARD", count: int
    ) -> None:
        """The offering can create `count` more instances (inserts and bulkInserts alike, see bulk.py)."""
        with self.state.lock:
            self.state.capacity[(machine_type, zone, provisioning_model)] = count

    def ignore_min_count(self, ignore: bool = True) -> None:
        """bulkInsert creates what fits whatever its minCount (see bulk.py)."""
        with self.state.lock:
            self.state.ignore_min_count = ignore

    def resource_policy(self, name: str) -> dict[str, Any] | None:
        with self.state.lock:
            found = next((p for (_, n), p in self.state.resource_policies.items() if n == name), None)
            return json.loads(json.dumps(found)) if found else None

    def restock(self) -> None:
        with self.state.lock:
            self.state.stockouts.clear()
            self.state.sync_stockouts.clear()

    def quota_exceeded(
        self, *, machine_type: str, provisioning_model: str = "STANDARD", metric: str = "NVIDIA_H100_GPUS"
    ) -> None:
        """Inserts of this machine type with this model end with QUOTA_EXCEEDED in every zone."""
        with self.state.lock:
            self.state.quota[(machine_type, provisioning_model)] = metric

    def throttle(self, *, times: int = 1, methods: set[str] | None = None) -> None:
        """The next `times` calls (of `methods`, e.g. {"instances.insert"}; all when None) answer 429."""
        with self.state.lock:
            self.state.throttle_left = times
            self.state.throttle_methods = frozenset(methods) if methods else None

    def fail_5xx(self, *, times: int = 1) -> None:
        """The next `times` calls answer 503."""
        with self.state.lock:
            self.state.errors_5xx_left = times

    def hang_operations(self, hang: bool = True) -> None:
        """Operations stay RUNNING (a wait returns after a short pause, as the real one does after 2 min)."""
        with self.state.lock:
            self.state.hang_operations = hang

    def stale_aggregated_instances(self, stale: bool = True) -> None:
        """aggregatedList of instances answers as if no instance existed yet (aggregated views lag)."""
        with self.state.lock:
            self.state.stale_aggregated = stale

    def set_max_page_size(self, size: int) -> None:
        with self.state.lock:
            self.state.max_page_size = size

    def preempt(self, name: str, *, zone: str | None = None, delete: bool = False) -> dict[str, Any]:
        """Take a spot instance back: it becomes TERMINATED with `lastStopTimestamp`, and a DONE operation
        of type `compute.instances.preempted` is recorded in its zone (`delete` then removes it, as
        instanceTerminationAction DELETE does shortly after)."""
        with self.state.lock:
            key = self._find(name, zone)
            inst = self.state.instances[key]
            inst["status"] = "TERMINATED"
            inst["lastStopTimestamp"] = _now()
            op = _new_operation(
                self.state,
                zone=key[0],
                op_type="compute.instances.preempted",
                target=inst,
                user="system",
                done=True,
            )
            op["statusMessage"] = "Instance was preempted."
            if delete:
                del self.state.instances[key]
            return op

    def launches(self) -> int:
        with self.state.lock:
            return self.state.launches

    def instance(self, name: str, *, zone: str | None = None) -> dict[str, Any]:
        with self.state.lock:
            return cast(dict[str, Any], json.loads(json.dumps(self.state.instances[self._find(name, zone)])))

    def insert_body(self, name: str, *, zone: str | None = None) -> dict[str, Any]:
        """The JSON body the client sent to create this instance (the last accepted insert)."""
        with self.state.lock:
            matches = [b for (z, n), b in self.state.insert_bodies.items() if n == name and zone in (None, z)]
            if not matches:
                raise KeyError(name)
            return cast(dict[str, Any], json.loads(json.dumps(matches[-1])))

    def instance_names(self) -> list[str]:
        with self.state.lock:
            return sorted(n for _, n in self.state.instances)

    def calls(self, method: str | None = None) -> list[Call]:
        """Calls answered so far; `method` like `instances.insert` filters them."""
        with self.state.lock:
            return [c for c in self.state.calls if method is None or _method_name(c.method, c.path) == method]

    def _find(self, name: str, zone: str | None) -> tuple[str, str]:
        for z, n in self.state.instances:
            if n == name and zone in (None, z):
                return (z, n)
        raise KeyError(name)


# Request handling ---------------------------------------------------------------------------------------


def _method_name(verb: str, path: str) -> str:
    """`instances.insert`, `zoneOperations.wait`, `machineTypes.aggregatedList`... from verb and path."""
    parts = path.split("/compute/v1/projects/", 1)[-1].split("/")[1:]
    if parts and parts[0] == "aggregated":
        return f"{parts[1]}.aggregatedList" if len(parts) > 1 else "aggregated"
    if len(parts) >= 3 and parts[0] == "zones":
        collection = {"operations": "zoneOperations"}.get(parts[2], parts[2])
        if len(parts) == 3:
            return f"{collection}.{'insert' if verb == 'POST' else 'list'}"
        if len(parts) == 4 and parts[3] == "bulkInsert":
            return f"{collection}.bulkInsert"
        if len(parts) == 4:
            return f"{collection}.{ {'GET': 'get', 'DELETE': 'delete'}.get(verb, verb.lower()) }"
        return f"{collection}.{parts[4]}"
    if parts == ["zones"]:
        return "zones.list"
    return f"{verb} {path}"


class _Handler(BaseHTTPRequestHandler):
    state: State
    protocol_version = "HTTP/1.1"
    # Without this every answer waits on Nagle + delayed ACK (about 40 ms a call).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, verb: str) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        call = Call(
            method=verb, path=split.path, query=query, authorization=self.headers.get("Authorization")
        )
        status, body = 200, {}
        try:
            with self.state.lock:
                self.state.calls.append(call)
                self._faults(verb, split.path)
            body = _route(self.state, verb, split.path, query, json.loads(raw) if raw else {})
        except ApiError as err:
            status, body = err.status, err.body()
        except Exception as err:  # a bug in the stand-in: say so loudly in the answer
            status, body = 500, ApiError(500, f"stand-in error: {err!r}", "backendError").body()
        call.status = status
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _faults(self, verb: str, path: str) -> None:
        st = self.state
        name = _method_name(verb, path)
        if st.throttle_left > 0 and (st.throttle_methods is None or name in st.throttle_methods):
            st.throttle_left -= 1
            raise ApiError(429, "Rate Limit Exceeded", "rateLimitExceeded")
        if st.errors_5xx_left > 0:
            st.errors_5xx_left -= 1
            raise ApiError(503, "The service is currently unavailable.", "backendError")


def _route(st: State, verb: str, path: str, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    m = re.fullmatch(r"/compute/v1/projects/([^/]+)/(.*)", path)
    if not m:
        raise ApiError(404, f"The requested URL {path} was not found.", "notFound")
    project, rest = m.groups()
    if project != st.catalog.project:
        raise ApiError(404, f"The resource 'projects/{project}' was not found", "notFound")
    parts = rest.split("/")
    with st.lock:
        if verb == "GET" and parts == ["zones"]:
            return _page(st, "compute#zoneList", _zones(st), query)
        if verb == "GET" and parts[0] == "aggregated" and len(parts) == 2:
            return _aggregated(st, parts[1], query)
        if len(parts) >= 3 and parts[0] == "regions" and parts[2] == "resourcePolicies":
            return bulk.resource_policies(st, verb, parts[1], parts[3:], body)
        if len(parts) >= 3 and parts[0] == "regions" and parts[2] == "operations":
            return bulk.region_operation(st, parts[1], parts[3:])
        if len(parts) < 3 or parts[0] != "zones" or parts[1] not in st.catalog.zones:
            raise ApiError(404, f"The resource '{path}' was not found", "notFound")
        zone, collection, tail = parts[1], parts[2], parts[3:]
        if collection == "machineTypes" and verb == "GET" and not tail:
            return _page(st, "compute#machineTypeList", _machine_types(st, zone), query)
        if collection == "acceleratorTypes" and verb == "GET" and not tail:
            return _page(st, "compute#acceleratorTypeList", _accelerator_types(st, zone), query)
        if collection == "instances":
            return _instances(st, verb, zone, tail, query, body)
        if collection == "reservations" and verb == "GET" and not tail:
            items = [r for (z, _), r in sorted(st.reservations.items()) if z == zone]
            return _page(st, "compute#reservationList", items, query)
        if collection == "operations":
            return _operations(st, verb, zone, tail, query)
    raise ApiError(404, f"The resource '{path}' was not found", "notFound")


def _zones(st: State) -> list[dict[str, Any]]:
    return [
        {
            "kind": "compute#zone",
            "name": z,
            "region": f"{API}/projects/{st.catalog.project}/regions/{r}",
            "status": "UP",
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{z}",
        }
        for z, r in sorted(st.catalog.zones.items())
    ]


def _machine_types(st: State, zone: str) -> list[dict[str, Any]]:
    out = []
    for spec in st.catalog.machines:
        if zone not in spec.zones:
            continue
        mt: dict[str, Any] = {
            "kind": "compute#machineType",
            "id": str(abs(hash(spec.name)) % 10**12),
            "name": spec.name,
            "description": f"{spec.cpus} vCPUs, {spec.memory_mb / 1024:g} GB RAM",
            "guestCpus": spec.cpus,
            "memoryMb": spec.memory_mb,
            "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168",
            "zone": zone,
            "isSharedCpu": spec.shared_cpu,
            "architecture": spec.architecture,
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{zone}/machineTypes/{spec.name}",
        }
        if spec.accelerators:
            mt["accelerators"] = [
                {"guestAcceleratorType": t, "guestAcceleratorCount": c} for t, c in spec.accelerators
            ]
        out.append(mt)
    return out


def _accelerator_types(st: State, zone: str) -> list[dict[str, Any]]:
    return [
        {
            "kind": "compute#acceleratorType",
            "id": str(abs(hash(a.name)) % 10**12),
            "name": a.name,
            "description": a.description,
            "maximumCardsPerInstance": a.max_cards,
            "zone": f"{API}/projects/{st.catalog.project}/zones/{zone}",
            "selfLink": f"{API}/projects/{st.catalog.project}/zones/{zone}/acceleratorTypes/{a.name}",
        }
        for a in st.catalog.accelerators
        if zone in a.zones
    ]


def _aggregated(st: State, collection: str, query: dict[str, str]) -> dict[str, Any]:
    """Aggregated lists page over the flattened items and regroup each page by `zones/ZONE` scope."""
    makers = {
        "machineTypes": ("machineTypes", "compute#machineTypeAggregatedList", _machine_types),
        "acceleratorTypes": ("acceleratorTypes", "compute#acceleratorTypeAggregatedList", _accelerator_types),
        "instances": ("instances", "compute#instanceAggregatedList", _zone_instances),
    }
    if collection == "instances" and st.stale_aggregated:
        makers["instances"] = ("instances", "compute#instanceAggregatedList", lambda st, zone: [])
    if collection not in makers:
        raise ApiError(404, f"aggregated/{collection} is not served by the stand-in", "notFound")
    key, kind, make = makers[collection]
    flat = [(z, item) for z in sorted(st.catalog.zones) for item in make(st, z)]
    flat = [(z, item) for z, item in flat if _matches(item, query.get("filter", ""))]
    start, end, token = _window(st, len(flat), query)
    items: dict[str, Any] = {}
    for z, item in flat[start:end]:
        items.setdefault(f"zones/{z}", {key: []})[key].append(item)
    out: dict[str, Any] = {"kind": kind, "id": f"projects/{st.catalog.project}/aggregated/{collection}"}
    out["items"] = items
    if token:
        out["nextPageToken"] = token
    return out


def _page(st: State, kind: str, items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
    items = [i for i in items if _matches(i, query.get("filter", ""))]
    start, end, token = _window(st, len(items), query)
    out: dict[str, Any] = {"kind": kind, "items": items[start:end]}
    if token:
        out["nextPageToken"] = token
    return out


def _window(st: State, total: int, query: dict[str, str]) -> tuple[int, int, str | None]:
    size = min(int(query.get("maxResults") or 500), st.max_page_size)
    try:
        start = int(query.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "Invalid value for field 'pageToken'", "invalid") from None
    end = start + size
    return start, end, (str(end) if end < total else None)


def _matches(item: dict[str, Any], expression: str) -> bool:
    """The subset of Compute's filter language the provider uses: `field = "v"`, `field != v`,
    `labels.KEY = "v"`, terms joined by AND or spaces, each optionally in parentheses."""
    expression = expression.strip()
    if not expression:
        return True
    terms = _FILTER_TERM.findall(re.sub(r"\bAND\b", " ", expression))
    if not terms:
        raise ApiError(400, f"Invalid list filter expression '{expression}'.", "invalid")
    for path, op, quoted, bare in terms:
        want = quoted if quoted else bare
        value: Any = item
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        got = "" if value is None else str(value)
        if isinstance(value, bool):
            got = str(value).lower()
        equal = got == want or (want.endswith("*") and got.startswith(want[:-1]))
        if (op in ("=", "eq")) != equal:
            return False
    return True


def _zone_instances(st: State, zone: str) -> list[dict[str, Any]]:
    return [i for (z, _), i in sorted(st.instances.items()) if z == zone]


def _instances(
    st: State, verb: str, zone: str, tail: list[str], query: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    if verb == "GET" and not tail:
        return _page(st, "compute#instanceList", _zone_instances(st, zone), query)
    if verb == "POST" and not tail:
        return _insert(st, zone, body)
    if verb == "POST" and tail == ["bulkInsert"]:
        return bulk.bulk_insert(st, zone, body)
    if len(tail) == 1:
        key = (zone, tail[0])
        if key not in st.instances:
            raise ApiError(
                404,
                f"The resource 'projects/{st.catalog.project}/zones/{zone}/instances/{tail[0]}' was not found",
                "notFound",
            )
        if verb == "GET":
            return st.instances[key]
        if verb == "DELETE":
            inst = st.instances[key]
            inst["status"] = "STOPPING"
            op = _new_operation(st, zone=zone, op_type="delete", target=inst)
            st.pending[(zone, op["name"])] = {"delete": key}
            return op
    raise ApiError(404, "not served by the stand-in", "notFound")


def _invalid(field_path: str, value: Any, why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field '{field_path}': '{value}'. {why}", "invalid")


def _insert(st: State, zone: str, body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("name", "")
    if not _NAME.match(name):
        raise _invalid(
            "resource.name", name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
        )
    if (zone, name) in st.instances:
        raise ApiError(
            409,
            f"The resource 'projects/{st.catalog.project}/zones/{zone}/instances/{name}' already exists",
            "alreadyExists",
        )
    for k, v in (body.get("labels") or {}).items():
        if not _LABEL_KEY.match(k) or not _LABEL_VALUE.match(v):
            raise _invalid(f"resource.labels.{k}", v, "Label keys and values must be lowercase [-_a-z0-9].")
    mt_name = str(body.get("machineType", "")).rsplit("/", 1)[-1]
    machine = next((m for m in st.catalog.machines if m.name == mt_name and zone in m.zones), None)
    if machine is None:
        raise _invalid("resource.machineType", body.get("machineType"), "Machine type not found in zone.")
    accelerators = body.get("guestAccelerators") or []
    for i, acc in enumerate(accelerators):
        acc_name = str(acc.get("acceleratorType", "")).rsplit("/", 1)[-1]
        spec = next((a for a in st.catalog.accelerators if a.name == acc_name and zone in a.zones), None)
        if spec is None or not mt_name.startswith("n1-"):
            raise _invalid(
                f"resource.guestAccelerators[{i}].acceleratorType",
                acc.get("acceleratorType"),
                "Accelerator type not available in the zone for this machine type.",
            )
        if int(acc.get("acceleratorCount", 0)) > spec.max_cards:
            raise _invalid(
                f"resource.guestAccelerators[{i}].acceleratorCount", acc.get("acceleratorCount"), ""
            )
    scheduling = body.get("scheduling") or {}
    has_gpu = bool(accelerators or machine.accelerators)
    if has_gpu and scheduling.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
        raise ApiError(
            400,
            "Instances with guest accelerators do not support live migration.",
            "badRequest",
        )
    disks = body.get("disks") or []
    if not any(d.get("boot") for d in disks):
        raise _invalid("resource.disks", disks, "A boot disk is required.")
    model = scheduling.get("provisioningModel", "STANDARD")
    if (mt_name, zone, model) in st.sync_stockouts:
        raise ApiError(
            503,
            f"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone 'projects/{st.catalog.project}/zones/{zone}' "
            "does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
            "backendError",
        )
    st.insert_bodies[(zone, name)] = json.loads(json.dumps(body))
    target = {"name": name, "id": str(next(st.ids))}
    target["selfLink"] = f"{API}/projects/{st.catalog.project}/zones/{zone}/instances/{name}"
    op = _new_operation(st, zone=zone, op_type="insert", target=target)
    if (mt_name, zone, model) in st.stockouts:
        st.pending[(zone, op["name"])] = {
            "error": (
                "ZONE_RESOURCE_POOL_EXHAUSTED",
                f"The zone 'projects/{st.catalog.project}/zones/{zone}' does not have enough resources "
                "available to fulfill the request. Try a different zone, or try again later.",
            )
        }
        return op
    room = st.capacity.get((mt_name, zone, model))
    if room is not None and room <= 0:
        st.pending[(zone, op["name"])] = {
            "error": ("ZONE_RESOURCE_POOL_EXHAUSTED", f"The zone '{zone}' has no more {mt_name}.")
        }
        return op
    metric = st.quota.get((mt_name, model))
    if metric:
        prefix = "PREEMPTIBLE_" if model == "SPOT" else ""
        st.pending[(zone, op["name"])] = {
            "error": ("QUOTA_EXCEEDED", f"Quota '{prefix}{metric}' exceeded. Limit: 0.0 in region.")
        }
        return op
    affinity = body.get("reservationAffinity") or {}
    if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION":
        wanted = (affinity.get("values") or [""])[0]
        reservation = st.reservations.get((zone, wanted))
        if (
            reservation is None
            or reservation["specificReservation"]["instanceProperties"]["machineType"] != mt_name
        ):
            raise _invalid("resource.reservationAffinity", wanted, "No matching reservation in the zone.")
        held = reservation["specificReservation"]
        if int(held["inUseCount"]) >= int(held["count"]):
            st.pending[(zone, op["name"])] = {
                "error": ("ZONE_RESOURCE_POOL_EXHAUSTED", f"Reservation '{wanted}' has no free capacity.")
            }
            return op
        held["inUseCount"] = str(int(held["inUseCount"]) + 1)
    st.instances[(zone, name)] = _instance_resource(st, zone, body, target["id"], machine.name)
    st.launches += 1
    if room is not None:
        st.capacity[(mt_name, zone, model)] = room - 1
    st.pending[(zone, op["name"])] = {"start": (zone, name)}
    return op


def _instance_resource(st: State, zone: str, body: dict[str, Any], ident: str, mt: str) -> dict[str, Any]:
    base = f"{API}/projects/{st.catalog.project}/zones/{zone}"
    name = body["name"]
    disks = []
    for i, d in enumerate(body.get("disks") or []):
        params = d.get("initializeParams") or {}
        disk: dict[str, Any] = {
            "kind": "compute#attachedDisk",
            "type": "PERSISTENT",
            "mode": "READ_WRITE",
            "source": f"{base}/disks/{params.get('diskName') or name}",
            "deviceName": d.get("deviceName") or f"persistent-disk-{i}",
            "index": i,
            "boot": bool(d.get("boot")),
            "autoDelete": bool(d.get("autoDelete")),
            "diskSizeGb": str(params.get("diskSizeGb", "10")),
        }
        disks.append(disk)
    nics = []
    for i, nic in enumerate(body.get("networkInterfaces") or [{}]):
        nics.append(
            {
                "kind": "compute#networkInterface",
                "name": f"nic{i}",
                "network": nic.get("network", ""),
                "subnetwork": nic.get("subnetwork", ""),
                "networkIP": f"10.128.0.{int(ident) % 250 + 2}",
            }
        )
    out: dict[str, Any] = {
        "kind": "compute#instance",
        "id": ident,
        "name": name,
        "creationTimestamp": _now(),
        "machineType": f"{base}/machineTypes/{mt}",
        "status": "PROVISIONING",
        "zone": base,
        "selfLink": f"{base}/instances/{name}",
        "disks": disks,
        "networkInterfaces": nics,
        "labels": dict(body.get("labels") or {}),
        "labelFingerprint": "42WmSpB8rSM=",
        "scheduling": dict(body.get("scheduling") or {}),
        "reservationAffinity": dict(body.get("reservationAffinity") or {}),
        "cpuPlatform": "Unknown CPU Platform",
        "fingerprint": "abc=",
    }
    for key in ("metadata", "tags", "serviceAccounts", "description"):
        if body.get(key):
            out[key] = json.loads(json.dumps(body[key]))
    if body.get("guestAccelerators"):
        out["guestAccelerators"] = [
            {
                "acceleratorType": f"{base}/acceleratorTypes/{str(a['acceleratorType']).rsplit('/', 1)[-1]}",
                "acceleratorCount": a.get("acceleratorCount", 1),
            }
            for a in body["guestAccelerators"]
        ]
    return out


def _new_operation(
    st: State,
    *,
    zone: str,
    op_type: str,
    target: dict[str, Any],
    user: str = "anonymous@example.com",
    done: bool = False,
) -> dict[str, Any]:
    ident = str(next(st.ids))
    name = f"operation-{int(time.time() * 1000)}-{ident}"
    base = f"{API}/projects/{st.catalog.project}/zones/{zone}"
    op: dict[str, Any] = {
        "kind": "compute#operation",
        "id": ident,
        "name": name,
        "zone": base,
        "operationType": op_type,
        "targetLink": target.get("selfLink", ""),
        "targetId": target.get("id", ""),
        "status": "DONE" if done else "RUNNING",
        "user": user,
        "progress": 100 if done else 0,
        "insertTime": _now(),
        "startTime": _now(),
        "selfLink": f"{base}/operations/{name}",
    }
    if done:
        op["endTime"] = _now()
    st.operations[(zone, name)] = op
    return op


def _finish(st: State, key: tuple[str, str]) -> None:
    """Complete a RUNNING operation: apply what it was for (start, delete) or attach its error."""
    op = st.operations[key]
    if op["status"] == "DONE" or st.hang_operations:
        return
    effect = st.pending.pop(key, None)
    op["status"], op["progress"], op["endTime"] = "DONE", 100, _now()
    if not effect:
        return
    if "error" in effect:
        code, message = effect["error"]
        # Only error.errors, no httpErrorStatusCode/httpErrorMessage: the client reads this as success,
        # exactly the trap the provider must handle.
        op["error"] = {"errors": [{"code": code, "message": message}]}
    elif "start" in effect and effect["start"] in st.instances:
        st.instances[effect["start"]]["status"] = "RUNNING"
        st.instances[effect["start"]]["lastStartTimestamp"] = _now()
    elif "delete" in effect:
        st.instances.pop(effect["delete"], None)
    for key in effect.get("start_many", []):
        if key in st.instances:
            st.instances[key]["status"] = "RUNNING"
            st.instances[key]["lastStartTimestamp"] = _now()


def _operations(st: State, verb: str, zone: str, tail: list[str], query: dict[str, str]) -> dict[str, Any]:
    if verb == "GET" and not tail:
        ops = [op for (z, _), op in st.operations.items() if z == zone]
        return _page(st, "compute#operationList", ops, query)
    key = (zone, tail[0])
    if key not in st.operations:
        raise ApiError(404, f"The resource 'operations/{tail[0]}' was not found", "notFound")
    if (verb == "GET" and len(tail) == 1) or (verb == "POST" and tail[1:] == ["wait"]):
        if st.hang_operations:
            # The real wait returns after at most 2 minutes even when not DONE; pause briefly (lock free).
            st.lock.release()
            try:
                time.sleep(0.05)
            finally:
                st.lock.acquire()
        _finish(st, key)
        return st.operations[key]
    raise ApiError(404, "not served by the stand-in", "notFound")


def main() -> None:
    """`python -m testkit.providers.gcp.standin`: serve until interrupted, printing the endpoint to use as
    PROVISIONER_GCP_ENDPOINT (project `test-project`, region `us-central1`)."""
    server = ComputeStandIn().start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
