"""`provisioner templates ...`: check NodePool/NodeClass YAML and convert Karpenter's.

Wiring and printing only: validation lives in `provisioner.api.documents`, conversion in
`provisioner.api.karpenter`. Problems print one per line as `FILE:LINE: Kind/name: field.path: message`
on stdout; the summary goes to stderr. User errors never end in a traceback.
"""

from __future__ import annotations

from pathlib import Path

import typer

from provisioner.api import documents
from provisioner.cli.main import app

templates = typer.Typer(
    name="templates",
    help="Validate NodePool and NodeClass templates; import Karpenter's.",
    no_args_is_help=True,
)
app.add_typer(templates, name="templates")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@templates.command("validate")
def validate(
    paths: list[Path] = typer.Argument(..., help="YAML files, or folders searched for *.yaml and *.yml."),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors (exit 1 on any)."),
) -> None:
    """Validate NodePool, NodeClaim, AWSNodeClass and GCPNodeClass documents.

    Exit 0 when every document is valid (warnings allowed); else exit 1, one line per problem.
    """
    report = documents.validate_paths(paths)
    for problem in report.sorted_problems():
        typer.echo(str(problem))
    errors, warnings = len(report.errors), len(report.warnings)
    summary = f"{_plural(report.files, 'file')}, {_plural(report.documents, 'document')}: "
    if errors or warnings:
        summary += f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
    else:
        summary += "all valid"
    typer.echo(summary, err=True)
    if errors or (strict and warnings):
        raise typer.Exit(1)
