"""`provisioner catalog`: what a pool could launch in a region, with GPUs, zones and prices.

Wiring and printing only. Online (the default) it reads the cloud through its plug-in's `read_types`
(provisioner.cloudprovider.plugin), the same provider code the controller runs: for aws the provider's
`region_instance_types()` (honours `AWS_ENDPOINT_URL` and the standard credential chain), for gcp the
same (needs a project, `--project` or `GOOGLE_CLOUD_PROJECT`; endpoint override `--endpoint` or
`PROVISIONER_GCP_ENDPOINT`; Application Default Credentials). `--cloud fake` reads the fake provider
(the catalog `provisioner simulate` launches from). `--offline` prints a built-in catalog (`aws`, `gcp`,
`karpenter-benchmark`) without any network call.

Against moto (what the AWS provider's tests run):

    AWS_ENDPOINT_URL=http://127.0.0.1:PORT AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \\
        provisioner catalog --cloud aws --region us-east-1 --gpu --output json

or in-process: `typer.testing.CliRunner().invoke(provisioner.cli.app, ["catalog", "--cloud", "aws",
"--region", "us-east-1", "--gpu", "--output", "json"], env={"AWS_ENDPOINT_URL": url, ...})`.

JSON: a list of {instanceType, vcpu, memoryMiB, gpu: {name, count, memoryMiB} | null,
offerings: [{zone, capacityType, pricePerHour, available}]}, sorted by family, then size. A `reserved`
offering (an active capacity reservation or Capacity Block; priced zero: it is paid for either way) also
carries `reservation: {id, type, free, total, endsAt, hourlyPrice}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from provisioner.api import labels
from provisioner.cli import output as out
from provisioner.cli.app import app
from provisioner.cloudprovider import CloudProviderError, InstanceType, Reservation, registry
from provisioner.cloudprovider import catalog as catalog_
from provisioner.cloudprovider.plugin import CatalogQuery, OptionError
from provisioner.finops.reports.text import csv_text, dump

FORMATS = ("table", "json", "yaml", "csv")
CSV_COLUMNS = (
    "instance_type",
    "vcpu",
    "memory_gib",
    "gpu",
    "zones",
    "spot_price_per_hour",
    "on_demand_price_per_hour",
    "reserved",
)


def _fail(message: str, *, flag: str | None = None) -> typer.Exit:
    return out.fail(message, flag=flag, code=1)


def _online() -> list[str]:
    """The clouds `catalog` reads live: every installed plug-in that can."""
    return [name for name in registry.names() if registry.plugin(name).read_types is not None]


def _either(names: list[str]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 2 else names)


def _cloud_help() -> str:
    """`--cloud`'s help: the installed clouds read live (production ones first), then the built-in catalogs."""
    live = [p for p in registry.ordered(registry.plugins()) if p.read_types is not None]
    production = [p.name for p in live if p.dev_only is None]
    dev = [p.name for p in live if p.dev_only is not None]
    read = [f"{_either(production)} (read through the provider)"] if production else []
    return f"{', '.join([*read, *dev, 'or with --offline: ' + ', '.join(catalog_.names())])}."


def _defaults(flag: str) -> dict[str, str]:
    """Cloud -> where it takes `flag`'s value from when it is not given (its plug-in's `catalog_defaults`),
    in `--cloud` order."""
    found = registry.ordered(registry.plugins())
    return {p.name: p.catalog_defaults[flag] for p in found if flag in p.catalog_defaults}


def _region_help() -> str:
    found = ", ".join(_defaults("--region").values())
    return f"Region. Default: {found or 'the default region of its catalog'}."


def _project_help() -> str:
    clouds = _defaults("--project")
    return f"Project, for {_either(list(clouds))} (default {' / '.join(clouds.values())})." if clouds else ""


def _endpoint_help() -> str:
    found = " / ".join(_defaults("--endpoint").values())
    return "API endpoint override" + (f" (default {found})." if found else ".")


def _default_region(cloud: str) -> str:
    default = registry.plugin(cloud).default_region
    return default() if default is not None else catalog_.default_region(cloud)


def _read_cloud(
    cloud: str,
    *,
    region: str,
    project: str | None,
    endpoint: str | None,
) -> list[InstanceType]:
    """Every instance type the cloud offers in the region, through its plug-in (which imports its SDK
    only then, so `--offline` never needs boto3 or google-cloud-compute)."""
    read = registry.plugin(cloud).read_types
    assert read is not None  # _online() lists only the plug-ins that can
    try:
        return read(CatalogQuery(region=region, project=project, endpoint=endpoint))
    except OptionError as err:
        raise _fail(err.message, flag=err.flag) from None


def sort_key(t: InstanceType) -> tuple[str, int, int, str]:
    """By family, then size: `g5.xlarge` before `g5.2xlarge` before `g5.12xlarge`."""
    family = t.labels.get(labels.INSTANCE_FAMILY, t.name)
    return (family, t.vcpu, t.memory_mib, t.name)


