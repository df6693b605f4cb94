"""The `provisioner` command. The typer app lives in `app.py`; each group of subcommands lives in its
own module and registers on it; `main.py` imports them all. This package holds only wiring and printing,
never decisions."""

from provisioner.cli.app import app
from provisioner.cli.main import main

__all__ = ["app", "main"]
