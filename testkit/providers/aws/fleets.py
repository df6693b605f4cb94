"""The fault proxy's EC2 for group launches: CreateFleet with finite capacity per offering and
`MinTargetCapacity`, cluster placement groups, and DescribeInstanceTopology. Moto has none of them.

What moto 5 does with a CreateFleet `instant` for N instances: it launches all N of the first override
(its lowest-price pick, every price unset), whatever `MinTargetCapacity`, `SingleInstanceType`,
`SingleAvailabilityZone` or an override's `Placement` say, and it has no placement groups or topology
API at all. So the proxy decides, as EC2 documents:
- an override whose offering is stocked out (`FaultProxy.stockout`) is answered with its error code;
- an offering with a capacity (`FaultProxy.set_capacity`) launches at most that many more; the fleet
  takes the first override (request order) with room for `MinTargetCapacity` (1 when unset) and
  launches min(TotalTargetCapacity, room) there; the overrides before it without that room are errors
  (`InsufficientInstanceCapacity`), and a fleet that launched fewer than its target reports the chosen
  override as an error beside its instances (a partial fleet);
- `partial_fleets` makes the proxy ignore `MinTargetCapacity`: an EC2 that ends partial, so the provider's
  cleanup path can be tested;
- when no override has room, the answer is a 200 with errors only, nothing launched;
- moto sees only the chosen override, for the count chosen; the instances launched into a placement
  group are remembered, shown in DescribeInstances' `placement/groupName`, and given network nodes.

Placement groups: CreatePlacementGroup (with tags), DescribePlacementGroups (by name, by tag filter),
DeletePlacementGroup (refused with `InvalidPlacementGroup.InUse` while an instance runs in it).
DescribeInstanceTopology answers three network nodes per instance of a type EC2 reports topology for:
layer 1 per zone, layer 2 per placement group (or zone), layer 3 per two instances of the group.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast
from urllib.parse import urlencode
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from testkit.providers.aws.faults import FaultProxy

Answer = tuple[int, list[tuple[str, str]], bytes]

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
_OVERRIDE = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$")
_CONFIG = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.(.+)$")
TOPOLOGY_FAMILIES = ("p4d", "p5", "p5e", "p5en", "trn1", "trn2", "hpc7a")
"""Families DescribeInstanceTopology answers for (EC2 lists the accelerated and HPC ones)."""


@dataclass
class PlacementGroup:
    name: str
    strategy: str
    id: str = field(default_factory=lambda: f"pg-{uuid.uuid4().hex[:17]}")
    tags: dict[str, str] = field(default_factory=dict)

    def xml(self, tag: str = "item") -> str:
        tags = "".join(
            f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
            for k, v in sorted(self.tags.items())
        )
        return (
            f"<{tag}><groupName>{escape(self.name)}</groupName><state>available</state>"
            f"<strategy>{escape(self.strategy)}</strategy><groupId>{self.id}</groupId>"
            f"<tagSet>{tags}</tagSet></{tag}>"
        )


@dataclass
class Launched:
    """An instance the proxy saw launched by a fleet."""

    instance_type: str
    zone: str
    group: str | None
    network_nodes: list[str]


def _ok(action: str, body: str) -> Answer:
    xml = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{EC2_NS}">'
        f"<requestId>{uuid.uuid4()}</requestId>{body}</{action}Response>"
    )
    return 200, [("Content-Type", "text/xml")], xml.encode()


def _values(params: list[tuple[str, str]], prefix: str) -> list[str]:
    """The values of a list parameter (`prefix.1`, `prefix.2`...)."""
    return [v for k, v in params if re.fullmatch(rf"{re.escape(prefix)}\.\d+", k)]


def _tags(params: list[tuple[str, str]], resource_type: str) -> dict[str, str]:
    values = dict(params)
    out: dict[str, str] = {}
    for k, v in params:
        m = re.fullmatch(r"TagSpecification\.(\d+)\.ResourceType", k)
        if m and v == resource_type:
            n = m.group(1)
            i = 1
            while f"TagSpecification.{n}.Tag.{i}.Key" in values:
                out[values[f"TagSpecification.{n}.Tag.{i}.Key"]] = values.get(
                    f"TagSpecification.{n}.Tag.{i}.Value", ""
                )
                i += 1
    return out


def create_fleet(
    proxy: FaultProxy, method: str, path: str, headers: dict[str, str], params: list[tuple[str, str]]
) -> Answer:
    from testkit.providers.aws.faults import FleetCall, _ec2_error, _fleet_error_item

    values = dict(params)
    capacity_type = values.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
    total = int(values.get("TargetCapacitySpecification.TotalTargetCapacity", "1") or 1)
    options = "SpotOptions" if capacity_type == "spot" else "OnDemandOptions"
    min_target = int(values.get(f"{options}.MinTargetCapacity", "0") or 0)
    overrides: dict[tuple[int, int], dict[str, str]] = {}
    for name, value in params:
        m = _OVERRIDE.match(name)
        if m:
            overrides.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = value
    call = FleetCall(capacity_type=capacity_type, overrides=[], total=total, min_target=min_target)
    with proxy._lock:
        need = 1 if proxy.partial_fleets else max(1, min_target)
    errors: dict[tuple[int, int], str] = {}
    chosen: tuple[int, int] | None = None
    count = 0
    for key, o in sorted(overrides.items()):
        type_name = o.get("InstanceType", "")
        zone = o.get("AvailabilityZone") or proxy._subnet_zone(o.get("SubnetId", "")) or ""
        call.overrides.append((type_name, zone))
        with proxy._lock:
            code = proxy.stockouts.get((type_name, zone, capacity_type))
            room = proxy.capacity.get((type_name, zone, capacity_type))
        if code is not None:
            errors[key] = code
        elif chosen is None and room is not None and room < need:
            errors[key] = "InsufficientInstanceCapacity"
        elif chosen is None:
            chosen, count = key, total if room is None else min(total, room)
    order = sorted(overrides)
    call.failed = [call.overrides[order.index(k)] for k in sorted(errors)]
    with proxy._lock:
        proxy.fleet_calls.append(call)
    if chosen is not None:
        type_name, zone = call.overrides[order.index(chosen)]
        group = overrides[chosen].get("Placement.GroupName")
        with proxy._lock:
            if group and group not in proxy.placement_groups:
                return _ec2_error(
                    400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{group}' is unknown."
                )
            if count < total:
                errors[chosen] = "InsufficientInstanceCapacity"
            if (type_name, zone, capacity_type) in proxy.capacity:
                proxy.capacity[(type_name, zone, capacity_type)] -= count  # held while moto launches
    error_items = "".join(
        _fleet_error_item(overrides[k], values, config=k[0], lifecycle=capacity_type, code=errors[k])
        for k in sorted(errors)
    )
    if chosen is None:
        return _ok(
            "CreateFleet",
            f"<fleetId>fleet-{uuid.uuid4()}</fleetId><errorSet>{error_items}</errorSet><fleetInstanceSet/>",
        )
    sent = _only(params, chosen, count)
    status, out_headers, data = proxy._forward(method, path, headers, urlencode(sent).encode())
    ids = [i.decode() for i in re.findall(rb"<item>(i-[0-9a-f]+)</item>", data)] if status == 200 else []
    with proxy._lock:
        key3 = (type_name, zone, capacity_type)
        if key3 in proxy.capacity:
            proxy.capacity[key3] += count - len(ids)
        call.launched.extend(ids)
        proxy.launched += len(ids)
        for i in ids:
            proxy.fleet_instances[i] = Launched(
                type_name, zone, group, _network_nodes(proxy, type_name, zone, group)
            )
    if status == 200 and error_items:
        data = (
            data.decode()
            .replace("</CreateFleetResponse>", f"<errorSet>{error_items}</errorSet></CreateFleetResponse>")
            .encode()
        )
    return status, out_headers, data


def _network_nodes(proxy: FaultProxy, type_name: str, zone: str, group: str | None) -> list[str]:
    if type_name.split(".", 1)[0] not in TOPOLOGY_FAMILIES:
        return []
    peers = sum(1 for i in proxy.fleet_instances.values() if i.zone == zone and i.group == group)
    island = group or zone
    return [f"nn-{zone}-l1", f"nn-{island}-l2", f"nn-{island}-l3-{peers // 2}"]


def _only(params: list[tuple[str, str]], chosen: tuple[int, int], count: int) -> list[tuple[str, str]]:
    """The form with one launch template config holding the chosen override only, renumbered from 1, for
    `count` instances, without what moto does not know (options it would ignore, the override's Placement)."""
    out = []
    for key, value in params:
        m = _OVERRIDE.match(key)
        if m:
            if (int(m.group(1)), int(m.group(2))) == chosen and not m.group(3).startswith("Placement."):
                out.append((f"LaunchTemplateConfigs.1.Overrides.1.{m.group(3)}", value))
            continue
        c = _CONFIG.match(key)
        if c:
            if int(c.group(1)) == chosen[0]:
                out.append((f"LaunchTemplateConfigs.1.{c.group(2)}", value))
            continue
        if key == "TargetCapacitySpecification.TotalTargetCapacity":
            value = str(count)
        if re.fullmatch(
            r"(OnDemand|Spot)Options\.(MinTargetCapacity|SingleInstanceType|SingleAvailabilityZone)", key
        ):
            continue
        out.append((key, value))
    return out


def create_placement_group(proxy: FaultProxy, params: list[tuple[str, str]]) -> Answer:
    from testkit.providers.aws.faults import _ec2_error

    values = dict(params)
    name = values.get("GroupName", "")
    with proxy._lock:
        if name in proxy.placement_groups:
            return _ec2_error(
                400, "InvalidPlacementGroup.Duplicate", f"The placement group '{name}' already exists."
            )
        group = PlacementGroup(name, values.get("Strategy", "cluster"), tags=_tags(params, "placement-group"))
        proxy.placement_groups[name] = group
    return _ok("CreatePlacementGroup", group.xml("placementGroup"))


def describe_placement_groups(proxy: FaultProxy, params: list[tuple[str, str]]) -> Answer:
    from testkit.providers.aws.faults import _ec2_error

    names = set(_values(params, "GroupName") + _values(params, "groupName"))
    filters: dict[str, set[str]] = {}
    for k, name in params:
        m = re.fullmatch(r"Filter\.(\d+)\.Name", k)
        if m:
            filters[name] = set(_values(params, f"Filter.{m.group(1)}.Value"))
    with proxy._lock:
        groups = sorted(proxy.placement_groups.values(), key=lambda g: g.name)
    if names - {g.name for g in groups}:
        missing = sorted(names - {g.name for g in groups})[0]
        return _ec2_error(
            400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{missing}' is unknown."
        )

    def matches(g: PlacementGroup) -> bool:
        if names and g.name not in names:
            return False
        return all(
            (g.tags.get(f[4:]) in vs) if f.startswith("tag:") else (f != "strategy" or g.strategy in vs)
            for f, vs in filters.items()
        )

    items = "".join(g.xml() for g in groups if matches(g))
    return _ok("DescribePlacementGroups", f"<placementGroupSet>{items}</placementGroupSet>")


def delete_placement_group(proxy: FaultProxy, params: list[tuple[str, str]]) -> Answer:
    from testkit.providers.aws.faults import _ec2_error

    name = dict(params).get("GroupName", "")
    with proxy._lock:
        if name not in proxy.placement_groups:
            return _ec2_error(
                400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
            )
        if any(i.group == name for iid, i in proxy.fleet_instances.items() if iid not in proxy.terminated):
            return _ec2_error(400, "InvalidPlacementGroup.InUse", f"Group {name} is in use")
        del proxy.placement_groups[name]
    return _ok("DeletePlacementGroup", "<return>true</return>")


def describe_instance_topology(proxy: FaultProxy, params: list[tuple[str, str]]) -> Answer:
    ids = _values(params, "InstanceId")
    with proxy._lock:
        found = [
            (i, proxy.fleet_instances[i])
            for i in ids
            if i in proxy.fleet_instances and i not in proxy.terminated
        ]
    items = "".join(
        f"<item><instanceId>{iid}</instanceId><instanceType>{escape(i.instance_type)}</instanceType>"
        + (f"<groupName>{escape(i.group)}</groupName>" if i.group else "")
        + "<networkNodeSet>"
        + "".join(f"<item>{escape(n)}</item>" for n in i.network_nodes)
        + f"</networkNodeSet><availabilityZone>{escape(i.zone)}</availabilityZone></item>"
        for iid, i in found
        if i.network_nodes
    )
    return _ok("DescribeInstanceTopology", f"<instanceSet>{items}</instanceSet>")


def with_placement(proxy: FaultProxy, data: bytes) -> bytes:
    """A DescribeInstances answer with each fleet instance's placement group in `placement/groupName`."""
    with proxy._lock:
        groups = {i: launched.group for i, launched in proxy.fleet_instances.items() if launched.group}
    if not groups:
        return data
    root = ET.fromstring(data)
    ns = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
    ET.register_namespace("", ns)
    q = f"{{{ns}}}" if ns else ""
    for item in root.iter(f"{q}item"):
        group = groups.get(item.findtext(f"{q}instanceId") or "")
        placement = item.find(f"{q}placement")
        if group and placement is not None:
            name = placement.find(f"{q}groupName")
            if name is None:
                name = ET.SubElement(placement, f"{q}groupName")
            name.text = group
    return cast(bytes, ET.tostring(root, encoding="utf-8", xml_declaration=True))
