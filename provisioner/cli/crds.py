"""`provisioner crds`: print the CustomResourceDefinitions generated from the API models, or write them."""

from __future__ import annotations

from pathlib import Path

import typer

from provisioner.api import crds as api_crds
from provisioner.cli.app import app


@app.command("crds")
def crds_command(
    write: Path | None = typer.Option(
        None,
        "--write",
        help="Write one file per CRD into this folder (e.g. charts/provisioner/crds) instead of printing.",
        file_okay=False,
    ),
) -> None:
    """Print the CRDs (NodePool, NodeClaim, AWSNodeClass, GCPNodeClass) as multi-document YAML."""
    if write is None:
        typer.echo(api_crds.multi_document_yaml(), nl=False)
        return
    try:
        write.mkdir(parents=True, exist_ok=True)
        for name, text in api_crds.files().items():
            (write / name).write_text(text, encoding="utf-8")
            typer.echo(f"wrote {write / name}", err=True)
    except OSError as err:
        typer.echo(f"error: cannot write {write}: {err.strerror or err}", err=True)
        raise typer.Exit(1) from None
