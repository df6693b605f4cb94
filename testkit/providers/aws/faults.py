"""A fault-and-price HTTP proxy in front of moto's server: what moto does not do, done on the wire.

moto in server mode is the real EC2/SQS wire protocol through the real SDK, but it never runs out of
capacity, prices every spot pool at 0.00001, has no Pricing API and never throttles (see
../shared/TESTING.md). This proxy sits between the provider's boto3 client and moto and:
- answers CreateFleet like EC2 does when pools are out or short (fleets.py): overrides whose (type,
  zone, capacity type) is stocked out come back in the answer's `errorSet` with
  `InsufficientInstanceCapacity` (or the code the test chose), an offering with a set capacity launches
  no more than that, `MinTargetCapacity` is all or nothing (unless `partial_fleets`), and moto sees only
  the override chosen; when no override can launch, the answer is a 200 with errors only;
- holds cluster placement groups and answers DescribeInstanceTopology (fleets.py), which moto lacks;
- answers the next N DescribeInstances with nothing (EC2's eventual consistency after a launch);
- answers the next N launch calls (CreateFleet, RunInstances) with 503 `RequestLimitExceeded`, and the
  next N calls of any action with any status and error code a test names;
- answers DescribeSpotPriceHistory with realistic prices (on-demand times a per-zone discount, or the
  price a test set), honouring the instance-type and zone filters;
- answers SSM GetParameters for AWS's public `/aws/service/...` parameters (the EKS AMI ids aliases
  resolve to), which moto refuses to hold;
- answers the Pricing API's GetProducts from the same price table when told to (off by default: moto
  has none, and the provider must fall back quietly), else with the error a closed endpoint gives;
- memoises moto's DescribeInstanceTypes and DescribeInstanceTypeOfferings answers (static data, 6 MB of
  XML that moto takes seconds to render) and narrows them to the families tests use (`families`; None
  keeps all 1,395 types): the SDK takes seconds to parse the full list, once per provider, and the
  contract suite builds a provider per test;
- counts the instances moto launched and logs each CreateFleet it saw (overrides, capacity type, result);
- holds capacity reservations and Capacity Blocks, which moto lacks: answers DescribeCapacityReservations
  (ids, `state`, `owner-id`, tag filters) from them, and a RunInstances aimed at one is refused with
  `ReservationCapacityExceeded` when it is full, `InvalidCapacityReservationId.NotFound` when unknown or
  no longer active, else forwarded to moto without the reservation fields and counted against it.

Why a proxy and not a botocore `before-send` hook: it needs no cooperation from the code under test (the
provider builds its own clients; a subprocess such as `provisioner catalog` only needs AWS_ENDPOINT_URL),
it exercises the SDK's full request/response path including retries and XML parsing, and it keeps the
test seam on the wire, where the real EC2 answers would come from.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

from testkit.providers.aws import fleets, prices
from testkit.typed import present

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
DEFAULT_FAMILIES = frozenset(
    {"t3", "m5", "m7g", "c5", "r5", "g4dn", "g5", "g6", "gr6", "p4d", "p5", "p5e", "p5en", "p6-b200"}
    | {"trn1", "trn2", "inf2"}
)
_MEMOISED = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"})
_REGION = re.compile(r"Credential=[^/]+/\d+/([a-z0-9-]+)/")


@dataclass
class CapacityReservation:
    """A capacity reservation the proxy holds (see `FaultProxy.add_reservation`)."""

    id: str
    instance_type: str
    zone: str
    total: int
    used: int = 0
    kind: str = "default"
    state: str = "active"
    end: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    owner_id: str = "123456789012"
    launched: list[str] = field(default_factory=list)
    """Instance ids launched into it, in order."""

    def xml(self) -> str:
        tags = "".join(
            f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
            for k, v in sorted(self.tags.items())
        )
        end = f"<endDate>{self.end.strftime('%Y-%m-%dT%H:%M:%S.000Z')}</endDate>" if self.end else ""
        return (
            f"<item><capacityReservationId>{self.id}</capacityReservationId><ownerId>{self.owner_id}</ownerId>"
            f"<instanceType>{escape(self.instance_type)}</instanceType>"
            f"<availabilityZone>{escape(self.zone)}</availabilityZone><instancePlatform>Linux/UNIX"
            f"</instancePlatform><tenancy>default</tenancy><totalInstanceCount>{self.total}"
            f"</totalInstanceCount><availableInstanceCount>{max(0, self.total - self.used)}"
            f"</availableInstanceCount><state>{self.state}</state>{end}"
            f"<endDateType>{'limited' if self.end else 'unlimited'}</endDateType>"
            f"<instanceMatchCriteria>targeted</instanceMatchCriteria>"
            f"<reservationType>{self.kind}</reservationType><tagSet>{tags}</tagSet></item>"
        )


_RESERVATION_TARGET = "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"


@dataclass
class FleetCall:
    """One CreateFleet the proxy saw."""

    capacity_type: str
    overrides: list[tuple[str, str]]
    """(instance type, zone) of every override, in request order."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """The overrides answered with a capacity error."""
    launched: list[str] = field(default_factory=list)
    """Instance ids moto launched."""
    total: int = 1
    """TotalTargetCapacity."""
    min_target: int = 0
    """MinTargetCapacity of the capacity type's options (0: unset)."""