def instance_type_json(t: InstanceType) -> dict[str, Any]:
    """One row of the JSON output."""
    return {
        "instanceType": t.name,
        "vcpu": t.vcpu,
        "memoryMiB": t.memory_mib,
        "gpu": t.gpu.to_dict() if t.gpu is not None else None,
        "offerings": [
            {
                "zone": o.zone,
                "capacityType": o.capacity_type,
                "pricePerHour": round(o.price, 6),
                "available": o.available,
                **({"reservation": _reservation_json(o.reservation)} if o.reservation else {}),
            }
            for o in sorted(
                t.offerings,
                key=lambda o: (o.capacity_type, o.zone, o.reservation.id if o.reservation else ""),
            )
        ],
    }


def _reservation_json(r: Reservation) -> dict[str, Any]:
    return {
        "id": r.id,
        "type": r.kind,
        "free": r.free,
        "total": r.total,
        "endsAt": r.ends_at.isoformat() if r.ends_at else None,
        "hourlyPrice": round(r.hourly_price, 6),
    }


def _reserved(t: InstanceType) -> str:
    held = [o.reservation for o in t.offerings if o.reservation is not None]
    return f"{sum(r.free for r in held)}/{sum(r.total for r in held)}" if held else "-"


def _price(t: InstanceType, capacity_type: str) -> str:
    prices = [o.price for o in t.offerings if o.capacity_type == capacity_type and o.available]
    return f"{min(prices):.4f}" if prices else "-"


def _row(t: InstanceType) -> tuple[str, ...]:
    """One type's cells, in the order of `CSV_COLUMNS` (and of the table's headers)."""
    gpu = f"{t.gpu.count}x {t.gpu.name} {t.gpu.memory_mib // 1024}GiB" if t.gpu else "-"
    zones = sorted({o.zone for o in t.offerings if o.available})
    return (
        t.name,
        str(t.vcpu),
        f"{t.memory_mib / 1024:g}",
        gpu,
        str(len(zones)),
        _price(t, "spot"),
        _price(t, "on-demand"),
        _reserved(t),
    )


def table(types: list[InstanceType]) -> str:
    """A fixed-width table: one line per type, the cheapest available spot and on-demand price, and
    (when the account has any) the instances free/held in its reservations."""
    held = any(o.reservation is not None for t in types for o in t.offerings)
    header: tuple[str, ...] = (
        "Instance type",
        "vCPU",
        "Memory GiB",
        "GPU",
        "Zones",
        "Spot $/h",
        "On-demand $/h",
    )
    header += ("Reserved",) if held else ()
    rows = [header] + [row[: len(header)] for row in map(_row, types)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {1, 2, 4, 5, 6, 7}
    lines = [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


@app.command("catalog")
def catalog_command(
    cloud: str = typer.Option(
        ...,
        "--cloud",
        help=_cloud_help(),
    ),
    region: str | None = typer.Option(None, "--region", help=_region_help()),
    gpu: bool = typer.Option(False, "--gpu", help="Only types with GPUs."),
    gpu_name: str | None = typer.Option(
        None, "--gpu-name", help="Only this GPU model (h100, a100, l4, t4...)."
    ),
    output: str | None = out.output_option(FORMATS),
    write: Path | None = out.write_option(),
    offline: bool = typer.Option(False, "--offline", help="Print the built-in catalog; no network."),
    project: str | None = typer.Option(None, "--project", help=_project_help()),
    endpoint: str | None = typer.Option(
        None,
        "--endpoint",
        help=_endpoint_help(),
    ),
) -> None:
    """What a pool could launch in a region: shapes, GPUs, zones and prices per capacity type."""
    fmt = out.resolve(output, write, allowed=FORMATS)
    allowed = catalog_.names() if offline else _online()
    if cloud not in allowed:
        raise _fail(
            f"{cloud!r} is not one of {', '.join(allowed)}" + ("" if offline else " (or use --offline)"),
            flag="--cloud",
        )
    region = region or (catalog_.default_region(cloud) if offline else _default_region(cloud))
    try:
        if offline:
            types = catalog_.load(cloud, region)
        else:
            types = _read_cloud(cloud, region=region, project=project, endpoint=endpoint)
    except catalog_.CatalogError as err:
        raise _fail(str(err)) from None
    except CloudProviderError as err:
        raise _fail(f"reading {cloud} {region}: {type(err).__name__}: {err}") from None
    except ImportError as err:
        raise _fail(f"the {cloud} provider is not available: {err}") from None
    if gpu or gpu_name:
        types = [t for t in types if t.gpu is not None and t.gpu.count > 0]
    if gpu_name:
        types = [t for t in types if t.gpu is not None and t.gpu.name == gpu_name.lower()]
    types = sorted(types, key=sort_key)
    if fmt == "table":
        text = table(types) + "\n"
    elif fmt == "csv":
        text = csv_text(CSV_COLUMNS, [_row(t) for t in types])
    else:
        text = dump([instance_type_json(t) for t in types], fmt)
    out.emit(text, write)
