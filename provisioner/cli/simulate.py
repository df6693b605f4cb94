"""`provisioner simulate SCENARIO` and `provisioner explain SCENARIO --pod NS/NAME`.

Wiring and printing only: loading lives in `provisioner.sim.scenario`, running in `provisioner.sim.static`,
deciding in `provisioner.scheduling`. An invalid scenario prints one line per problem
(`FILE:LINE: Kind/name: field: message`) on stderr and exits 1; unschedulable pods are a result (exit 0).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provisioner.api import accelerators, quantities
from provisioner.cli import output as out
from provisioner.cli.app import app
from provisioner.scheduling import NewClaim, Results, pool_order
from provisioner.sim import gangs as sim_gangs
from provisioner.sim import scenario as scenario_
from provisioner.sim import static
from provisioner.sim.loaded import LoadedScenario, ScenarioError
from provisioner.state.objects import Pod

SIMULATE_FORMATS = ("table", "json", "yaml", "csv")
EXPLAIN_FORMATS = ("table", "json", "yaml")


def _load(paths: list[Path]) -> LoadedScenario:
    try:
        loaded = scenario_.load(*paths)
    except ScenarioError as err:
        _fail(paths, err)
    for warning in loaded.warnings:
        typer.echo(str(warning), err=True)
    return loaded


def _fail(paths: list[Path], err: ScenarioError) -> NoReturn:
    for problem in err.problems:
        typer.echo(str(problem), err=True)
    n = len(err.problems)
    where = " ".join(str(p) for p in paths)
    typer.echo(f"{where}: {n} problem{'s' if n != 1 else ''}; the scenario was not run", err=True)
    raise typer.Exit(1) from None


def _gpu_text(gpu: dict[str, Any] | None) -> str:
    if not gpu:
        return "-"
    text = f"{gpu['count']}x {gpu['name']} {gpu['memoryMiB'] // 1024}G"
    if gpu.get("migConfig"):
        text += f" {gpu['migConfig']} ({sum(gpu['slices'].values())} slices)"
    return text


def _fallback_note(claim: NewClaim) -> str:
    """Say when a cheaper offering of the chosen type was skipped for lack of capacity."""
    chosen = claim.offering
    skipped = sorted(
        (
            o
            for o in claim.instance_type.offerings
            if not o.available
            and o.key != chosen.key
            and (o.price < chosen.price or (o.price == chosen.price and o.zone < chosen.zone))
        ),
        key=lambda o: (o.price, o.zone),
    )
    if not skipped:
        return ""
    if any(o.capacity_type != chosen.capacity_type for o in skipped):
        kinds = sorted({o.capacity_type for o in skipped if o.capacity_type != chosen.capacity_type})
        return f"{'/'.join(kinds)} unavailable -> {chosen.capacity_type}"
    zones = sorted({o.zone for o in skipped})
    return f"{chosen.capacity_type} unavailable in {', '.join(zones)}"


def _print_table(loaded: LoadedScenario, results: Results) -> None:
    console = _console()
    doc = static.to_json(results, loaded)
    pending = len(loaded.pods)
    console.print(
        f"[bold]{loaded.source}[/bold]: catalog {loaded.where}, "
        f"{pending} pending pod{'s' if pending != 1 else ''}, {len(loaded.nodes)} existing node"
        f"{'s' if len(loaded.nodes) != 1 else ''}, {len(loaded.nodepools)} NodePool"
        f"{'s' if len(loaded.nodepools) != 1 else ''}"
    )
    notes = {c.hostname: _fallback_note(c) for c in results.new_claims}
    by_pool: dict[str, list[dict[str, Any]]] = {}
    for claim in doc["nodeClaims"]:
        by_pool.setdefault(claim["nodePool"], []).append(claim)
    for pool in [p.name for p in loaded.nodepools]:
        claims = by_pool.get(pool)
        if not claims:
            continue
        cost = sum(c["pricePerHour"] for c in claims)
        table = Table(
            title=f"NodePool {pool}: {len(claims)} new node{'s' if len(claims) != 1 else ''}, ${cost:.2f}/h",
            title_justify="left",
        )
        table.add_column("NodeClaim")
        table.add_column("Instance type")
        table.add_column("GPUs")
        table.add_column("Zone")
        table.add_column("Capacity")
        table.add_column("$/h", justify="right")
        table.add_column("Pods")
        table.add_column("Fallback")
        for c in claims:
            pods = c["pods"]
            shown = ", ".join(pods[:4]) + (f" (+{len(pods) - 4})" if len(pods) > 4 else "")
            capacity = c["capacityType"]
            table.add_row(
                c["name"],
                c["instanceType"],
                _gpu_text(c["gpu"]),
                c["zone"],
                capacity,
                f"{c['pricePerHour']:.4f}",
                escape(shown),
                escape(notes.get(c["name"], "")),
            )
        console.print(table)
    if doc["placements"]:
        n = len(doc["placements"])
        table = Table(title=f"On existing capacity: {n} pod{'s' if n != 1 else ''}", title_justify="left")
        table.add_column("Pod")
        table.add_column("Node")
        for p in doc["placements"]:
            table.add_row(p["pod"], p["node"])
        console.print(table)
    if doc["unschedulable"]:
        n = len(doc["unschedulable"])
        table = Table(
            title=f"Unschedulable: {n} pod{'s' if n != 1 else ''}", title_justify="left", show_lines=True
        )
        table.add_column("Pod")
        table.add_column("NodePool")
        table.add_column("Why not")
        for u in doc["unschedulable"]:
            for i, r in enumerate(u["reasons"]):
                table.add_row(escape(u["pod"]) if i == 0 else "", escape(r["nodePool"]), escape(r["reason"]))
        console.print(table)
    if doc.get("gangs"):
        console.print(sim_gangs.table(doc["gangs"]))
    if doc.get("provisioningRequests"):
        console.print(sim_gangs.requests_table(doc["provisioningRequests"]))
    gpus = sum((c["gpu"] or {}).get("count", 0) for c in doc["nodeClaims"])
    new_nodes = len(doc["nodeClaims"])
    console.print(
        f"[bold]{out.plural(new_nodes, 'new node')}[/bold] ({out.plural(gpus, 'GPU')}), "
        f"[bold]${doc['costPerHour']:.2f}/h[/bold]; {out.plural(len(doc['placements']), 'pod')} on existing "
        f"capacity, {len(doc['unschedulable'])} unschedulable"
    )


def _console() -> Console:
    """Rich tables fit the terminal they print to; piped output is not cut."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=200)


