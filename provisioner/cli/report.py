"""`provisioner report ...`: the FinOps scale-down report from the ledger, and the node and node-pool
tables from a cluster (a kubeconfig) or a file of Kubernetes objects (a scenario or a state dump).

Wiring and printing only: rows come from `provisioner.finops.ledger`, reports are built by the pure
`provisioner.finops.reports`. User errors print one line and exit 2, never a traceback.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from provisioner.cli.app import app

report = typer.Typer(
    name="report",
    help="FinOps reports: scale-down savings, idle cost and churn; node and node-pool status tables.",
    no_args_is_help=True,
)
app.add_typer(report, name="report")

LEDGER_ENV = "PROVISIONER_LEDGER"
_SINCE = re.compile(r"^(\d+(?:\.\d+)?)(w|d|h|m|s)$")
_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def parse_since(text: str, *, now: datetime) -> datetime:
    """`7d`, `36h`, `90m`, `2w`, a Go duration such as `1h30m`, or an ISO time (UTC when no zone)."""
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
            f"--since {text!r}: give a span such as 7d, 36h, 90m, 2w, or a time such as 2026-11-01T00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _write(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise _fail(f"cannot write {output}: {err.strerror or err}") from None
    typer.echo(f"wrote {output}", err=True)


def _ledger_target(db: str | None) -> str:
    from provisioner.finops.ledger import DEFAULT_PATH, url_for

    target = db or os.environ.get(LEDGER_ENV)
    url = url_for(target)
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if not path.exists():
            raise _fail(
                f"no ledger at {path} (the default is ./{DEFAULT_PATH}); pass --db FILE or a URL "
                f"such as postgresql://user@host/db, or set ${LEDGER_ENV}"
            )
    return url


@report.command("scale-down")
def scale_down(
    since: str = typer.Option("7d", "--since", help="Window start: 7d, 36h, 2w, or an ISO time."),
    pool: str | None = typer.Option(None, "--pool", help="Only this NodePool."),
    fmt: str = typer.Option("table", "--format", help="table, csv, json or html."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
    db: str | None = typer.Option(
        None,
        "--db",
        help=f"Ledger: a SQLite file or a database URL (default ${LEDGER_ENV} or the local file).",
    ),
    now_text: str | None = typer.Option(None, "--now", help="Report as of this ISO time (default: now)."),
) -> None:
    """What disruption removed and saved, idle cost and GPU-idle hours, churn, and the top blockers."""
    from provisioner.finops.reports import scale_down as builder

    if fmt not in builder.RENDERERS:
        raise _fail(f"--format {fmt!r}: allowed are {', '.join(builder.RENDERERS)}")
    now = datetime.now(UTC) if now_text is None else parse_since(now_text, now=datetime.now(UTC))
    start = parse_since(since, now=now)
    url = _ledger_target(db)
    from provisioner.finops.ledger import Ledger, LedgerError

    try:
        with Ledger(url) as ledger:
            actions = ledger.actions(since=start, until=now, pool=pool)
            blockers = ledger.blockers(since=start, until=now, pool=pool)
            usage = ledger.usage(since=start, until=now, pool=pool)
    except LedgerError as err:
        raise _fail(str(err)) from None
    except Exception as err:  # a database that cannot be reached: one line, not a traceback
        if type(err).__module__.startswith("sqlalchemy"):
            raise _fail(f"ledger {url}: {getattr(err, 'orig', None) or err}") from None
        raise
    built = builder.build(actions, blockers, usage, since=start, now=now, pool=pool)
    _write(builder.RENDERERS[fmt](built), output)


# ---- cluster tables ------------------------------------------------------------------------------------


def _load_file(path: Path):
    """A snapshot from a YAML/JSON file of Kubernetes objects (a scenario's documents, a `kind: List`, or a
    state dump). Kinds the cluster state does not track are skipped."""
    from provisioner.api import documents
    from provisioner.state.cluster import ClusterState

    try:
        docs = documents.read_yaml_file(path)
    except documents.DocumentError as err:
        raise _fail(str(err.problem)) from None
    if any(isinstance(d.data, dict) and d.data.get("kind") == "Scenario" for d in docs):
        # A scenario file: its own loader expands workloads and fills nodes from the catalog.
        from provisioner.sim import scenario

        try:
            return scenario.load_documents(docs, source=str(path)).snapshot()
        except scenario.ScenarioError as err:
            for problem in err.problems:
                typer.echo(str(problem), err=True)
            raise typer.Exit(2) from None
    state = ClusterState()
    tracked = {
        "Pod",
        "Node",
        "NodeClaim",
        "NodePool",
        "AWSNodeClass",
        "GCPNodeClass",
        "DaemonSet",
        "PodDisruptionBudget",
        "Namespace",
        "Team",
        "Department",
    }

    def visit(obj: Any, line: int) -> None:
        if not isinstance(obj, dict):
            return
        kind = obj.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
            for item in obj.get("items") or ():
                visit(item, line)
            return
        if kind not in tracked:
            # A scenario document may embed objects (spec.objects / spec.cluster): look one level in.
            spec = obj.get("spec")
            if isinstance(spec, dict):
                for key in ("objects", "cluster", "state"):
                    embedded = spec.get(key)
                    if isinstance(embedded, list):
                        for item in embedded:
                            visit(item, line)
            return
        name = (obj.get("metadata") or {}).get("name", "?")
        try:
            state.upsert(kind, obj)
        except Exception as err:
            raise _fail(f"{path}:{line}: {kind}/{name}: {err}") from None

    for doc in docs:
        visit(doc.data, doc.line)
    return state.snapshot()


def _load_cluster(kubeconfig: str | None, context: str | None):
    try:
        from provisioner.kube.client import WATCHED, KubeClient
    except ImportError as err:  # pragma: no cover - the kube room ships with the package
        raise _fail(f"reading a live cluster needs provisioner.kube: {err}") from None
    from provisioner.state.cluster import ClusterState

    try:
        client = KubeClient.connect(kubeconfig=kubeconfig, context=context)
    except Exception as err:
        raise _fail(f"cannot load the kubeconfig: {err}") from None
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


def _snapshot(scenario: Path | None, kubeconfig: str | None, context: str | None):
    if scenario is not None:
        return _load_file(scenario)
    return _load_cluster(kubeconfig, context)


_SOURCE_HELP = "A file of Kubernetes objects (scenario, state dump, kubectl get -o yaml)."


@report.command("nodes")
def nodes(
    scenario: Path | None = typer.Option(None, "--scenario", "-f", help=_SOURCE_HELP),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", help="Read a live cluster through this kubeconfig."
    ),
    context: str | None = typer.Option(None, "--context", help="The kubeconfig context."),
    pool: str | None = typer.Option(None, "--pool", help="Only nodes of this NodePool."),
    fmt: str = typer.Option("table", "--format", help="table or csv."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Every node with its status (Ready / Not ready) and the reasons, capacity and allocation."""
    from provisioner.finops.reports import nodes as builder

    if fmt not in ("table", "csv"):
        raise _fail(f"--format {fmt!r}: allowed are table, csv")
    snap = _snapshot(scenario, kubeconfig, context)
    _write(builder.render_nodes(builder.node_rows(snap, pool=pool), fmt=fmt), output)


