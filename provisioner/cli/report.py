"""`provisioner report ...`: the FinOps scale-down report from the ledger, and the node and node-pool
tables from a cluster (a kubeconfig) or a file of Kubernetes objects (a scenario or a state dump).

Wiring and printing only: rows come from `provisioner.finops.ledger`, reports are built by the pure
`provisioner.finops.reports`. User errors print one line and exit 2, never a traceback.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from provisioner.cli import output as out
from provisioner.cli.app import app

if TYPE_CHECKING:  # the commands import what they use when run, so the CLI starts fast
    from provisioner.sim.loaded import LoadedScenario
    from provisioner.state.snapshot import Snapshot

report = typer.Typer(
    name="report",
    help="FinOps reports: scale-down savings, idle cost and churn, reservation utilization; node and "
    "node-pool status tables.",
    no_args_is_help=True,
)
app.add_typer(report, name="report")

LEDGER_ENV = "PROVISIONER_LEDGER"
_SINCE = re.compile(r"^(\d+(?:\.\d+)?)(w|d|h|m|s)$")
_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


_fail = out.fail


def parse_since(text: str, *, now: datetime, flag: str = "--since") -> datetime:
    """`7d`, `36h`, `90m`, `2w`, a Go duration such as `1h30m` (counted back from `now`), or an ISO time
    (UTC when no zone); else exit 2 blaming `flag`."""
    value = text.strip()
    match = _SINCE.match(value)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    from provisioner.api import durations

    try:
        delta = durations.parse_duration(value, allow_never=False)
        assert delta is not None
        return now - delta
    except durations.DurationError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _fail(
            f"{text!r} is not a span such as 7d, 36h, 90m, 2w, nor a time such as 2026-11-01T00:00Z",
            flag=flag,
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ledger_target(target: str | None) -> str:
    from provisioner.finops.database import DEFAULT_PATH, url_for

    url = url_for(target or os.environ.get(LEDGER_ENV))
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if not path.exists():
            raise _fail(
                f"no ledger at {path} (the default is ./{DEFAULT_PATH}); pass --ledger FILE or a URL "
                f"such as postgresql://user@host/db, or set ${LEDGER_ENV}",
                flag="--ledger",
            )
    return url


@dataclass(frozen=True, slots=True)
class _Rows:
    actions: list[Any]
    blockers: list[Any]
    usage: list[Any]
    reservations: list[Any]
    best: list[Any]
    since: datetime
    now: datetime


def _read(ledger_target: str | None, *, since: str, now_text: str | None, pool: str | None) -> _Rows:
    """The ledger's rows over the window. `now` defaults to the end of the last usage sample (the last
    time the fleet was observed): realized savings run to there, and a simulated run's ledger reports as
    it ended. A pool the ledger never saw is an error that names the pools it knows."""
    from provisioner.finops import window
    from provisioner.finops.database import LedgerError
    from provisioner.finops.ledger import Ledger

    url = _ledger_target(ledger_target)
    try:
        with Ledger(url) as ledger:
            known = ledger.pools()
            if pool is not None and pool not in known:
                raise _fail(
                    f"{pool!r}: no such pool in the ledger; pools: {', '.join(sorted(known)) or 'none yet'}",
                    flag="--pool",
                )
            if now_text is not None:
                now = parse_since(now_text, now=datetime.now(UTC), flag="--now")
            else:
                samples = ledger.usage(since=datetime.now(UTC) - timedelta(days=3650))
                ends = [u.time + timedelta(hours=u.hours) for u in samples]
                now = max(ends, default=datetime.now(UTC))
            start = parse_since(since, now=now)
            if start > now:
                raise _fail(
                    f"{since!r} is after --now ({now.isoformat()}): the window would be empty", flag="--since"
                )
            # A sample that starts exactly at `now` has no hours before it: read up to just past it.
            until = now + timedelta(microseconds=1)
            # Usage and reservation rows that straddle an edge count for their hours inside the window.
            return _Rows(
                actions=ledger.actions(since=start, until=until, pool=pool),
                blockers=ledger.blockers(since=start, until=until, pool=pool),
                usage=window.clip(ledger.usage(since=start, until=until, pool=pool), since=start, now=until),
                reservations=window.clip(
                    ledger.reservations(since=start, until=until, pool=pool), since=start, now=until
                ),
                # A simulated run's best possible cost covers the whole fleet: not shown for one pool.
                best=ledger.best() if pool is None else [],
                since=start,
                now=now,
            )
    except LedgerError as err:
        raise _fail(str(err), flag="--ledger") from None
    except typer.Exit:
        raise
    except Exception as err:  # a database that cannot be reached: one line, not a traceback
        if type(err).__module__.startswith("sqlalchemy"):
            raise _fail(f"{url}: {getattr(err, 'orig', None) or err}", flag="--ledger") from None
        raise


_LEDGER_HELP = (
    f"Ledger: a SQLite file or a database URL (default ${LEDGER_ENV}, else ./provisioner-ledger.sqlite)."
)
_SINCE_HELP = "Window start: 7d, 36h, 2w, or an ISO time (counted back from --now)."
_NOW_HELP = "Report as of this ISO time (default: the end of the last usage sample in the ledger)."


@report.command("scale-down")
def scale_down(
    since: str = typer.Option("7d", "--since", help=_SINCE_HELP),
    pool: str | None = typer.Option(None, "--pool", help="Only this NodePool."),
    output: str | None = typer.Option(None, "-o", "--output", help="Format: table, json, csv or html."),
    write: Path | None = typer.Option(None, "--write", help=out.WRITE_HELP),
    ledger: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
    now_text: str | None = typer.Option(None, "--now", help=_NOW_HELP),
) -> None:
    """What disruption removed and really saved, what the fleet paid, idle cost, churn, top blockers."""
    from provisioner.finops.reports import scale_down as builder
    from provisioner.finops.reports import scale_down_formats as formats

    fmt = out.resolve(output, write, allowed=tuple(formats.RENDERERS))
    rows = _read(ledger, since=since, now_text=now_text, pool=pool)
    built = builder.build(
        rows.actions,
        rows.blockers,
        rows.usage,
        since=rows.since,
        now=rows.now,
        pool=pool,
        reservations=rows.reservations,
        best=rows.best,
    )
    if fmt == "table":
        text = formats.to_table(built, width=None if write else out.terminal_width())
    else:
        text = formats.RENDERERS[fmt](built)
    out.emit(text, write)


@report.command("reservations")
def reservations(
    since: str = typer.Option("7d", "--since", help=_SINCE_HELP),
    pool: str | None = typer.Option(None, "--pool", help="Only the reservations this NodePool may use."),
    output: str | None = typer.Option(None, "-o", "--output", help="Format: table, json or csv (per hour)."),
    write: Path | None = typer.Option(None, "--write", help=out.WRITE_HELP),
    ledger: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
    now_text: str | None = typer.Option(None, "--now", help=_NOW_HELP),
) -> None:
    """Reservation utilization per reservation and clock hour: paid (used or not), used, idle, idle cost
    and idle GPU-hours."""
    from provisioner.finops.reports import reservations as builder

    fmt = out.resolve(output, write, allowed=tuple(builder.RENDERERS))
    rows = _read(ledger, since=since, now_text=now_text, pool=pool)
    built = builder.build(rows.reservations, since=rows.since, now=rows.now, pool=pool)
    if fmt == "table":
        text = builder.to_table(built, width=None if write else out.terminal_width())
    else:
        text = builder.RENDERERS[fmt](built)
    out.emit(text, write)


COST_FORMATS = ("table", "json", "csv", "focus-csv")


@report.command("costs")
def costs(
    since: str = typer.Option("7d", "--since", help=_SINCE_HELP),
    pool: str | None = typer.Option(None, "--pool", help="Only this NodePool."),
    output: str | None = typer.Option(
        None, "-o", "--output", help="Format: table, json, csv (per hour), or focus-csv (FOCUS 1.0 columns)."
    ),
    write: Path | None = typer.Option(None, "--write", help=out.WRITE_HELP),
    ledger: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
    now_text: str | None = typer.Option(None, "--now", help=_NOW_HELP),
    cluster: str = typer.Option("", "--cluster-name", help="BillingAccountId of the FOCUS rows."),
) -> None:
    """Cost by team, pool and hour (showback). Idle capacity goes to the pool's owner team (the NodePool
    label provisioner.sh/team), else to "unallocated"."""
    from provisioner.finops.reports import best as best_possible
    from provisioner.finops.reports import costs as builder
    from provisioner.finops.reports import focus, scale_down

    fmt = out.resolve(output, write, allowed=COST_FORMATS)
    rows = _read(ledger, since=since, now_text=now_text, pool=pool)
    compared: best_possible.Comparison | None = None
    if rows.best:
        realized = scale_down.build(rows.actions, [], rows.usage, since=rows.since, now=rows.now).total
        compared = best_possible.compare(
            rows.best, rows.usage, realized=realized.realized_savings, since=rows.since, now=rows.now
        )
    if fmt == "table":
        text = builder.to_table(
            rows.usage,
            since=rows.since,
            now=rows.now,
            width=None if write else out.terminal_width(),
            reservations=rows.reservations,
            best=compared,
        )
    elif fmt == "json":
        text = builder.to_json(
            rows.usage, since=rows.since, now=rows.now, reservations=rows.reservations, best=compared
        )
    elif fmt == "csv":
        text = builder.to_csv(rows.usage, rows.reservations)
    else:
        text = focus.to_focus_csv(rows.usage, rows.reservations, cluster=cluster)
    out.emit(text, write)


# ---- cluster tables ------------------------------------------------------------------------------------


def _scenario_file(path: Path) -> LoadedScenario | None:
    """The loaded scenario when the file holds a Scenario document, else None."""
    from provisioner.api import documents

    try:
        docs = documents.read_yaml_file(path)
    except documents.DocumentError as err:
        raise _fail(str(err.problem)) from None
    if not any(isinstance(d.data, dict) and d.data.get("kind") == "Scenario" for d in docs):
        return None
    from provisioner.sim import scenario
    from provisioner.sim.loaded import ScenarioError

    try:
        return scenario.load_documents(docs, source=str(path))
    except ScenarioError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(2) from None


def _load_file(path: Path) -> Snapshot:
    """A snapshot from a YAML/JSON file of Kubernetes objects (a scenario's documents, a `kind: List`, or a
    state dump). Kinds the cluster state does not track are skipped."""
    from pydantic import ValidationError

    from provisioner.api import KINDS, documents
    from provisioner.state.cluster import ClusterState, snapshot_kinds

    try:
        docs = documents.read_yaml_file(path)
    except documents.DocumentError as err:
        typer.echo(str(err.problem), err=True)
        raise typer.Exit(2) from None
    if any(isinstance(d.data, dict) and d.data.get("kind") == "Scenario" for d in docs):
        # A scenario file: its own loader expands workloads and fills nodes from the catalog.
        from provisioner.sim import scenario
        from provisioner.sim.loaded import ScenarioError

        try:
            return scenario.load_documents(docs, source=str(path)).snapshot()
        except ScenarioError as err:
            for problem in err.problems:
                typer.echo(str(problem), err=True)
            raise typer.Exit(2) from None
    state = ClusterState()
    tracked = set(snapshot_kinds())

    def visit(obj: Any, doc: documents.YamlDocument, base: tuple[str | int, ...]) -> None:
        if not isinstance(obj, dict):
            return
        kind = obj.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
            for i, item in enumerate(obj.get("items") or ()):
                visit(item, doc, (*base, "items", i))
            return
        if kind not in tracked:
            # A scenario document may embed objects (spec.objects / spec.cluster): look one level in.
            spec = obj.get("spec")
            if isinstance(spec, dict):
                for key in ("objects", "cluster", "state"):
                    embedded = spec.get(key)
                    if isinstance(embedded, list):
                        for i, item in enumerate(embedded):
                            visit(item, doc, (*base, "spec", key, i))
            return
        name = (obj.get("metadata") or {}).get("name", "?")
        try:
            state.upsert(kind, obj)
        except ValidationError as err:
            # Located as `templates validate` locates them: FILE:LINE: Kind/name: field: message.
            model = KINDS.get(kind)
            found = documents.located_problems(err, doc, kind=kind, name=name, base=base, model=model)
            for problem in sorted(found, key=lambda p: (p.line, p.path)):
                typer.echo(str(problem), err=True)
            raise typer.Exit(2) from None
        except Exception as err:
            typer.echo(f"{path}:{doc.line_of(base)}: {kind}/{name}: {err}", err=True)
            raise typer.Exit(2) from None

    for doc in docs:
        visit(doc.data, doc, ())
    return state.snapshot()


def _load_cluster(kubeconfig: str | None, context: str | None) -> Snapshot:
    try:
        from provisioner.kube.client import WATCHED, KubeClient
    except ImportError as err:  # pragma: no cover - the kube room ships with the package
        raise _fail(f"reading a live cluster needs provisioner.kube: {err}") from None
    from provisioner.state.cluster import ClusterState

    try:
        client = KubeClient.connect(kubeconfig=kubeconfig, context=context)
    except Exception as err:
        raise _fail(f"cannot load it: {err}", flag="--kubeconfig") from None
    state = ClusterState()
    try:
        for res in WATCHED:
            try:
                items, _ = client.list(res)
            except Exception as err:
                if res.group and "404" in str(err):
                    continue  # CRDs not installed: the tables are still useful without them
                raise _fail(f"cannot list {res.plural}: {err}") from None
            for item in items:
                item.setdefault("kind", res.kind)
                state.upsert(res.kind, item)
    finally:
        client.close()
    return state.snapshot()


def _snapshot(scenario: Path | None, kubeconfig: str | None, context: str | None) -> Snapshot:
    if scenario is not None:
        return _load_file(scenario)
    return _load_cluster(kubeconfig, context)


# The options `nodes`, `nodepools` and `teams` share: where the cluster is read from, and the output.
_SCENARIO = typer.Option(
    None, "--scenario", "-f", help="A file of Kubernetes objects (scenario, state dump, kubectl get -o yaml)."
)
_KUBECONFIG = typer.Option(None, "--kubeconfig", help="Read a live cluster through this kubeconfig.")
_CONTEXT = typer.Option(None, "--context", help="The kubeconfig context.")
TABLE_FORMATS = ("table", "json", "yaml", "csv")
_OUTPUT = out.output_option(TABLE_FORMATS)
_WRITE = out.write_option()


@report.command("nodes")
def nodes(
    scenario: Path | None = _SCENARIO,
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    pool: str | None = typer.Option(None, "--pool", help="Only nodes of this NodePool."),
    output: str | None = _OUTPUT,
    write: Path | None = _WRITE,
) -> None:
    """Every node with its status (Ready / Not ready) and the reasons, capacity and allocation."""
    from provisioner.finops.reports import nodes as builder

    fmt = out.resolve(output, write, allowed=TABLE_FORMATS)
    snap = _snapshot(scenario, kubeconfig, context)
    if pool is not None and pool not in {p.metadata.name for p in snap.nodepools} | {
        n.nodepool for n in snap.nodes if n.nodepool
    }:
        raise _fail(
            f"{pool!r}: no such NodePool; pools: {', '.join(sorted(p.name for p in snap.nodepools)) or 'none'}",
            flag="--pool",
        )
    width = None if write else out.terminal_width()
    out.emit(builder.render_nodes(builder.node_rows(snap, pool=pool), fmt=fmt, width=width), write)


@report.command("nodepools")
def nodepools(
    scenario: Path | None = _SCENARIO,
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    output: str | None = _OUTPUT,
    write: Path | None = _WRITE,
) -> None:
    """Every NodePool with its status and reasons, node counts, GPUs, CPU, memory and $/h."""
    from provisioner.finops.reports import nodes as builder

    fmt = out.resolve(output, write, allowed=TABLE_FORMATS)
    snap = _snapshot(scenario, kubeconfig, context)
    width = None if write else out.terminal_width()
    out.emit(builder.render_nodepools(builder.nodepool_rows(snap), fmt=fmt, width=width), write)


@report.command("teams")
def teams(
    scenario: Path | None = _SCENARIO,
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    output: str | None = _OUTPUT,
    write: Path | None = _WRITE,
) -> None:
    """Every Team and Department per pool and resource: quota, allocated (and the non-preemptible part),
    over quota, pending."""
    from provisioner.quota import report as builder

    fmt = out.resolve(output, write, allowed=TABLE_FORMATS)
    loaded = _scenario_file(scenario) if scenario is not None else None
    if loaded is not None:
        # What the file's own run allocates, not what quota alone would admit: a run over time is
        # simulate's to tell; a static one is solved here, and only pods given a node count as allocated.
        from provisioner.sim import static

        if loaded.scenario.spec.duration is not None or loaded.scenario.spec.timeline:
            raise _fail(
                f"{scenario}: a scenario with a timeline (spec.duration or spec.timeline): what its teams "
                "are allocated depends on the run; `provisioner simulate "
                f"{scenario}` prints its Teams table (and `-o json` its `teams`)"
            )
        docs = static.team_status(loaded)
        teams_of = loaded.snapshot().teams
        out.emit(builder.render(builder.status_rows(teams_of, docs), fmt=fmt), write)
        return
    snap = _snapshot(scenario, kubeconfig, context)
    out.emit(builder.render(builder.rows(snap), fmt=fmt), write)
