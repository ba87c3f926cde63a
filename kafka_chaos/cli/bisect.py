"""``kafka-chaos bisect``: the versions on one axis (Kafka's, or the client's) where an
outcome appears or disappears, several runs per version (``kafka_chaos.bisect`` chooses the
versions, ``kafka_chaos.compare.core`` runs and stores them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kafka_chaos import bisect
from kafka_chaos import verdict
from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import console, fail, sigterm_as_interrupt
from kafka_chaos.cli.compare import _analyzer, _executor
from kafka_chaos.cli.run import run_params
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.errors import ClientError
from kafka_chaos.compare import core as compare
from kafka_chaos.config import RunConfig
from kafka_chaos.matrix import Dimension
from kafka_chaos.orchestrate import check_inputs, check_offline

BISECT_HELP = (
    "Any run option (--scenario, --nemesis, --time-limit, --client, --seed, ...) sets every "
    "run; the axis's setting is the version. Writes into OUT/bisect-<stamp>/: compare.json "
    "(the manifest, with the bisect's entry), a run directory per version and seed, "
    "bisect.json and bisect.md.\n\n"
    "Exit codes: 0 the search is over (whatever it found); 2 a version could not be judged, "
    "or interrupted (--resume DIR goes on); 254 bad input; 255 the tool failed.")


@app.command("bisect", epilog=BISECT_HELP,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bisect_cmd(
    ctx: typer.Context,
    axis: str = typer.Option("kafka", help="kafka (--kafka-version) or client "
                             "(--client-version: kafka-clients with --client java, "
                             "confluent-kafka with librdkafka)."),
    versions: Optional[str] = typer.Option(
        None, help="V1,V2,... or FIRST..LAST (every release between, both included: of "
        "Maven Central for Kafka and kafka-clients, of PyPI for confluent-kafka)."),
    runs: int = typer.Option(3, min=1, help="Runs per version (seeds SEED, SEED+1, ...)."),
    outcome: str = typer.Option(
        "violation", help="What a run must show: violation, unknown or valid (its "
        "verdict), anomaly:NAME (found, permitted or not) or violation:NAME (found and "
        "forbidden)."),
    min_rate: float = typer.Option(0.0, min=0.0, max=1.0, help="The share of a version's "
                                   "judged runs that must show the outcome (0: any one)."),
    every: bool = typer.Option(False, "--all", help="Run every version instead of "
                               "bisecting."),
    resume: Optional[Path] = typer.Option(None, help="Go on with the bisect in this "
                                          "directory; takes no other option."),
    out: Path = typer.Option(Path("runs"), help="Directory the bisect directory is made in."),
) -> None:
    """Find the versions where an outcome changes: both ends first, then the middle of each
    span whose ends differ (--all: every version), each version run --runs times under the
    same seeds; a table of each version's rate and the boundary."""
    if resume is not None:
        if ctx.args or versions is not None:
            fail("--resume DIR takes no other option: the bisect's manifest holds them")
        try:
            comparison = compare.load(resume)
            spec = comparison.manifest["bisect"]
        except (compare.CompareError, KeyError) as exc:
            fail(f"--resume {resume}: not a bisect directory ({exc})")
    else:
        comparison, spec = _create(ctx, axis, versions, runs, outcome, min_rate, every, out)
    console.print(f"bisect directory: {comparison.dir}: {spec['field']} over "
                  f"{', '.join(spec['order'])}; {len(comparison.seeds)} run(s) each, "
                  f"outcome {spec['outcome']}")
    sigterm_as_interrupt()
    code = verdict.EXIT_UNKNOWN
    try:
        answer = _search(comparison, spec)
        code = verdict.EXIT_VALID if answer["done"] and not answer["undecided"] \
            else verdict.EXIT_UNKNOWN
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: the running version was healed and torn "
                      f"down; finish with: kafka-chaos bisect --resume {comparison.dir}")
        answer = _answer(comparison, spec)
    _write(comparison, answer)
    raise typer.Exit(code)


def _create(ctx: typer.Context, axis: str, versions: str | None, runs: int, outcome: str,
            min_rate: float, every: bool, out: Path) -> tuple[compare.Comparison, dict]:
    """A new bisect directory; every input checked first (exit 254 naming it)."""
    if axis not in bisect.AXES:
        fail(f"--axis {axis!r}: choose {' or '.join(bisect.AXES)}")
    if not versions:
        fail("--versions V1,V2,... or FIRST..LAST is needed")
    field = bisect.AXES[axis]
    params, given = run_params(list(ctx.args), "kafka-chaos bisect")
    if field in given:
        fail(f"--{field.replace('_', '-')}: the bisect sets it (--axis {axis})")
    try:
        wanted = bisect.Outcome.parse(outcome)
        served = None
        if ".." in versions and axis == "client" and params.get("client") == "librdkafka":
            from kafka_chaos.workloads import pyclients

            served = pyclients.releases()
        elif ".." in versions:  # Kafka's releases, kafka-clients' too
            from kafka_chaos.clusters import central

            served = central.fetch_versions()
        order = bisect.versions(versions, served)
        manifest = compare.prepare(params, given, [Dimension(field, tuple(order))], runs)
    except (ValueError, compare.CompareError, ClusterError, ClientError) as exc:
        fail(str(exc))  # ClusterError, ClientError: a served list that could not be read
    cells = [c for c in manifest["cells"] if "config" in c]
    try:
        for cell in cells:
            check_offline(RunConfig(**cell["config"]))
        check_inputs(RunConfig(**cells[0]["config"]))  # each version's jars come at its run
    except (ValueError, ClusterError) as exc:  # the machine, a backend option, a download
        fail(str(exc))
    spec = {"axis": axis, "field": field, "order": order, "outcome": str(wanted),
            "min_rate": min_rate, "exhaustive": every}
    manifest["bisect"] = spec
    return compare.create(out, manifest, prefix="bisect"), spec