class FaultProxy:
    """The proxy (see the module docstring). `url` is what boto3's endpoint_url should be."""

    def __init__(
        self,
        upstream: str,
        *,
        subnet_zone: Callable[[str], str | None],
        families: frozenset[str] | None = DEFAULT_FAMILIES,
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.families = families
        self._subnet_zone = subnet_zone
        self._lock = threading.Lock()
        self._memo: dict[bytes, tuple[int, list[tuple[str, str]], bytes]] = {}
        self.reset()
        handler = type("Handler", (_Handler,), {"proxy": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="aws-fault-proxy", daemon=True
        )
        self._thread.start()

    # --- what tests say ---------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget stockouts, throttles, set prices, counts and the call log (not the memoised catalog)."""
        with self._lock:
            self.stockouts: dict[tuple[str, str, str], str] = {}
            self.failures: dict[str, list[tuple[int, str]]] = {}
            self.hidden_describes = 0
            self.throttles = 0
            self.spot_prices: dict[tuple[str, str], float] = {}
            self.pricing_api = False
            self.public_parameters: dict[str, str] = {}
            self.list_prices: dict[str, float] = dict(prices.ON_DEMAND)
            self.launched = 0
            self.fleet_calls: list[FleetCall] = []
            self.actions: list[str] = []
            self.reservations: dict[str, CapacityReservation] = {}
            self.capacity: dict[tuple[str, str, str], int] = {}
            self.partial_fleets = False
            self.placement_groups: dict[str, fleets.PlacementGroup] = {}
            self.fleet_instances: dict[str, fleets.Launched] = {}
            self.terminated: set[str] = set()

    def add_reservation(
        self,
        *,
        instance_type: str,
        zone: str,
        count: int,
        kind: str = "default",
        end: datetime | None = None,
        tags: dict[str, str] | None = None,
        owner_id: str = "123456789012",
    ) -> CapacityReservation:
        """An active capacity reservation (`kind` `capacity-block` for a Capacity Block for ML)."""
        with self._lock:
            reservation = CapacityReservation(
                id=f"cr-{uuid.uuid4().hex[:17]}",
                instance_type=instance_type,
                zone=zone,
                total=count,
                kind=kind,
                end=end,
                tags=dict(tags or {}),
                owner_id=owner_id,
            )
            self.reservations[reservation.id] = reservation
            return reservation

    def stockout(
        self, *, instance_type: str, zone: str, capacity_type: str, code: str = "InsufficientInstanceCapacity"
    ) -> None:
        """CreateFleet answers this offering's overrides with `code` in its errorSet."""
        with self._lock:
            self.stockouts[(instance_type, zone, capacity_type)] = code

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        """The offering can launch `count` more instances through CreateFleet (see fleets.py)."""
        with self._lock:
            self.capacity[(instance_type, zone, capacity_type)] = count

    def hide_instances(self, *, times: int = 1) -> None:
        """The next `times` DescribeInstances answer with no reservations, as EC2 may right after a
        launch (its reads are eventually consistent)."""
        with self._lock:
            self.hidden_describes += times

    def fail_next(self, action: str, *, status: int, code: str, times: int = 1) -> None:
        """The next `times` calls of `action` answer `status` with EC2's error `code`."""
        with self._lock:
            self.failures.setdefault(action, []).extend([(status, code)] * times)

    def throttle(self, *, times: int = 1) -> None:
        with self._lock:
            self.throttles += times

    def set_spot_price(self, *, instance_type: str, zone: str, price: float) -> None:
        with self._lock:
            self.spot_prices[(instance_type, zone)] = price

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- the wire ---------------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        target = headers.get("x-amz-target", "")
        if target.startswith("AWSPriceListService."):
            return self._pricing(target, body)
        if target == "AmazonSSM.GetParameters":
            names = json.loads(body or b"{}").get("Names", [])
            if any(n.startswith("/aws/service/") for n in names):
                return self._public_parameters(names)
        params = parse_qsl(body.decode(), keep_blank_values=True) if body and b"Action=" in body else []
        action = dict(params).get("Action", "")
        with self._lock:
            self.actions.append(action or target or f"{method} {path}")
        with self._lock:
            queued = self.failures.get(action)
            failure = queued.pop(0) if queued else None
        if failure is not None:
            return _ec2_error(failure[0], failure[1], f"injected {failure[1]}")
        if action == "DescribeInstances":
            with self._lock:
                hide = self.hidden_describes > 0
                self.hidden_describes -= 1 if hide else 0
            if hide:
                xml = (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeInstancesResponse xmlns="{EC2_NS}">'
                    f"<requestId>{uuid.uuid4()}</requestId><reservationSet/></DescribeInstancesResponse>"
                )
                return 200, [("Content-Type", "text/xml")], xml.encode()
        if action in _MEMOISED:
            with self._lock:
                hit = self._memo.get(body)
            if hit is not None:
                return hit
            answer = self._forward(method, path, headers, body)
            if answer[0] == 200:
                answer = (answer[0], answer[1], self._narrow(answer[2]))
                with self._lock:
                    self._memo[body] = answer
            return answer
        if action in ("CreateFleet", "RunInstances"):
            with self._lock:
                throttled = self.throttles > 0
                self.throttles -= 1 if throttled else 0
            if throttled:
                return _ec2_error(503, "RequestLimitExceeded", "Request limit exceeded.")
        if action == "CreateFleet":
            return fleets.create_fleet(self, method, path, headers, params)
        if action in _GROUP_ACTIONS:
            return _GROUP_ACTIONS[action](self, params)
        if action == "TerminateInstances":
            with self._lock:
                self.terminated.update(v for k, v in params if re.fullmatch(r"InstanceId\.\d+", k))
        if action == "DescribeSpotPriceHistory":
            return self._spot_price_history(params, headers)
        if action == "DescribeCapacityReservations":
            return self._describe_reservations(params)
        if action == "RunInstances" and dict(params).get(_RESERVATION_TARGET):
            return self._run_in_reservation(method, path, headers, params)
        answer = self._forward(method, path, headers, body)
        if action == "DescribeInstances" and answer[0] == 200:
            answer = (answer[0], answer[1], fleets.with_placement(self, answer[2]))
        if action == "RunInstances" and answer[0] == 200:
            with self._lock:
                self.launched += len(re.findall(rb"<instanceId>i-", answer[2]))
        return answer

    def _narrow(self, data: bytes) -> bytes:
        """Keep only the catalog entries of `families` (see the module docstring)."""
        if self.families is None:
            return data
        root = ET.fromstring(data)
        namespace = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
        ET.register_namespace("", namespace)
        ns = f"{{{namespace}}}" if namespace else ""
        for tag in ("instanceTypeSet", "instanceTypeOfferingSet"):
            for container in root.iter(f"{ns}{tag}"):
                for item in list(container):
                    name = item.findtext(f"{ns}instanceType") or ""
                    if name.split(".", 1)[0] not in self.families:
                        container.remove(item)
        return cast(bytes, ET.tostring(root, encoding="utf-8", xml_declaration=True))

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(present(self.upstream.hostname), self.upstream.port, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "connection")}
            sent["Content-Length"] = str(len(body))
            conn.request(method, path, body=body, headers=sent)
            resp = conn.getresponse()
            data = resp.read()
            kept = [
                (k, v)
                for k, v in resp.getheaders()
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date")
            ]
            return resp.status, kept, data
        finally:
            conn.close()

    def _describe_reservations(
        self, params: list[tuple[str, str]]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        ids = {v for k, v in params if re.fullmatch(r"CapacityReservationId\.\d+", k)}
        filters: dict[str, set[str]] = {}
        for k, name in params:
            m = re.fullmatch(r"Filter\.(\d+)\.Name", k)
            if m:
                filters[name] = {v for kk, v in params if kk.startswith(f"Filter.{m.group(1)}.Value.")}
        with self._lock:
            found = [r for _, r in sorted(self.reservations.items())]
        if ids and not ids <= {r.id for r in found}:
            missing = sorted(ids - {r.id for r in found})[0]
            return _ec2_error(400, "InvalidCapacityReservationId.NotFound", f"{missing} does not exist")

        def matches(r: CapacityReservation) -> bool:
            for name, values in filters.items():
                if name == "state" and r.state not in values:
                    return False
                if name == "owner-id" and r.owner_id not in values:
                    return False
                if name == "tag-key" and not values & set(r.tags):
                    return False
                if name.startswith("tag:") and r.tags.get(name[4:]) not in values:
                    return False
            return not ids or r.id in ids

        items = "".join(r.xml() for r in found if matches(r))
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeCapacityReservationsResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><capacityReservationSet>{items}</capacityReservationSet>"
            "</DescribeCapacityReservationsResponse>"
        )
        return 200, [("Content-Type", "text/xml")], xml.encode()

    def _run_in_reservation(
        self, method: str, path: str, headers: dict[str, str], params: list[tuple[str, str]]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        rid = dict(params)[_RESERVATION_TARGET]
        with self._lock:
            r = self.reservations.get(rid)
            if r is None or r.state != "active":
                return _ec2_error(
                    400, "InvalidCapacityReservationId.NotFound", f"The reservation ID '{rid}' does not exist"
                )
            if r.used >= r.total:
                return _ec2_error(
                    400,
                    "ReservationCapacityExceeded",
                    f"The requested reservation {rid} has no free capacity",
                )
            r.used += 1  # held while moto launches, so two concurrent launches cannot both take the last
        kept = [
            (k, v)
            for k, v in params
            if not k.startswith(("CapacityReservationSpecification.", "InstanceMarketOptions."))
        ]
        status, out_headers, data = self._forward(method, path, headers, urlencode(kept).encode())
        ids = [i.decode() for i in re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", data)]
        with self._lock:
            if status != 200:
                r.used -= 1
            else:
                r.launched.extend(ids)
                self.launched += len(ids)
        return status, out_headers, data

    def release(self, reservation_id: str, *, count: int = 1) -> None:
        """Instances of the reservation ended (EC2 frees their slots when they terminate)."""
        with self._lock:
            r = self.reservations[reservation_id]
            r.used = max(0, r.used - count)

    def _zones(self, region: str) -> list[str]:
        return [f"{region}{letter}" for letter in "abcdef"]

    def _spot_price_history(
        self, params: list[tuple[str, str]], headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        region_match = _REGION.search(headers.get("authorization", ""))
        region = region_match.group(1) if region_match else "us-east-1"
        types = [v for k, v in params if re.fullmatch(r"InstanceType\.\d+", k)]
        zones = [v for k, v in params if k == "AvailabilityZone"]
        names = {k.rsplit(".", 1)[0]: v for k, v in params if re.fullmatch(r"Filter\.\d+\.Name", k)}
        for prefix, name in names.items():
            wanted = [v for k, v in params if k.startswith(f"{prefix}.Value.")]
            if name == "availability-zone":
                zones += wanted
            elif name == "instance-type":
                types += wanted
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        items = []
        for type_name in sorted(set(types) if types else prices.ON_DEMAND):
            if type_name not in prices.ON_DEMAND:
                continue
            for zone in sorted(set(zones) if zones else self._zones(region)):
                with self._lock:
                    price = self.spot_prices.get((type_name, zone))
                if price is None:
                    price = prices.spot(type_name, zone)
                items.append(
                    f"<item><instanceType>{escape(type_name)}</instanceType>"
                    "<productDescription>Linux/UNIX</productDescription>"
                    f"<spotPrice>{price:.6f}</spotPrice><timestamp>{stamp}</timestamp>"
                    f"<availabilityZone>{escape(zone)}</availabilityZone></item>"
                )
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><spotPriceHistorySet>{''.join(items)}</spotPriceHistorySet>"
            "<nextToken></nextToken></DescribeSpotPriceHistoryResponse>"
        )
        return 200, [("Content-Type", "text/xml")], xml.encode()

    def _public_parameters(self, names: list[str]) -> tuple[int, list[tuple[str, str]], bytes]:
        """AWS's public SSM parameters (EKS AMI ids): moto refuses `/aws/` names, so they are served here."""
        with self._lock:
            self.actions.append("AmazonSSM.GetParameters")
            table = dict(self.public_parameters)
        found = [
            {"Name": n, "Type": "String", "Value": table[n], "Version": 1, "DataType": "aws:ec2:image"}
            for n in names
            if n in table
        ]
        answer = {"Parameters": found, "InvalidParameters": [n for n in names if n not in table]}
        return 200, [("Content-Type", "application/x-amz-json-1.1")], json.dumps(answer).encode()

    def _pricing(self, target: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        with self._lock:
            enabled = self.pricing_api
            self.actions.append(target)
        headers = [("Content-Type", "application/x-amz-json-1.1")]
        if not enabled:
            error = {"__type": "AccessDeniedException", "message": "Pricing API not reachable from here"}
            return 400, headers, json.dumps(error).encode()
        if not target.endswith(".GetProducts"):
            return 400, headers, json.dumps({"__type": "UnknownOperationException"}).encode()
        request = json.loads(body or b"{}")
        region = next(
            (f["Value"] for f in request.get("Filters", []) if f.get("Field") == "regionCode"), "us-east-1"
        )
        with self._lock:
            table = dict(self.list_prices)
        docs = [json.dumps(prices.price_list_document(t, p, region)) for t, p in sorted(table.items())]
        return 200, headers, json.dumps({"FormatVersion": "aws_v1", "PriceList": docs}).encode()


def _fleet_error_item(
    override: dict[str, str], values: dict[str, str], *, config: int, lifecycle: str, code: str
) -> str:
    spec_name = values.get(
        f"LaunchTemplateConfigs.{config}.LaunchTemplateSpecification.LaunchTemplateName", ""
    )
    spec_id = values.get(f"LaunchTemplateConfigs.{config}.LaunchTemplateSpecification.LaunchTemplateId", "")
    spec = f"<launchTemplateName>{escape(spec_name)}</launchTemplateName>" if spec_name else ""
    spec += f"<launchTemplateId>{escape(spec_id)}</launchTemplateId>" if spec_id else ""
    fields = "".join(
        f"<{tag}>{escape(override[key])}</{tag}>"
        for key, tag in (
            ("InstanceType", "instanceType"),
            ("SubnetId", "subnetId"),
            ("AvailabilityZone", "availabilityZone"),
        )
        if key in override
    )
    return (
        "<item><launchTemplateAndOverrides>"
        f"<launchTemplateSpecification>{spec}<version>$Latest</version></launchTemplateSpecification>"
        f"<overrides>{fields}</overrides></launchTemplateAndOverrides>"
        f"<lifecycle>{escape(lifecycle)}</lifecycle>"
        f"<errorCode>{escape(code)}</errorCode>"
        f"<errorMessage>{escape(_FLEET_MESSAGES.get(code, code))}</errorMessage></item>"
    )


_GROUP_ACTIONS = {
    "CreatePlacementGroup": fleets.create_placement_group,
    "DescribePlacementGroups": fleets.describe_placement_groups,
    "DeletePlacementGroup": fleets.delete_placement_group,
    "DescribeInstanceTopology": fleets.describe_instance_topology,
}

_FLEET_MESSAGES = {
    "InsufficientInstanceCapacity": "We currently do not have sufficient capacity in the Availability Zone "
    "you requested.",
    "UnfulfillableCapacity": "Unable to fulfill capacity due to your request configuration.",
    "MaxSpotInstanceCountExceeded": "Max spot instance count exceeded",
}


def _ec2_error(status: int, code: str, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    return status, [("Content-Type", "text/xml")], xml.encode()


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every small answer waits ~40 ms for the delayed ACK

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, out_headers, data = self.proxy.handle(self.command, self.path, headers, body)
        except Exception as err:  # a bug in the proxy must read as a server error, not a hang
            status, out_headers, data = _ec2_error(500, "ProxyError", f"{type(err).__name__}: {err}")
        self.send_response(status)
        for k, v in out_headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass
