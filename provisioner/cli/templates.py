"""`provisioner templates ...`: check NodePool/NodeClass YAML and convert Karpenter's.

Wiring and printing only: validation lives in `provisioner.api.documents`, conversion in
`provisioner.api.karpenter`. Problems print one per line as `FILE:LINE: Kind/name: field.path: message`
on stdout; the summary goes to stderr. User errors never end in a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from provisioner.api import documents, karpenter, karpenter_objects, karpenter_providers
from provisioner.cli import output as out
from provisioner.cli.app import app
from provisioner.cloudprovider import catalog

IMPORT_FORMATS = ("yaml", "json")

templates = typer.Typer(
    name="templates",
    help="Validate NodePool and NodeClass templates; import Karpenter's.",
    no_args_is_help=True,
)
app.add_typer(templates, name="templates")


@templates.command("validate")
def validate(
    paths: list[Path] = typer.Argument(
        ..., help="YAML files, folders searched for *.yaml and *.yml, or - for standard input."
    ),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors (exit 1 on any)."),
    allow_oversubscription: bool = typer.Option(
        False,
        "--allow-oversubscription",
        help="Quotas that promise more than a department or a pool holds are warnings, not errors.",
    ),
) -> None:
    """Validate NodePool, NodeClaim, AWSNodeClass, GCPNodeClass, Team and Department documents.

    Exit 0 when every document is valid (warnings allowed); else exit 1, one line per problem.
    """
    stdin = sys.stdin.read() if any(str(p) == "-" for p in paths) else None
    report = documents.validate_paths(
        paths, stdin=stdin, allow_oversubscription=allow_oversubscription, resources=catalog_resources()
    )
    for problem in report.sorted_problems():
        typer.echo(str(problem))
    errors, warnings = len(report.errors), len(report.warnings)
    summary = f"{out.plural(report.files, 'file')}, {out.plural(report.documents, 'document')}: "
    if errors or warnings:
        summary += f"{out.plural(errors, 'error')}, {out.plural(warnings, 'warning')}"
    else:
        summary += "all valid"
    typer.echo(summary, err=True)
    if errors or (strict and warnings):
        raise typer.Exit(1)


@templates.command("import-karpenter")
def import_karpenter(
    files: list[Path] = typer.Argument(
        ..., help="Karpenter YAML files (karpenter.sh/v1, and its cloud providers' v1 NodeClasses)."
    ),
    output: str | None = out.output_option(IMPORT_FORMATS),
    write: Path | None = out.write_option(folder=True),
) -> None:
    """Convert Karpenter NodePools and its providers' NodeClasses (the EC2NodeClass) into provisioner.sh/v1
    NodePools and our plug-ins' NodeClasses (the AWSNodeClass), as each plug-in declares.

    Whatever cannot be carried over is printed (stderr) as a warning naming the field, then a migration
    report: what changed meaning (a pool named `default`, weights, labels read off type names such as
    EC2's instance category, generation and size, read against the cloud's catalog) and what to check.
    The result is then validated; exit 1 when a file cannot be read or converted, or the result does not
    validate.
    """
    fmt = out.resolve(
        output, write if write is not None and write.suffix else None, allowed=IMPORT_FORMATS, default="yaml"
    )
    instance_types = {
        p.name_derived.catalog: sorted(t.name for t in catalog.load(p.name_derived.catalog))
        for p in karpenter_providers.PROVIDERS
        if p.name_derived is not None
    }
    notes: list[karpenter_objects.Note] = []
    failed = False
    converted_count = warning_count = 0
    outputs: list[tuple[str, str, list[dict[str, Any]]]] = []  # (output name, source file name, objects)
    used_names: set[str] = set()
    for file in files:
        try:
            docs = documents.read_yaml_file(file)
        except documents.DocumentError as err:
            typer.echo(str(err.problem), err=True)
            failed = True
            continue
        conversion = karpenter.convert_documents(docs, instance_types=instance_types)
        notes.extend(n for n in conversion.notes if n not in notes)
        for problem in sorted(conversion.problems, key=lambda p: (p.line, p.path)):
            typer.echo(str(problem), err=True)
        failed = failed or not conversion.ok
        converted_count += conversion.converted
        warning_count += sum(not p.is_error for p in conversion.problems)
        if not conversion.objects:
            typer.echo(f"{file}: nothing to convert", err=True)
            continue
        name = file.stem
        while name in used_names:
            name += "-1"
        used_names.add(name)
        outputs.append((name, file.name, conversion.objects))
    texts = _converted_texts(outputs, fmt=fmt, write=write)
    # The converted set is validated as one, so a NodePool and the EC2NodeClass it names, given in two
    # files, do not warn about each other.
    converted: list[documents.YamlDocument] = []
    for target, text in texts:
        if target is None:
            typer.echo(text, nl=False)
        else:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            except OSError as err:
                typer.echo(f"error: --write: cannot write {target}: {err.strerror or err}", err=True)
                failed = True
                continue
            typer.echo(f"wrote {target}", err=True)
        converted.extend(documents.parse_yaml_documents(text, source=str(target or "<converted>")))
    report = documents.validate_documents(converted)
    for problem in report.sorted_problems():
        typer.echo(f"{problem} (in the converted output)", err=True)
    failed = failed or not report.ok
    _print_report(notes)
    typer.echo(
        f"{out.plural(converted_count, 'object')} converted from {out.plural(len(files), 'file')}, "
        f"{out.plural(warning_count, 'field')} not carried over (see the warnings above)"
        + ("; the result does not validate" if not report.ok else ""),
        err=True,
    )
    if failed:
        raise typer.Exit(1)


def _converted_texts(
    outputs: list[tuple[str, str, list[dict[str, Any]]]], *, fmt: str, write: Path | None
) -> list[tuple[Path | None, str]]:
    """(where, text) to write: stdout (None) or one file holding everything, or one file per input in a
    folder; YAML documents with a header naming the source, or JSON (a `kind: List` per file)."""

    def text_of(items: list[tuple[str, str, list[dict[str, Any]]]]) -> str:
        if fmt == "json":
            objects = [o for _, _, objs in items for o in objs]
            return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
        return "---\n".join(
            f"# Converted from {source} by `provisioner templates import-karpenter`.\n"
            + "---\n".join(yaml.safe_dump(o, sort_keys=False, width=120, allow_unicode=True) for o in objs)
            for _, source, objs in items
        )

    if not outputs:
        return []
    if write is None or write.suffix:
        return [(write, text_of(outputs))]
    ext = ".json" if fmt == "json" else ".yaml"
    return [(write / f"{name}{ext}", text_of([item])) for item in outputs for name in [item[0]]]


def catalog_resources() -> frozenset[str]:
    """Every resource some instance type of the built-in catalogs offers (what limits and quotas may name)."""
    return frozenset(
        resource
        for name in catalog.names()
        for region in catalog.regions(name)
        for it in catalog.load(name, region)
        for resource in it.capacity
    )


def _print_report(notes: list[karpenter_objects.Note]) -> None:
    """The migration report on stderr: what changed meaning, then what to check."""
    for section, title in (("changed", "Changed meaning"), ("check", "To check")):
        lines = [n for n in notes if n.section == section]
        if lines:
            typer.echo(f"{title}:", err=True)
            for note in lines:
                typer.echo(f"  - {note}", err=True)
