"""EFA (Elastic Fabric Adapter) for the NodeClasses that ask for it (`spec.placement.efa`).

A type that supports EFA launches with as many EFA interfaces as it allows (DescribeInstanceTypes'
`NetworkInfo.EfaInfo.MaximumEfaInterfaces`, one per network card: `InterfaceType: efa`, the first the
primary interface), and its nodes offer that many `vpc.amazonaws.com/efa` (the EFA device plugin's
extended resource), counted by the scheduler like GPUs. A type without EFA launches as usual, without
the resource, so a pod asking for EFA never lands on it.

The interfaces live in the launch template, so a template is made per (image, EFA count): the count
rides on the image key (`amd64/nvidia+efa32`), which the templates and the plan already key on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType

RESOURCE = wk.EFA_RESOURCE
_MARK = "+efa"


def interfaces(info: dict[str, Any]) -> int:
    """EFA interfaces a DescribeInstanceTypes entry allows (0 without EFA)."""
    network = info.get("NetworkInfo") or {}
    if not network.get("EfaSupported"):
        return 0
    return int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)


def with_resource(types: list[InstanceType], counts: dict[str, int]) -> list[InstanceType]:
    """The types, those with EFA offering their interfaces as `vpc.amazonaws.com/efa`."""
    return [
        replace(it, capacity={**it.capacity, RESOURCE: counts[it.name]}) if counts.get(it.name) else it
        for it in types
    ]


def image_key(key: str, count: int) -> str:
    """The image key of a type launched with `count` EFA interfaces."""
    return f"{key}{_MARK}{count}" if count > 0 else key


def split(key: str) -> tuple[str, int]:
    """(the image key proper, the EFA interfaces) of a plan's image key."""
    base, _, count = key.partition(_MARK)
    return base, int(count or 0)


def network_interfaces(
    count: int, *, security_group_ids: list[str], public_ip: bool | None
) -> list[dict[str, Any]]:
    """LaunchTemplateData NetworkInterfaces for `count` EFA interfaces: one per network card, the
    first the primary (device 0), the others device 1 of their card."""
    out = []
    for card in range(count):
        nic: dict[str, Any] = {
            "NetworkCardIndex": card,
            "DeviceIndex": 0 if card == 0 else 1,
            "InterfaceType": "efa",
            "Groups": security_group_ids,
            "DeleteOnTermination": True,
        }
        if card == 0 and public_ip is not None:
            nic["AssociatePublicIpAddress"] = public_ip
        out.append(nic)
    return out
