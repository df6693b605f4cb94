"""One convention for every command's output, as kubectl users expect it: `-o/--output` names the format
(table, json, csv, html... as the command allows) and `--write FILE` names the file to write instead of
stdout. Without `-o`, the format follows the file's extension (`.html`, `.csv`, `.json`; `.txt` is a
table), and an extension that names no format is refused rather than guessed. Tables printed to a
terminal fit its width.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import typer

EXTENSIONS = {".html": "html", ".htm": "html", ".csv": "csv", ".json": "json", ".txt": "table"}

WRITE_HELP = "Write to this file instead of stdout (the format follows its extension unless -o says)."


def fail(message: str, *, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def format_of(path: Path, *, allowed: Sequence[str], flag: str = "--write") -> str:
    """The format a file's extension names, or exit 2 saying which extensions are allowed."""
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None or fmt not in allowed:
        known = ", ".join(ext for ext, f in EXTENSIONS.items() if f in allowed and ext != ".htm")
        raise fail(f"{flag} {path}: the extension does not name a format; use one of {known}")
    return fmt


def resolve(output: str | None, write: Path | None, *, allowed: Sequence[str], default: str = "table") -> str:
    """The format: `-o` when given (checked against `allowed`), else the `--write` file's extension,
    else `default`."""
    if output is not None:
        if output not in allowed:
            raise fail(f"-o {output!r} is not a format of this command; allowed: {', '.join(allowed)}")
        return output
    if write is not None:
        return format_of(write, allowed=allowed)
    return default


def terminal_width() -> int | None:
    """The width of the terminal stdout prints to; None when stdout is not a terminal (no limit)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def emit(text: str, write: Path | None) -> None:
    """Print `text`, or write it to the file and say so on stderr."""
    if write is None:
        typer.echo(text, nl=False)
        return
    if not write.parent.is_dir():
        raise fail(f"cannot write {write}: no directory {write.parent}")
    try:
        write.write_text(text, encoding="utf-8")
    except OSError as err:
        raise fail(f"cannot write {write}: {err.strerror or err}") from None
    typer.echo(f"wrote {write}", err=True)