def _tallies(comparison: compare.Comparison, spec: dict) -> dict[str, bisect.Tally]:
    """The ``Tally`` of each version whose runs have all ended (a skipped cell: no run, so
    its tally judges nothing)."""
    wanted = bisect.Outcome.parse(spec["outcome"])
    done = comparison.manifest["done"]
    out = {}
    for cell in comparison.cells:
        version = cell["settings"][spec["field"]]
        if "skipped" in cell:
            out[version] = bisect.tally(version, [], wanted)
            continue
        ids = [comparison.run_id(cell, seed) for seed in comparison.seeds]
        if all(i in done for i in ids):
            out[version] = bisect.tally(
                version, [compare.results_of(comparison.dir / i) for i in ids], wanted)
    return out


def _answer(comparison: compare.Comparison, spec: dict) -> dict[str, Any]:
    return bisect.result(spec["order"], _tallies(comparison, spec), spec["min_rate"],
                         spec["exhaustive"], bisect.Outcome.parse(spec["outcome"]))


def _search(comparison: compare.Comparison, spec: dict) -> dict[str, Any]:
    """Run the versions ``bisect.next_version`` asks for until it asks for none. A version
    whose inputs cannot be had (no such release, a download refused) is recorded as runs
    without a verdict, so the search stops there, undecided."""
    execute, analyze = _executor(comparison), _analyzer(comparison)
    by_version = {c["settings"][spec["field"]]: c for c in comparison.cells}
    while True:
        tallies = _tallies(comparison, spec)
        classes = {v: t.shows(spec["min_rate"]) for v, t in tallies.items()}
        version = bisect.next_version(spec["order"], classes, spec["exhaustive"])
        if version is None:
            return _answer(comparison, spec)
        console.print(f"[bold]{spec['field']} {version}[/]")
        cell = by_version[version]
        try:  # this version's jars or client release, had before its cluster starts
            check_inputs(RunConfig(**cell["config"]))
        except (ValueError, ClusterError, ClientError) as exc:
            console.print(f"[yellow]{version} cannot run: {exc}[/]")
            for seed in comparison.seeds:  # no verdict: the version stays undecided
                comparison.manifest["done"][comparison.run_id(cell, seed)] = {
                    "exit_code": verdict.EXIT_ERROR, "error": str(exc)}
            comparison.save()
            continue
        compare.run_pending(comparison, execute, analyze, console.print, only=cell["id"])
        tally = _tallies(comparison, spec)[version]
        console.print(f"  {version}: {tally.shown} of {tally.judged} judged run(s) showed "
                      f"{spec['outcome']} ({tally.runs} run)")


def _write(comparison: compare.Comparison, answer: dict[str, Any]) -> None:
    """The table on the terminal, ``bisect.json`` and ``bisect.md``."""
    table = Table(title=f"{answer['outcome']} by version")
    for column in ("version", "runs", "shown", "judged", "rate", "shows", "verdicts"):
        table.add_column(column)
    for row in answer["versions"]:
        table.add_row(*_cells(row))
    console.print(table)
    console.print(f"[bold]{answer['summary']}[/]")
    (comparison.dir / "bisect.json").write_text(json.dumps(answer, indent=2))
    lines = [f"## kafka-chaos bisect {comparison.dir.name}: {answer['outcome']}", "",
             "| version | runs | shown | judged | rate | shows | verdicts |",
             "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in answer["versions"]]
    (comparison.dir / "bisect.md").write_text("\n".join(lines + ["", answer["summary"], ""]))
    console.print(f"written: {comparison.dir / 'bisect.json'}, {comparison.dir / 'bisect.md'}")


def _cells(row: dict[str, Any]) -> list[str]:
    rate = "-" if row["rate"] is None else f"{row['rate']:.2f}"
    shows = {True: "yes", False: "no", None: "undecided"}[row["shows"]]
    words = ", ".join(f"{n} {w}" for w, n in sorted(row["verdicts"].items()))
    return [row["version"], str(row["runs"]), str(row["shown"]), str(row["judged"]), rate,
            shows, words]
