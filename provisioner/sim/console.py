"""`provisioner simulate` on a timeline scenario, as a person or a script sees it: a progress bar on stderr
while the virtual day runs, then tables (the timeline, every disruption action, the nodes alive at the end)
or the JSON document, and the scale-down HTML report when `--report` names a file.

Wiring and printing only: `provisioner.sim.runner` runs, `provisioner.sim.output` shapes the results.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from provisioner.api import durations
from provisioner.finops.ledger import Ledger
from provisioner.finops.reports.text import plural
from provisioner.sim import gangs as sim_gangs
from provisioner.sim import output as output_
from provisioner.sim import static
from provisioner.sim.loaded import LoadedScenario
from provisioner.sim.records import RunResult
from provisioner.sim.runner import Runner
from provisioner.sim.timeline import Timeline


def run(
    loaded: LoadedScenario,
    timeline: Timeline,
    *,
    fmt: str = "table",
    report: Path | None,
    report_format: str | None = None,
    ledger_path: Path | None = None,
    best_possible: bool = False,
) -> None:
    """Run the timeline and print; exit 2 when the report or the ledger cannot be written."""
    err = Console(stderr=True)
    for what, path in (("the report", report), ("the ledger", ledger_path)):
        if path is not None and not path.parent.is_dir():
            # Say so before the run, not after it.
            typer.echo(f"error: cannot write {what} {path}: no directory {path.parent}", err=True)
            raise typer.Exit(2)
    if ledger_path is not None and ledger_path.exists():
        typer.echo(f"error: {ledger_path} exists; a run's ledger goes to a new file", err=True)
        raise typer.Exit(2)
    # The controllers log what they do (an interruption is a warning in production); the run's tables say
    # it here, so their log lines would only break the progress bar.
    quiet = logging.getLogger("provisioner")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    # The run's own ledger: in memory unless --ledger names a file. The report and the JSON are read from
    # it, so it stays open until they are written. (In memory, a day's hundreds of evaluations cost no
    # disk sync; a file is copied out at the end.)
    with Ledger("sqlite://") as ledger, _without_cycle_collection():
        try:
            result = _run(
                loaded,
                timeline,
                err=err,
                ledger=ledger,
                ledger_path=ledger_path,
                best_possible=best_possible,
                # Blocker rows are read by the full report and from a saved ledger only; usage rows
                # from the ledger by a saved ledger only (the run's result keeps its own).
                keep_blockers=report is not None or ledger_path is not None,
                save_usage=ledger_path is not None,
            )
        finally:
            quiet.setLevel(level)
        _finish(loaded, result, err=err, fmt=fmt, report=report, report_format=report_format or "html")
    if ledger_path is not None:
        err.print(
            f"wrote the run's ledger to {ledger_path} (provisioner report scale-down --ledger {ledger_path})"
        )


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector off while a run and its output are made, back as it was after.

    A run allocates millions of objects that live to its end and makes almost none in cycles: 2,558
    objects of cyclic garbage in a 100,000-pod run, as in a 20-pod one (set-up's), so the peak RSS is the
    same within 1%. The collector's young collections walked every new survivor all the same: 3.6 CPU s
    of a 100,000-pod run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run(
    loaded: LoadedScenario,
    timeline: Timeline,
    *,
    err: Console,
    ledger: Ledger,
    ledger_path: Path | None,
    best_possible: bool = False,
    keep_blockers: bool = True,
    save_usage: bool = True,
) -> RunResult:
    total = timeline.duration.total_seconds()
    with Progress(
        TextColumn("[bold]simulating[/bold] {task.description}"),
        BarColumn(),
        TextColumn("{task.fields[at]} of {task.fields[of]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task(
            loaded.scenario.metadata.name or loaded.source,
            total=total,
            at="0s",
            of=durations.format_duration(timeline.duration),
        )

        def advance(elapsed: timedelta) -> None:
            progress.update(
                task,
                completed=min(total, elapsed.total_seconds()),
                at=durations.format_duration(elapsed),
            )

        result = Runner(
            loaded,
            timeline,
            ledger=ledger,
            progress=advance,
            note_demand=best_possible,
            keep_blockers=keep_blockers,
            save_usage=save_usage,
        ).run()
    if best_possible:
        from provisioner.sim.best import best_rows

        with err.status("solving the best possible cost, interval by interval (HiGHS)"):
            result.best = best_rows(loaded, result)
        ledger.record_best(result.best)
        if not result.best:
            err.print("no best possible cost: the run used reservations, or had too many pods to solve")
    if ledger_path is not None:
        _save(ledger, ledger_path)
    return result


def _save(ledger: Ledger, path: Path) -> None:
    """Copy the in-memory ledger to a SQLite file (SQLite's own backup: every table, the schema revision)."""
    raw = ledger.engine.raw_connection()
    try:
        import sqlite3

        target = sqlite3.connect(path)
        try:
            raw.driver_connection.backup(target)  # type: ignore[union-attr]
        finally:
            target.close()
    finally:
        raw.close()


def _finish(
    loaded: LoadedScenario,
    result: RunResult,
    *,
    err: Console,
    fmt: str,
    report: Path | None,
    report_format: str,
) -> None:
    if report is not None:
        try:
            report.write_text(output_.report(result, fmt=report_format), encoding="utf-8")
        except OSError as e:
            typer.echo(f"error: cannot write the report {report}: {e.strerror or e}", err=True)
            raise typer.Exit(2) from None
    doc = output_.to_json(result)
    if fmt != "table":
        typer.echo(static.document_text(doc, fmt), nl=False)
    else:
        _print(loaded, result, doc)
    if report is not None:
        err.print(f"wrote the scale-down report ({report_format}) to {report}")


def _money(value: float) -> str:
    return f"${value:,.2f}/h"


def _print(loaded: LoadedScenario, result: RunResult, doc: dict[str, Any]) -> None:
    probe = Console()
    console = probe if probe.is_terminal else Console(width=200)
    console.print(
        f"[bold]{loaded.source}[/bold]: catalog {loaded.where}, "
        f"{doc['duration']} of virtual time in {result.ticks} controller steps, "
        f"{plural(len(doc['nodeClaims']), 'node')} launched, {plural(len(doc['actions']), 'disruption action')}"
    )
    table = Table(title="Timeline", title_justify="left")
    table.add_column("At", justify="right")
    table.add_column("$/h before", justify="right")
    table.add_column("Nodes", justify="right")
    table.add_column("What happens")
    table.add_row(
        "0s", _money(0), str(len(loaded.nodes)), f"the scenario's documents: {len(loaded.pods)} pending pods"
    )
    for s in doc["timeline"]:
        table.add_row(s["at"], _money(s["costPerHourBefore"]), str(s["nodesBefore"]), escape(s["do"]))
    table.add_row("end", _money(doc["costPerHour"]), str(len(doc["nodes"])), "")
    console.print(table)

    launches = Table(title="Nodes launched", title_justify="left")
    for col in ("Node", "NodePool", "Instance type", "GPUs", "Capacity", "Zone", "$/h", "Up", "Down", "Pods"):
        launches.add_column(col, justify="right" if col in ("$/h", "Pods") else "left")
    for c in doc["nodeClaims"]:
        gpu = c["gpu"]
        launches.add_row(
            c["name"],
            c["nodePool"],
            c["instanceType"],
            f"{gpu['count']}x {gpu['name']}" if gpu else "-",
            c["capacityType"],
            c["zone"],
            f"{c['pricePerHour']:.4f}",
            _clock(result, c["launchedAt"]),
            _clock(result, c["deletedAt"]) if c["deletedAt"] else "-",
            str(len(c["pods"])),
        )
    console.print(launches)
    if doc.get("gangs"):
        console.print(sim_gangs.table(doc["gangs"]))

    if doc["actions"]:
        actions = Table(title="Disruption actions (ledger rows)", title_justify="left")
        for col in ("At", "Action", "Method", "Node", "Reason", "Was", "Replacement", "Saved $/h", "Pods"):
            actions.add_column(col, justify="right" if col in ("At", "Saved $/h", "Pods") else "left")
        for a in doc["actions"]:
            actions.add_row(
                a["at"],
                a["action"],
                a["method"],
                a["node"],
                a["reason"],
                f"{a['instanceType']} {a['capacityType']} ${a['pricePerHour']:.4f}",
                f"{a['replacement']} {a['replacementCapacityType']}" if a["replacement"] else "-",
                f"{a['savingsPerHour']:.4f}",
                str(len(a["pods"])),
            )
        console.print(actions)
    if doc["events"]:
        events = Table(title="What the controllers said (Events)", title_justify="left")
        for col in ("At", "Object", "Reason", "Message"):
            events.add_column(col, justify="right" if col == "At" else "left")
        for e in doc["events"]:
            if e["kind"] == "NodePool":
                continue  # the claim's own event says the same
            message = e["message"] if len(e["message"]) <= 110 else e["message"][:107] + "..."
            where = f"{e['namespace']}/{e['name']}" if e.get("namespace") else e["name"]
            events.add_row(e["at"], f"{e['kind']}/{where}", e["reason"], escape(message))
        console.print(events)
    if doc["reservations"]:
        reserved = Table(title="Reservations (paid whether used or not)", title_justify="left")
        columns = (
            ("Reservation", "id"),
            ("Type", "instanceType"),
            ("Zone", "zone"),
            ("Instances", "instances"),
            ("Used %", "utilization"),
            ("Paid $", "cost"),
            ("Idle $", "idleCost"),
            ("Idle GPU-hours", "gpuIdleHours"),
        )
        for col, _ in columns:
            reserved.add_column(col, justify="left" if col in ("Reservation", "Type", "Zone") else "right")
        for r in doc["reservations"]["reservations"]:
            reserved.add_row(
                *(escape(f"{r[key]:,}" if isinstance(r[key], int | float) else r[key]) for _, key in columns)
            )
        console.print(reserved)
    if result.state.teams:
        from provisioner.quota import report as teams_report

        values = teams_report.written_rows(
            list(result.state.teams.values()), list(result.state.departments.values())
        )
        if values:
            teams = Table(
                title="Teams and departments at the end (quota and use per pool)", title_justify="left"
            )
            for col in teams_report.HEADERS:
                teams.add_column(
                    col,
                    justify="left"
                    if col in ("Kind", "Name", "Department", "NodePool", "Resource")
                    else "right",
                )
            for row in values:
                teams.add_row(*(escape(v) for v in row))
            console.print(teams)
    held = [u for u in doc["unschedulable"] if u["pod"] in result.held]
    if held:
        waiting = Table(title="Waiting for admission at the end", title_justify="left", show_lines=True)
        for col in ("Pod", "NodePool", "Why not"):
            waiting.add_column(col)
        for u in held:
            for i, r in enumerate(u["reasons"]):
                waiting.add_row(
                    escape(u["pod"]) if i == 0 else "", escape(r["nodePool"]), escape(r["reason"])
                )
        console.print(waiting)
    if doc["completedPods"]:
        console.print(f"Pods that finished their run time: {escape(', '.join(doc['completedPods']))}")
    if doc["unschedulable"]:
        console.print(f"Pending at the end: {escape(', '.join(u['pod'] for u in doc['unschedulable']))}")
    money = doc["finops"]
    console.print(
        f"[bold]{plural(len(doc['nodes']), 'node')}[/bold] at the end, [bold]{_money(doc['costPerHour'])}[/bold]; "
        f"paid [bold]${doc['cost']:,.2f}[/bold] over {doc['duration']}; "
        f"disruption saved {_money(money['savingsPerHour'])} in {plural(len(doc['actions']), 'action')}, "
        f"realized [bold]${money['realizedSavings']:,.2f}[/bold]; "
        f"{plural(len(doc['unschedulable']), 'pod')} pending at the end"
    )
    if doc["reservations"]:
        total = doc["reservations"]["total"]
        console.print(
            f"reservations: paid [bold]${total['cost']:,.2f}[/bold] (used or not), {total['utilization']}% used, "
            f"idle ${total['idleCost']:,.2f} and {total['gpuIdleHours']:,} GPU-hours"
        )


def _clock(result: RunResult, stamp: str | None) -> str:
    if not stamp:
        return "-"
    from provisioner.clock import parse_time

    when = parse_time(stamp)
    assert when is not None
    return durations.format_duration(when - result.start)
