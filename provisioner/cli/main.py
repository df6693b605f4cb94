"""Registers every subcommand group on the one typer app."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="provisioner",
    help="Autoscaling provisioner for GPU fleets on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Autoscaling provisioner for GPU fleets on Kubernetes."""


# Each module adds its commands to `app` when imported; SDKs are imported inside the commands that use them.
from provisioner.cli import catalog, crds, report, run, simulate, templates  # noqa: E402, F401


def main() -> None:
    app()
