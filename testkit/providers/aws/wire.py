"""The EC2 wire shapes the fault proxy and its fleet handling answer with: the EC2 XML namespace, error
answers (`_ec2_error`), the capacity reservations the proxy holds and their XML, the record of each
CreateFleet (`FleetCall`) and its per-override error items with the messages EC2 writes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


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
