"""Wires the command: every subcommand module adds its commands to `app.app` when imported; SDKs are
imported inside the commands that use them."""

from __future__ import annotations

# Imported for the commands each one registers on `app`.
from provisioner.cli import catalog, crds, report, run, simulate, templates  # noqa: F401
from provisioner.cli.app import app


def main() -> None:
    app()
