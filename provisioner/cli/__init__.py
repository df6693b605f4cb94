"""The `provisioner` command. Each group of subcommands lives in its own module of this package and is
registered in `main.py`; this package holds only wiring and printing, never decisions."""

from provisioner.cli.main import app, main

__all__ = ["app", "main"]
