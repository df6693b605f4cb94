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


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"provisioner {version('provisioner')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("provisioner (not installed: no version)")
        raise typer.Exit()


@app.callback()
def _root(
    _show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Autoscaling provisioner for GPU fleets on Kubernetes.

    Output convention: -o/--output names the format (table, json, csv, html where the command has it);
    --write FILE writes to a file instead of stdout.
    """
