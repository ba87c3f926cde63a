"""``kafka-chaos known-bugs``: the known-bug matrix (``kafka_chaos.known_bugs``): each bug of
the catalogue on each Kafka version with each client, ``--runs`` runs per cell, its runs kept
in a record that the next invocation goes on from, and the Markdown table drawn from it.

The runs of one invocation are a comparison (``compare.core``) whose cells are the matrix's
cells and whose ``done`` holds the runs the record already has, so each run is healed, torn
down and stored as ``compare`` stores its runs.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from kafka_chaos import __version__, bisect, known_bugs, verdict
from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import console, fail, sigterm_as_interrupt
from kafka_chaos.cli.compare import _analyzer, _executor
from kafka_chaos.cli.run import run_params
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.compare import core as compare
from kafka_chaos.config import RunConfig
from kafka_chaos.errors import CompareError
from kafka_chaos.options import configure

BUGS_HELP = (
    "Any run option (--backend, --spark-master, ...) is added to every run. Writes each "
    "run into OUT/known-bugs-<stamp>/ (a comparison directory), each judged run into the "
    "record (--record) as it ends, and the Markdown (--markdown) from the record.\n\n"
    "Exit codes: 0 every cell has its runs; 2 some have not (interrupted, or a run without "
    "a verdict: run the command again to go on); 254 bad input; 255 the tool failed.")
_NOTE = "known-bugs"
#: Run options the matrix sets per cell, which an extra option may not.
_OWNED = {"scenario", "plan", "kafka_version", "client", "seed"}


@app.command("known-bugs", epilog=BUGS_HELP,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def known_bugs_cmd(
    ctx: typer.Context,
    bugs: Optional[str] = typer.Option(None, help="NAME,NAME: the rows (default: every "
                                       "known bug: " + ", ".join(
                                           b.name for b in known_bugs.KNOWN_BUGS) + ")."),
    kafka_versions: Optional[str] = typer.Option(
        None, help="V1,V2,...: the Kafka versions (default: the newest patch release of "
        "each minor line Maven Central serves, from 3.9)."),
    clients: str = typer.Option(",".join(known_bugs.CLIENTS), help="librdkafka, java."),
    runs: int = typer.Option(3, min=1, help="Runs per cell (seeds 1..RUNS)."),
    record: Path = typer.Option(Path("docs/known-bugs.json"), help="The record of runs: "
                                "read, and added to as each run ends."),
    markdown: Path = typer.Option(Path("docs/known-bugs.md"), help="The table, rewritten "
                                  "from the record."),
    render_only: bool = typer.Option(False, "--render-only", help="Only rewrite the "
                                     "Markdown from the record; run nothing."),
    out: Path = typer.Option(Path("runs"), help="Directory the runs' directory is made in."),
) -> None:
    """Run the known-bug matrix: each known bug's scenario on each Kafka version with each
    client, --runs times; the runs the record already holds are not run again. Then the
    table of how often each cell showed its bug."""
    try:
        chosen = known_bugs.bugs_named(bugs)
        wanted = [c.strip() for c in clients.split(",") if c.strip()]
        for client in wanted:
            if client not in known_bugs.CLIENTS:
                raise ValueError(f"--clients {clients}: {client!r}: choose among "
                                 f"{', '.join(known_bugs.CLIENTS)}")
        versions = _versions(kafka_versions)
        kept = known_bugs.load(record)
    except (ValueError, CompareError, ClusterError) as exc:
        fail(str(exc))
    _, given = run_params(list(ctx.args), "kafka-chaos known-bugs")
    for owned in sorted(given & _OWNED):
        fail(f"--{owned.replace('_', '-')}: each known bug's row sets it (--bugs, "
             "--kafka-versions and --clients choose the cells)")
    command = _command(ctx, bugs, kafka_versions, clients, runs)
    if not render_only:
        sigterm_as_interrupt()
        try:
            _run(ctx, chosen, versions, wanted, runs, kept, record, markdown, out, command)
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]: the running cell was healed and torn down; "
                          "the record keeps every judged run: run the command again to go on")
    _render(kept, chosen, versions, wanted, runs, markdown, command)
    pending = sum(len(known_bugs.missing(kept, c, list(range(1, runs + 1))))
                  for c in known_bugs.cells(chosen, versions, wanted))
    console.print(f"written: {markdown} ({pending} run(s) of the matrix still to do)")
    raise typer.Exit(verdict.EXIT_UNKNOWN if pending else verdict.EXIT_VALID)


def _versions(text: str | None) -> list[str]:
    """The ``--kafka-versions`` given, or the default columns from Maven Central's list."""
    if text:
        out = [v.strip() for v in text.split(",") if v.strip()]
        for v in out:
            bisect.release(v)  # ValueError naming it
        return out
    from kafka_chaos.clusters import central

    return known_bugs.newest_patches(central.fetch_versions())


