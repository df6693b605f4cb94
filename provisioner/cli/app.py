"""The one typer app of the `provisioner` command. Subcommand modules import it and add their commands;
`main.py` imports them all, so this module imports none of them (no cycle)."""

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
