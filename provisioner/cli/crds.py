"""`provisioner crds` and `provisioner chart`: what the Helm chart holds that is generated, not written.

`crds` prints the CustomResourceDefinitions generated from the API models, or writes them (one file per
CRD into a folder, or all into one file ending in .yaml). `chart` prints what the chart holds of each
installed provider plug-in (its `providers/NAME.yaml`, provisioner.cloudprovider.chart_files), or writes
every generated file into a chart folder: the CRDs, those files, and the plug-ins' part of
values.schema.json and values.yaml.
"""

from __future__ import annotations

from pathlib import Path

import typer

from provisioner.api import crds as api_crds
from provisioner.cli import output as out
from provisioner.cli.app import app
from provisioner.cloudprovider import chart_files, registry

FORMATS = ("yaml",)


@app.command("crds")
def crds_command(
    output: str | None = out.output_option(FORMATS),
    write: Path | None = out.write_option(folder=True),
) -> None:
    """Print the CRDs (NodePool, NodeClaim, every plug-in's NodeClass, Team, Department) as
    multi-document YAML, e.g. for `kubectl apply -f -` (or `--write charts/provisioner/crds`)."""
    out.resolve(output, None, allowed=FORMATS, default="yaml")
    if write is None or write.suffix in (".yaml", ".yml"):
        out.emit(api_crds.multi_document_yaml(), write)
        return
    _write_all(write, api_crds.files())


@app.command("chart")
def chart_command(
    output: str | None = out.output_option(FORMATS),
    write: Path | None = typer.Option(
        None,
        "--write",
        help="Write every generated file into this chart folder (charts/provisioner): crds/, providers/, "
        "the plug-ins' part of values.schema.json and values.yaml; or print into one file ending in .yaml.",
    ),
) -> None:
    """Print what the Helm chart holds of each installed provider plug-in (providers/NAME.yaml: its flags,
    required values, RBAC resources, ServiceAccount annotations) as multi-document YAML, or refresh a
    chart with `--write charts/provisioner` after adding or changing a plug-in."""
    out.resolve(output, None, allowed=FORMATS, default="yaml")
    plugins = registry.plugins()
    try:
        pieces = chart_files.provider_files(plugins)
    except ValueError as err:
        raise out.fail(str(err), code=1) from None
    if write is None or write.suffix in (".yaml", ".yml"):
        out.emit("---\n".join(pieces.values()), write)
        return
    try:
        schema = (write / chart_files.SCHEMA_FILE).read_text(encoding="utf-8")
        values = (write / chart_files.VALUES_FILE).read_text(encoding="utf-8")
    except OSError as err:
        raise out.fail(
            f"{write} is not a chart folder: cannot read {err.filename}: {err.strerror or err}",
            flag="--write",
        ) from None
    generated = chart_files.chart_files(plugins, schema=schema, values=values)
    _write_all(write, {**{f"crds/{n}": t for n, t in api_crds.files().items()}, **generated})


def _write_all(folder: Path, files: dict[str, str]) -> None:
    """Write `files` (path relative to `folder` -> text), saying each on stderr."""
    try:
        for name, text in files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {target}", err=True)
    except OSError as err:
        raise out.fail(f"cannot write {folder}: {err.strerror or err}", flag="--write", code=1) from None
