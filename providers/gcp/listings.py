"""What Compute Engine lists for a region: its zones that are UP, the machine types of those zones
(`machines.Machine`, one aggregated listing) and the accelerator types each zone offers with the most
cards an instance takes (one aggregated listing). Reading only; building priced instance types from them
is providers.gcp.machines', and caching the answer the provider's.
"""

from __future__ import annotations

from providers.gcp import machines, naming
from providers.gcp.sdk import SDK


def read_region(
    sdk: SDK, *, project: str, region: str
) -> tuple[list[machines.Machine], dict[str, dict[str, int]], list[str]]:
    """(machine types, zone -> accelerator type -> most cards per instance, zones) of the region."""
    c = sdk.clients()
    zone_items = sdk.listed("list zones", c.zones.list, request={"project": project})
    zones = sorted(
        z.name for z in zone_items if naming.last(z.region) == region and (not z.status or z.status == "UP")
    )
    region_zones = set(zones)
    scopes = sdk.listed(
        "list machine types",
        c.machine_types.aggregated_list,
        request={"project": project, "max_results": 500},
    )
    found: list[machines.Machine] = []
    for scope, scoped in scopes:
        zone = naming.last(scope)
        if zone not in region_zones:
            continue
        for mt in scoped.machine_types:
            found.append(
                machines.Machine(
                    name=mt.name,
                    zone=zone,
                    vcpu=int(mt.guest_cpus),
                    memory_mib=int(mt.memory_mb),
                    accelerators=tuple(
                        (a.guest_accelerator_type, int(a.guest_accelerator_count)) for a in mt.accelerators
                    ),
                    shared_cpu=bool(mt.is_shared_cpu),
                    architecture=mt.architecture or "X86_64",
                    deprecated=bool(mt.deprecated and mt.deprecated.state),
                )
            )
    acc_scopes = sdk.listed(
        "list accelerator types",
        c.accelerator_types.aggregated_list,
        request={"project": project, "max_results": 500},
    )
    accelerators: dict[str, dict[str, int]] = {}
    for scope, scoped in acc_scopes:
        zone = naming.last(scope)
        if zone in region_zones:
            for at in scoped.accelerator_types:
                accelerators.setdefault(zone, {})[at.name] = int(at.maximum_cards_per_instance or 1)
    return found, accelerators, zones
