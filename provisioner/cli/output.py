"""One convention for every command's output, as kubectl users expect it (README "Output"):

- `-o/--output` names the format (table, json, yaml, csv, html... as the command allows; its help says
  `Format: ...`), and `--write FILE` names the file to write instead of stdout. Without `-o`, the format
  follows the file's extension (`.html`, `.csv`, `.json`, `.yaml`; `.txt` is a table); an extension that
  names no format is refused rather than guessed. Tables printed to a terminal fit its width.
- Headers: tables and HTML say them in words with a capital first letter (`Instance type`, `$/h`); CSV
  columns are snake_case keys (`instance_type`); JSON and YAML keys camelCase (`instanceType`).
- Errors, on stderr: a problem in an input file is `FILE:LINE: Kind/name: field: message`; a bad flag
  is `error: --flag: message` (exit 2).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import typer

from provisioner.finops.reports.text import plural

__all__ = ["EXTENSIONS", "WRITE_HELP", "emit", "fail", "format_of", "plural", "resolve", "to_write"]

EXTENSIONS = {
    ".html": "html",
    ".htm": "html",
    ".csv": "csv",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".txt": "table",
}

WRITE_HELP = "Write to this file instead of stdout (the format follows its extension unless -o says)."


def fail(message: str, *, flag: str | None = None, code: int = 2) -> typer.Exit:
    """Print `error: --flag: message` (or `error: message`) on stderr; the Exit to raise."""
    typer.echo(f"error: {flag}: {message}" if flag else f"error: {message}", err=True)
    return typer.Exit(code)


def output_option(formats: Sequence[str], *, default: str | None = None) -> Any:
    """The `-o/--output` option of a command, its help listing the formats (the walking test reads it)."""
    listed = ", ".join(formats[:-1]) + f" or {formats[-1]}" if len(formats) > 1 else formats[0]
    return typer.Option(
        default,
        "-o",
        "--output",
        help=f"Format: {listed}. Default: the --write file's extension, else {formats[0]}.",
    )


def write_option(*, folder: bool = False) -> Any:
    """The `--write` option; `folder`: the command writes one file per object into a folder unless the
    path names a .yaml file."""
    if folder:
        return typer.Option(
            None,
            "--write",
            help="Write one file per object into this folder, or all into one file ending in .yaml.",
        )
    return typer.Option(None, "--write", help=WRITE_HELP)


def format_of(path: Path, *, allowed: Sequence[str], flag: str = "--write") -> str:
    """The format a file's extension names, or exit 2 saying which extensions are allowed."""
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None or fmt not in allowed:
        known = ", ".join(
            ext for ext, f in EXTENSIONS.items() if f in allowed and ext not in (".htm", ".yml")
        )
        raise fail(f"{path}: the extension does not name a format; use one of {known}", flag=flag)
    return fmt


def resolve(output: str | None, write: Path | None, *, allowed: Sequence[str], default: str = "table") -> str:
    """The format: `-o` when given (checked against `allowed`), else the `--write` file's extension,
    else `default`."""
    if output is not None:
        if output not in allowed:
            raise fail(
                f"{output!r} is not a format of this command; allowed: {', '.join(allowed)}", flag="--output"
            )
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
        raise fail(f"cannot write {write}: no directory {write.parent}", flag="--write")
    try:
        write.write_text(text, encoding="utf-8")
    except OSError as err:
        raise fail(f"cannot write {write}: {err.strerror or err}", flag="--write") from None
    typer.echo(f"wrote {write}", err=True)


@contextlib.contextmanager
def to_write(write: Path | None) -> Iterator[None]:
    """What the block prints to stdout goes to the `--write` file instead (when one is given)."""
    if write is None:
        yield
        return
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield
    emit(buffer.getvalue(), write)
