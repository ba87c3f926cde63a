"""``kafka-chaos compare`` (a configuration matrix, ``kafka_chaos.compare.core``) and
``kafka-chaos history`` (verdict trends across stored runs, ``kafka_chaos.compare.trends``).

``compare`` takes the ``run`` command's options as every cell's base configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kafka_chaos import matrix
from kafka_chaos import plan as plan_file
from kafka_chaos import verdict
from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import console, fail, sigterm_as_interrupt
from kafka_chaos.cli.run import run_params
from kafka_chaos.clusters import dist
from kafka_chaos.compare import core as compare
from kafka_chaos.compare import outputs
from kafka_chaos.config import RunConfig
from kafka_chaos.orchestrate import check_inputs, distinct, execute

COMPARE_HELP = (
    "Any run option (--nemesis, --time-limit, --plan, --seed, --fail-on, ...) sets every "
    "cell's base configuration; --matrix settings override it per cell.\n\n"
    "Writes into OUT/compare-<stamp>/: compare.json (the manifest), a run directory per cell "
    "and seed, compare.csv, runs.csv, summary.md, compare.html and junit.xml.\n\n"
    "Exit codes: 0 every run valid; 1 a run counted anomalies under --fail-on; 255 the tool "
    "failed in a run; 2 a run unknown, or interrupted (finished runs are kept: --resume DIR "
    "finishes the rest); 254 bad input.")


@app.command("compare", epilog=COMPARE_HELP,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def compare_cmd(
    ctx: typer.Context,
    matrix_options: list[str] = typer.Option(
        [], "--matrix", help="SETTING=V1,V2,...: a setting the cells vary, e.g. acks=1,all, "
        "min.insync.replicas=1,2, unclean=false,true, idempotence=false,true, "
        "kafka_version=3.9.1,4.4.0, nemesis=kill,kill+partition (any run option; repeat "
        "--matrix for more; overrides a plan's matrix: entry of the same setting)."),
    repeats: Optional[int] = typer.Option(None, min=1, help="Runs per cell, with seeds SEED, "
                                          "SEED+1, ... in every cell (default: the plan's "
                                          "repeats:, else 1)."),
    resume: Optional[Path] = typer.Option(None, help="Finish the comparison in this directory "
                                          "(interrupted or crashed); takes no other option."),
    out: Path = typer.Option(Path("runs"), help="Directory the comparison directory is made "
                             "in."),
) -> None:
    """Run a configuration matrix: every combination of the --matrix settings is a cell, each
    run --repeats times under the same seeds; one table of verdicts, anomaly rates,
    availability and latency per cell."""
    if resume is not None:
        if ctx.args or matrix_options or repeats is not None \
                or getattr(ctx.get_parameter_source("out"), "name", "") == "COMMANDLINE":
            fail("--resume DIR takes no other option: the comparison's manifest holds them")
        try:
            comparison = compare.load(resume)
        except compare.CompareError as exc:
            fail(str(exc))
        if not comparison.pending():
            console.print("nothing left to run; rewriting the comparison's outputs")
        configs = {c["id"]: RunConfig(**c["config"]) for c, _ in comparison.pending()}
        _check(list(configs.values()))
    else:
        params, given = run_params(list(ctx.args), "kafka-chaos compare")
        try:
            dims = []
            if params.get("plan") is not None:
                planned = plan_file.load(Path(params["plan"]))
                dims = plan_file.dimensions(planned, Path(params["plan"]))
                repeats = repeats or planned.repeats
            by_field = {d.field: d for d in dims}  # --matrix replaces the plan's entry
            by_field.update({d.field: d for d in matrix.check_distinct(
                [matrix.parse_option(text) for text in matrix_options])})
            manifest = compare.prepare(params, given, list(by_field.values()), repeats or 1)
        except ValueError as exc:
            fail(str(exc))
        _check([RunConfig(**c["config"]) for c in manifest["cells"] if "config" in c])
        comparison = compare.create(out, manifest)
    _announce(comparison)
    sigterm_as_interrupt()
    try:
        compare.run_pending(comparison, _executor(comparison), _analyzer(comparison),
                            console.print)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: the running cell was healed and torn down; "
                      "finished runs are kept. Finish with: kafka-chaos compare --resume "
                      f"{comparison.dir}")
        _outputs(comparison)
        raise typer.Exit(verdict.EXIT_UNKNOWN)
    _outputs(comparison)
    raise typer.Exit(compare.exit_code(comparison))


def _check(configs: list[RunConfig]) -> None:
    """``check_inputs`` once per distinct backend and Kafka version (``distinct``; jars
    fetched now)."""
    for cfg in distinct(configs):
        try:
            check_inputs(cfg)
        except ValueError as exc:
            fail(str(exc))


def _announce(comparison: compare.Comparison) -> None:
    m = comparison.manifest
    ready = [c for c in comparison.cells if "config" in c]
    console.print(f"comparison directory: {comparison.dir}: {len(ready)} cell(s) × "
                  f"{m['repeats']} repeat(s), seeds {', '.join(map(str, m['seeds']))}; "
                  f"{len(comparison.pending())} run(s) to go")
    for cell in comparison.cells:
        if "skipped" in cell:
            console.print(f"[dim]skipped cell {cell['label']}: {cell['skipped']}[/]")


def _executor(comparison: compare.Comparison):
    """``execute(cfg, run_dir, command)`` for ``compare.run_pending`` (a live check counts
    what the comparison's ``--fail-on`` counts)."""

    def execute_cell(cfg: RunConfig, run_dir: Path, command: str) -> dict:
        kafka = dist.from_home(Path(cfg.kafka_home)) if cfg.kafka_home else \
            dist.resolve(cfg.kafka_version)
        return execute(cfg, kafka, run_dir, console, command, comparison.manifest["fail_on"])

    return execute_cell


def _analyzer(comparison: compare.Comparison):
    """``analyze(run_dir, facts)`` for ``compare.run_pending``: one line per verdict."""
    from kafka_chaos.check import analyze_run

    def analyze(run_dir: Path, facts: dict | None):
        result = analyze_run(run_dir, comparison.manifest["spark_master"],
                             comparison.manifest["fail_on"], facts)
        if result.results is not None:
            console.print(f"  verdict: {result.results.banner()['headline']} "
                          f"(exit {result.code})")
        return result

    return analyze


def _outputs(comparison: compare.Comparison) -> None:
    """The table and the comparison's files; a failure here is reported, not raised."""
    try:
        paths = outputs.write_all(comparison, console)
    except (Exception, KeyboardInterrupt) as exc:
        console.print(f"[red]error:[/] could not write the comparison's outputs: "
                      f"{type(exc).__name__}: {str(exc)[:300]}")
        raise typer.Exit(verdict.EXIT_UNKNOWN if isinstance(exc, KeyboardInterrupt)
                         else verdict.EXIT_ERROR)
    console.print("written: " + ", ".join(str(p) for p in paths.values()))


@app.command("history")
def history_cmd(
    runs_dir: Path = typer.Argument(Path("runs"), help="A directory of run directories "
                                    "(searched recursively, comparisons included)."),
    last: int = typer.Option(0, min=0, help="Only the last N runs of each configuration "
                             "(0: all)."),
    runs: bool = typer.Option(False, "--runs", metavar="", help="Also list every run."),
    as_json: bool = typer.Option(False, "--json", metavar="", help="Print JSON instead of tables "
                                 "(--format json)."),
    output: str = typer.Option("table", "--format", help="table (the terminal's), json, or "
                               "markdown (for $GITHUB_STEP_SUMMARY and the like)."),
) -> None:
    """Verdicts and anomaly-rate trends across stored runs, grouped by configuration (the
    nightly job's history).

    Exit codes: 0 the trends were shown, whatever the verdicts (each run's own exit code
    judged it); 254 RUNS_DIR is no directory or holds no readable results.json, or a bad
    option; 255 the tool failed; 2 interrupted."""
    import json

    from kafka_chaos.compare import trends

    if output not in ("table", "json", "markdown"):
        fail(f"--format {output!r}: choose table, json or markdown")
    if not runs_dir.is_dir():
        fail(f"{runs_dir}: not a directory")
    groups = trends.trends(trends.scan(runs_dir), last)
    if not groups:
        fail(f"{runs_dir}: no results.json below it")
    if as_json or output == "json":
        print(json.dumps([t.as_dict() for t in groups], indent=2))
        return
    if output == "markdown":
        from kafka_chaos.compare.report import RATES
        from kafka_chaos.report.markdown import trends_table

        print(f"## kafka-chaos history of {runs_dir}\n")
        print(trends_table(groups, list(RATES)))
        return
    trends.render(runs_dir, groups, console, runs)