@app.command("simulate")
def simulate(
    scenario: list[Path] = typer.Argument(
        ...,
        help="Scenario YAML (NodePools, NodeClasses, workloads, nodes, at most one Scenario); several files "
        "and folders are read as one scenario, e.g. nodepool_templates/ my-pods.yaml.",
    ),
    output: str | None = out.output_option(SIMULATE_FORMATS),
    write: Path | None = out.write_option(),
    report: Path | None = typer.Option(
        None,
        "--report",
        help="With a timeline: write the run's scale-down report to this file; .html, .csv or .json.",
    ),
    ledger: Path | None = typer.Option(
        None,
        "--ledger",
        help="With a timeline: write the run's ledger to this SQLite file, for `provisioner report ... --ledger`.",
    ),
    best_possible: bool = typer.Option(
        False,
        "--best-possible",
        help="With a timeline: also solve the run's best possible cost (an exact optimum per interval, HiGHS) "
        "and put it beside what the run paid (report, JSON, ledger).",
    ),
) -> None:
    """Decide which nodes to launch for a scenario's pending pods, and say why for the rest.

    A scenario with `spec.timeline` (or `spec.duration`) runs the controllers over virtual time instead
    (launches, stockouts, interruptions, consolidation) and prints what happened, with the disruption
    ledger's rows.

    Output: a table for people; the result document as json or yaml; csv: one row per NodeClaim.
    Exit 0 when the scenario ran (unschedulable pods included); exit 1 when it is invalid.
    """
    fmt = out.resolve(output, write, allowed=SIMULATE_FORMATS)
    loaded = _load(scenario)
    from provisioner.sim import timeline as timeline_

    try:
        timeline = timeline_.load(loaded)
    except ScenarioError as err:
        _fail(scenario, err)
    if timeline is not None:
        from provisioner.sim import console

        report_format = (
            out.format_of(report, allowed=("html", "csv", "json"), flag="--report") if report else None
        )
        with out.to_write(write):
            console.run(
                loaded,
                timeline,
                fmt=fmt,
                report=report,
                report_format=report_format,
                ledger_path=ledger,
                best_possible=best_possible,
            )
        return
    for flag, given in (
        ("--report", report),
        ("--ledger", ledger),
        ("--best-possible", best_possible or None),
    ):
        if given is not None:
            raise out.fail(
                f"needs a run with time (spec.timeline or spec.duration in {' '.join(map(str, scenario))}) "
                "to report on",
                flag=flag,
                code=1,
            )
    results = static.run(loaded)
    with out.to_write(write):
        if fmt == "table":
            _print_table(loaded, results)
        else:
            typer.echo(static.document_text(static.to_json(results, loaded), fmt), nl=False)


@app.command("explain")
def explain(
    scenario: list[Path] = typer.Argument(..., help="Scenario YAML: files and folders read as one scenario."),
    pod: str = typer.Option(..., "--pod", help="The pod, NAMESPACE/NAME (namespace defaults to `default`)."),
    output: str | None = out.output_option(EXPLAIN_FORMATS),
    write: Path | None = out.write_option(),
) -> None:
    """For one pod: each pool in the order tried, whether it fits, why not, and what it would cost;
    then where the whole scenario's solve put it."""
    fmt = out.resolve(output, write, allowed=EXPLAIN_FORMATS)
    loaded = _load(scenario)
    target = loaded.find_pod(pod)
    if target is None:
        known = ", ".join(sorted(p.key for p in loaded.pods)[:10])
        raise out.fail(
            f"no pending pod {pod!r} in {' '.join(map(str, scenario))}; pods: {known}", flag="--pod", code=1
        )
    doc = _explanation(loaded, target)
    with out.to_write(write):
        if fmt == "table":
            _print_explanation(doc)
        else:
            typer.echo(static.document_text(doc, fmt), nl=False)


