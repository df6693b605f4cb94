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

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from testkit.providers.gcp import bulk
from testkit.providers.gcp.fixtures import Catalog
from testkit.providers.gcp.instances import _instances, _new_operation, _operations
from testkit.providers.gcp.listing import _accelerator_types, _aggregated, _machine_types, _page, _zones
from testkit.providers.gcp.state import API, ApiError, Call, State, _now


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
