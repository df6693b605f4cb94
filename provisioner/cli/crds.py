"""`provisioner crds`: print the CustomResourceDefinitions generated from the API models, or write them
(one file per CRD into a folder, or all into one file ending in .yaml)."""

from __future__ import annotations

from pathlib import Path

import typer

from provisioner.api import crds as api_crds
from provisioner.cli import output as out
from provisioner.cli.app import app

FORMATS = ("yaml",)


@app.command("crds")
def crds_command(
    output: str | None = out.output_option(FORMATS),
    write: Path | None = out.write_option(folder=True),
) -> None:
    """Print the CRDs (NodePool, NodeClaim, AWSNodeClass, GCPNodeClass, Team, Department) as
    multi-document YAML, e.g. for `kubectl apply -f -` (or `--write charts/provisioner/crds`)."""
    out.resolve(output, None, allowed=FORMATS, default="yaml")
    if write is None or write.suffix in (".yaml", ".yml"):
        out.emit(api_crds.multi_document_yaml(), write)
        return
    try:
        write.mkdir(parents=True, exist_ok=True)
        for name, text in api_crds.files().items():
            (write / name).write_text(text, encoding="utf-8")
            typer.echo(f"wrote {write / name}", err=True)
    except OSError as err:
        raise out.fail(f"cannot write {write}: {err.strerror or err}", flag="--write", code=1) from None