def _explanation(loaded: LoadedScenario, target: Pod) -> dict[str, Any]:
    """What `explain` says, as data: the pod, its pools in order with each verdict, the full solve."""
    verdicts = static.explain_pod(loaded, target)
    order = pool_order.resolve(
        target,
        team_default=pool_order.team_lists(loaded.snapshot()),
        defaults=loaded.pool_defaults,
        pool_names=pool_order.default_pool_names(loaded.nodepools),
    )
    pools = []
    for v in verdicts:
        entry: dict[str, Any] = {"nodePool": v.nodepool, "fits": v.fits}
        if v.fits and v.instance_type is not None and v.offering is not None:
            entry.update(
                instanceType=v.instance_type.name,
                capacityType=v.offering.capacity_type,
                zone=v.offering.zone,
                pricePerHour=round(v.offering.price, 6),
                relaxed=v.relaxed,
            )
        else:
            entry["reason"] = v.reason
        pools.append(entry)
    results = static.run(loaded)
    solve: dict[str, Any] = {"outcome": "unschedulable"}
    refused = next((u for u in results.unschedulable if u.pod.key == target.key), None)
    if refused is not None:
        held = bool(refused.reasons) and "quota" in refused.reasons[0].reason
        solve = {
            "outcome": "held-by-quota" if held else "unschedulable",
            "reasons": [{"nodePool": r.nodepool, "reason": r.reason} for r in refused.reasons],
        }
    for p in results.placements:
        if p.pod.key == target.key:
            solve = {"outcome": "existing-node", "node": p.node}
    for c in results.new_claims:
        if any(p.key == target.key for p in c.pods):
            solve = {
                "outcome": "new-node",
                "nodeClaim": c.hostname,
                "nodePool": c.nodepool.name,
                "instanceType": c.instance_type.name,
                "capacityType": c.offering.capacity_type,
                "zone": c.offering.zone,
                "pricePerHour": round(c.offering.price, 6),
                "podsOnNode": len(c.pods),
            }
    doc: dict[str, Any] = {
        "pod": target.key,
        "requests": {
            k: quantities.format_quantity(k, v) for k, v in sorted(target.requests.items()) if k != "pods"
        },
        "poolOrigin": order.origin,
        "poolOrder": order.described,
        "pools": pools,
        "fullSolve": solve,
    }
    if accelerators.slices(target.requests):
        # MIG slices: how much of a GPU's compute they are (a 1g profile is one of its 7 compute slices).
        doc["gpuComputeShare"] = str(accelerators.gpu_share(target.requests))
    return doc


def _print_explanation(doc: dict[str, Any]) -> None:
    # Every value goes through escape(): rich would read `[h100]` in a reason as markup and drop it.
    console = _console()
    req = ", ".join(f"{k} {v}" for k, v in doc["requests"].items())
    share = doc.get("gpuComputeShare")
    if share is not None:
        req += f" ({share} of a GPU's compute)" if Fraction(share) < 1 else f" ({share} GPUs' compute)"
    console.print(f"[bold]{escape(doc['pod'])}[/bold] requests {escape(req)}")
    table = Table(
        title=f"NodePools in the order tried (from {escape(doc['poolOrder'])})",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("#", justify="right")
    table.add_column("NodePool")
    table.add_column("Fits")
    table.add_column("Cheapest node / why not")
    table.add_column("$/h", justify="right")
    for i, v in enumerate(doc["pools"], 1):
        if v["fits"]:
            what = f"{v['instanceType']} {v['capacityType']} in {v['zone']}"
            if v["relaxed"]:
                what += " (after relaxing preferences)"
            table.add_row(str(i), escape(v["nodePool"]), "yes", escape(what), f"{v['pricePerHour']:.4f}")
        else:
            table.add_row(str(i), escape(v["nodePool"]), "no", escape(v["reason"]), "-")
    console.print(table)
    solve = doc["fullSolve"]
    reasons = "; ".join(
        f"{r['nodePool']}: {r['reason']}" if r["nodePool"] else r["reason"] for r in solve.get("reasons", ())
    )
    if solve["outcome"] == "new-node":
        where = (
            f"on new node {solve['nodeClaim']} (NodePool {solve['nodePool']}, {solve['instanceType']}, "
            f"{solve['capacityType']} in {solve['zone']}, ${solve['pricePerHour']:.4f}/h, "
            f"{out.plural(solve['podsOnNode'], 'pod')} on it)"
        )
    elif solve["outcome"] == "existing-node":
        where = f"placed on existing node {solve['node']}"
    elif solve["outcome"] == "held-by-quota":
        where = f"held by quota (not admitted, so no pool is tried): {reasons}"
    else:
        where = "unschedulable" + (f": {reasons}" if reasons else "")
    console.print(f"In the full solve: {escape(where)}")
