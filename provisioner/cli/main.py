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


def _register() -> None:
    # Each module adds its commands to `app` (or a sub-typer) when imported. Keep one line per module.
    import importlib

    for module in ("templates", "crds", "simulate", "catalog", "run", "report"):
        try:
            importlib.import_module(f"provisioner.cli.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"provisioner.cli.{module}":
                raise


_register()


def main() -> None:
    app()
