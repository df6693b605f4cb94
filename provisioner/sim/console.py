"""`provisioner simulate` on a timeline scenario, as a person or a script sees it: a progress bar on stderr
while the virtual day runs, then tables (the timeline, every disruption action, the nodes alive at the end)
or the JSON document, and the scale-down HTML report when `--report` names a file.

Wiring and printing only: `provisioner.sim.runner` runs, `provisioner.sim.output` shapes the results.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from provisioner.api import durations
from provisioner.finops.ledger import Ledger
from provisioner.sim import output as output_
from provisioner.sim.runner import Runner, RunResult
from provisioner.sim.scenario import LoadedScenario
from provisioner.sim.timeline import Timeline


def run(loaded: LoadedScenario, timeline: Timeline, *, as_json: bool, report: Path | None) -> None:
    """Run the timeline and print; exit 2 when the report cannot be written."""
    err = Console(stderr=True)
    if report is not None and not report.parent.is_dir():
        # Say so before the run, not after it.
        typer.echo(f"error: cannot write the report {report}: no directory {report.parent}", err=True)
        raise typer.Exit(2)
    # The controllers log what they do (an interruption is a warning in production); the run's tables say
    # it here, so their log lines would only break the progress bar.
    quiet = logging.getLogger("provisioner")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        result = _run(loaded, timeline, err=err)
    finally:
        quiet.setLevel(level)
    _finish(loaded, result, err=err, as_json=as_json, report=report)


def _run(loaded: LoadedScenario, timeline: Timeline, *, err: Console) -> RunResult:
    total = timeline.duration.total_seconds()
    # The run's own ledger, in memory and gone afterwards: the report and the JSON are read from it. (A
    # file would cost a disk sync per evaluation, and a day is hundreds of evaluations.)
    ledger = Ledger("sqlite://")
    try:
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

            return Runner(loaded, timeline, ledger=ledger, progress=advance).run()
    finally:
        ledger.close()


def _finish(
    loaded: LoadedScenario, result: RunResult, *, err: Console, as_json: bool, report: Path | None
) -> None:
    if report is not None:
        try:
            report.write_text(output_.html_report(result), encoding="utf-8")
        except OSError as e:
            typer.echo(f"error: cannot write the report {report}: {e.strerror or e}", err=True)
            raise typer.Exit(2) from None
    doc = output_.to_json(result)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
    else:
        _print(loaded, result, doc)
    if report is not None:
        err.print(f"wrote the scale-down report to {report}")


def _money(value: float) -> str:
    return f"${value:,.2f}/h"


def _print(loaded: LoadedScenario, result: RunResult, doc: dict) -> None:
    console = Console(width=max(Console().width, 160))
    console.print(
        f"[bold]{loaded.source}[/bold]: catalog {loaded.where}, "
        f"{doc['duration']} of virtual time in {result.ticks} controller steps, "
        f"{len(doc['nodeClaims'])} nodes launched, {len(doc['actions'])} disruption actions"
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
            events.add_row(e["at"], f"{e['kind']}/{e['name']}", e["reason"], escape(message))
        console.print(events)
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
    saved = sum(a["savingsPerHour"] for a in doc["actions"])
    console.print(
        f"[bold]{len(doc['nodes'])} nodes[/bold] at the end, [bold]{_money(doc['costPerHour'])}[/bold]; "
        f"the run's nodes cost [bold]${doc['cost']:,.2f}[/bold] over {doc['duration']}; "
        f"disruption saved {_money(saved)} in {len(doc['actions'])} actions; "
        f"{len(doc['unschedulable'])} pods pending at the end"
    )


def _clock(result: RunResult, stamp: str | None) -> str:
    if not stamp:
        return "-"
    from provisioner.clock import parse_time

    when = parse_time(stamp)
    assert when is not None
    return durations.format_duration(when - result.start)
