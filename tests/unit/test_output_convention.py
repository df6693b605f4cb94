"""One output convention for every command (README "Output"), checked by walking the typer app: each
command that prints a result takes `-o/--output` (its help says `Format: ...`) and `--write`; every format
it lists comes out parseable; table headers are words (never snake_case or SHOUTING), CSV columns
snake_case; a bad `-o` is `error: --output: ...`. A new command must join INVOCATIONS or EXEMPT."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.finops.ledger import Ledger
from testkit.builders import NOW, action_row, blocker_row, reservation_row, usage_row

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scenarios" / "demo.yaml"
EXISTING = ROOT / "scenarios" / "existing-cluster.yaml"
TEAMS_NOW = ROOT / "scenarios" / "teams-now.yaml"
KARPENTER = ROOT / "tests" / "data" / "karpenter" / "general-purpose.yaml"
REPORT_AT = (NOW + timedelta(hours=2)).isoformat()

EXEMPT = {
    "run": "a long-running controller: it logs, it prints no result",
    "templates validate": "prints problems in the error style itself; its exit code is the result",
}
"""Commands that print no result document, and why."""


def invocations(ledger: Path) -> dict[str, list[str]]:
    """The arguments that make each command print a result."""
    at = ["--ledger", str(ledger), "--now", REPORT_AT]
    return {
        "catalog": ["--cloud", "aws", "--offline", "--gpu"],
        "chart": [],
        "crds": [],
        "explain": [str(DEMO), "--pod", "ml/giant-pretrain"],
        "simulate": [str(DEMO)],
        "report costs": at,
        "report reservations": at,
        "report scale-down": at,
        "report nodes": ["-f", str(EXISTING)],
        "report nodepools": ["-f", str(EXISTING)],
        "report teams": ["-f", str(TEAMS_NOW)],
        "templates import-karpenter": [str(KARPENTER)],
    }


def commands() -> Iterator[tuple[str, Any]]:
    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(typer.main.get_command(app), [])


COMMANDS = dict(commands())
PRINTING = sorted(set(COMMANDS) - set(EXEMPT))


def formats_of(command: Any) -> list[str]:
    (option,) = [p for p in command.params if "--output" in getattr(p, "opts", ())]
    found = re.match(r"Format: (.*?)\.( |$)", option.help or "")
    assert found, f"the -o help must start with 'Format: a, b or c.'; got {option.help!r}"
    listed = re.sub(r"\s*\([^)]*\)", "", found.group(1))
    return [f.strip() for f in re.split(r",\s*(?:or\s+)?|\s+or\s+", listed) if f.strip()]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite"
    with Ledger(str(path)) as book:
        book.record_actions([action_row("a", command_id="1"), action_row("b", command_id="2", pool="cpu")])
        book.record_blockers([blocker_row()])
        book.record_usage([usage_row("a")])
        book.record_reservations([reservation_row()])
    return path


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_every_command_is_either_checked_or_exempt_with_a_reason(ledger: Path) -> None:
    assert set(COMMANDS) == set(invocations(ledger)) | set(EXEMPT)


@pytest.mark.parametrize("name", PRINTING)
def test_every_printing_command_takes_output_and_write(name: str) -> None:
    opts = {o for p in COMMANDS[name].params for o in getattr(p, "opts", ())}
    assert {"-o", "--output", "--write"} <= opts
    assert formats_of(COMMANDS[name])


def _check(fmt: str, text: str) -> None:
    if fmt == "json":
        json.loads(text)
    elif fmt == "yaml":
        assert list(yaml.safe_load_all(text))
    elif fmt == "csv":
        header = next(csv.reader(io.StringIO(text)))
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", h) for h in header), header
    elif fmt == "focus-csv":
        next(csv.reader(io.StringIO(text)))  # FOCUS names its own columns (BilledCost, ...)
    elif fmt == "html":
        assert "<html" in text.lower()
    else:
        assert fmt == "table", fmt
        assert not re.search(r"\b[a-z]+_[a-z_]+\b", text), "snake_case in a table"
        assert not re.search(r"\b[A-Z]{2,}[ -][A-Z]{2,}\b", text), "SHOUTED headers in a table"


CASES = [(name, fmt) for name in PRINTING for fmt in formats_of(COMMANDS[name])]


@pytest.mark.parametrize(("name", "fmt"), CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_every_format_of_every_command_comes_out_as_it_says(ledger: Path, name: str, fmt: str) -> None:
    result = run(*name.split(), *invocations(ledger)[name], "-o", fmt)
    assert result.exit_code == 0, result.stderr
    _check(fmt, result.stdout)


@pytest.mark.parametrize("name", PRINTING)
def test_write_puts_the_result_in_the_file_named(ledger: Path, name: str, tmp_path: Path) -> None:
    fmt = formats_of(COMMANDS[name])[0]
    target = tmp_path / "out.yaml" if fmt == "yaml" else tmp_path / "out.txt"
    if fmt not in ("yaml", "table"):
        target = tmp_path / f"out.{fmt}"
    printed = run(*name.split(), *invocations(ledger)[name], "-o", fmt)
    written = run(*name.split(), *invocations(ledger)[name], "-o", fmt, "--write", str(target))
    assert written.exit_code == 0, written.stderr
    assert target.exists()
    assert written.stdout == ""
    _check(fmt, target.read_text())
    if fmt in ("json", "yaml", "csv"):
        assert target.read_text() == printed.stdout


@pytest.mark.parametrize("name", PRINTING)
def test_an_unknown_format_is_refused_in_the_flag_error_style(ledger: Path, name: str) -> None:
    result = run(*name.split(), *invocations(ledger)[name], "-o", "nosuch")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output: 'nosuch' is not a format of this command; allowed: ")


def test_a_bad_object_in_a_report_file_is_located_not_a_raw_validation_dump(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: provisioner.sh/v1\nkind: NodePool\nmetadata: {name: bad}\nspec:\n  weight: 500\n"
        "  template:\n    spec:\n      nodeClassRef: {kind: AWSNodeClass, name: x}\n      expireAftr: 3h\n"
    )
    result = run("report", "nodepools", "-f", str(bad))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert [line.split(": ")[0:3] for line in lines] == [
        [f"{bad}:5", "NodePool/bad", "spec.weight"],
        [f"{bad}:9", "NodePool/bad", "spec.template.spec.expireAftr"],
    ]
    assert "pydantic" not in result.stderr


def test_explain_keeps_bracketed_values_in_its_table_and_its_last_line() -> None:
    result = run("explain", str(DEMO), "--pod", "ml/giant-pretrain")
    assert result.exit_code == 0, result.stderr
    assert "provisioner.sh/gpu-name In [h100] conflicts" in result.stdout.replace("\n", " ")
    last = result.stdout[result.stdout.index("In the full solve") :]
    assert "(wanted In [h100])" in " ".join(last.split())