@report.command("nodepools")
def nodepools(
    scenario: Path | None = typer.Option(None, "--scenario", "-f", help=_SOURCE_HELP),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", help="Read a live cluster through this kubeconfig."
    ),
    context: str | None = typer.Option(None, "--context", help="The kubeconfig context."),
    fmt: str = typer.Option("table", "--format", help="table or csv."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Every NodePool with its status and reasons, node counts, GPUs, CPU, memory and $/h."""
    from provisioner.finops.reports import nodes as builder

    if fmt not in ("table", "csv"):
        raise _fail(f"--format {fmt!r}: allowed are table, csv")
    snap = _snapshot(scenario, kubeconfig, context)
    _write(builder.render_nodepools(builder.nodepool_rows(snap), fmt=fmt), output)


@report.command("teams")
def teams(
    scenario: Path | None = typer.Option(None, "--scenario", "-f", help=_SOURCE_HELP),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", help="Read a live cluster through this kubeconfig."
    ),
    context: str | None = typer.Option(None, "--context", help="The kubeconfig context."),
    fmt: str = typer.Option("table", "--format", help="table or csv."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Every Team and Department per pool and resource: quota, allocated (and the non-preemptible part),
    over quota, pending."""
    from provisioner.quota import report as builder

    if fmt not in ("table", "csv"):
        raise _fail(f"--format {fmt!r}: allowed are table, csv")
    snap = _snapshot(scenario, kubeconfig, context)
    _write(builder.render(builder.rows(snap), fmt=fmt), output)