def _command(ctx: typer.Context, bugs: str | None, versions: str | None, clients: str,
             runs: int) -> str:
    """The command line that regenerates the table (as ``docs/known-bugs.md`` names it)."""
    parts = ["kafka-chaos known-bugs"]
    if bugs:
        parts.append(f"--bugs {bugs}")
    if versions:
        parts.append(f"--kafka-versions {versions}")
    if clients != ",".join(known_bugs.CLIENTS):
        parts.append(f"--clients {clients}")
    parts += [f"--runs {runs}", *ctx.args]
    return " ".join(parts)


def _configs(ctx: typer.Context, cells: list[known_bugs.Cell]) -> dict[str, dict]:
    """Each cell's ``RunConfig`` (as JSON) or, where it cannot run, ``{"skipped": why}``.
    Raises ``ValueError`` for an extra option that is bad in itself."""
    out = {}
    for cell in cells:
        params, given = run_params([*cell.bug.args, *ctx.args], "kafka-chaos known-bugs")
        settings = {"kafka_version": cell.kafka, "client": cell.client}
        if cell.bug.broker:
            settings["broker_properties"] = dict(cell.bug.broker)
        try:
            cfg, _ = configure(params, given, settings)
            out[cell.key] = {"config": cfg.model_dump(mode="json")}
        except ValueError as exc:
            out[cell.key] = {"skipped": str(exc)}
    return out


def _run(ctx: typer.Context, chosen, versions, wanted, runs, kept, record: Path,
         markdown: Path, out: Path, command: str) -> None:
    """Run every seed the record lacks, cell by cell, adding each judged run to it."""
    seeds = list(range(1, runs + 1))
    cells = known_bugs.cells(chosen, versions, wanted)
    try:
        configs = _configs(ctx, cells)
    except ValueError as exc:
        fail(str(exc))
    by_id, entries = {}, []
    for n, cell in enumerate(cells, 1):
        entry = {"id": f"{n:02d}_{cell.bug.name}_kafka={cell.kafka}_{cell.client}",
                 "label": f"{cell.bug.name} kafka={cell.kafka} {cell.client}",
                 "settings": {"bug": cell.bug.name, "kafka_version": cell.kafka,
                              "client": cell.client}, **configs[cell.key]}
        if "skipped" in entry:
            console.print(f"[yellow]{entry['label']} cannot run: {entry['skipped']}[/]")
        entries.append(entry)
        by_id[entry["id"]] = cell
    if not any("config" in e for e in entries):
        fail("no cell of the matrix can run")
    manifest = {"kafka_chaos": __version__, _NOTE: {"command": command},
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "plan": None, "matrix": [], "repeats": runs, "seeds": seeds,
                "fail_on": "violation",
                "spark_master": next(e for e in entries if "config" in e)["config"][
                    "spark_master"],
                "cells": entries, "running": None,
                "done": {f"{e['id']}/seed-{s}": {"exit_code": None, "error": None,
                                                 "recorded": True}
                         for e in entries for s in seeds
                         if s not in known_bugs.missing(kept, by_id[e["id"]], seeds)}}
    todo = sum(1 for e in entries if "config" in e for s in seeds
               if f"{e['id']}/seed-{s}" not in manifest["done"])
    if not todo:
        console.print("every cell has its runs in the record")
        return
    comparison = compare.create(out, manifest, prefix="known-bugs")
    console.print(f"known-bugs directory: {comparison.dir}: {todo} run(s) to do")
    execute, analyze = _executor(comparison), _analyzer(comparison)
    started: dict[Path, float] = {}

    def timed_execute(cfg: RunConfig, run_dir: Path, text: str) -> dict:
        started[run_dir] = time.monotonic()
        return execute(cfg, run_dir, text)

    def analyze_and_record(run_dir: Path, facts: dict | None):
        decided = analyze(run_dir, facts)
        cell = by_id[run_dir.parent.name]
        results = compare.results_of(run_dir)
        if results is not None:
            outcome = bisect.Outcome.parse(cell.bug.outcome)
            known_bugs.add(kept, cell, {
                "seed": int(run_dir.name.removeprefix("seed-")),
                "date": datetime.now(timezone.utc).date().isoformat(),
                "verdict": results.get("verdict"), "shown": outcome.shown(results),
                "seconds": round(time.monotonic() - started.get(run_dir, time.monotonic()),
                                 1),
                "client": _client_release(run_dir)})
            known_bugs.save(record, kept)
            _render(kept, chosen, versions, wanted, runs, markdown, command)
        return decided

    compare.run_pending(comparison, timed_execute, analyze_and_record, console.print)


def _client_release(run_dir: Path) -> str | None:
    """``"librdkafka 2.16.0"`` or ``"java 4.4.0"``: the client and release the run ran,
    from its ``run.json`` (None when it does not say)."""
    import json

    try:
        facts = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return None
    client = facts.get("client") if isinstance(facts, dict) else None
    if isinstance(client, dict) and client.get("name") and client.get("version"):
        return f"{client['name']} {client['version']}"
    return None


def _render(kept, chosen, versions, wanted, runs, markdown: Path, command: str) -> None:
    text = known_bugs.render(kept, chosen, known_bugs.columns(kept, versions), wanted, runs,
                             command)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    tmp = markdown.with_name(f".{markdown.name}.tmp")
    tmp.write_text(text)
    tmp.replace(markdown)
