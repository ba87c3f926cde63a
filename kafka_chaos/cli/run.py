"""``kafka-chaos run``, ``analyze`` and ``publish``: a chaos run from its options to its
verdict, and the verdict of a stored history.

Exit codes (``kafka_chaos.verdict``): 0 valid, 1 anomalies counted under ``--fail-on`` or a
steady-state limit broken, 2 unknown or interrupted, 254 bad input, 255 the tool failed while
it ran; never 0 when the analysis failed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from kafka_chaos import options as run_options
from kafka_chaos import plan as plan_file
from kafka_chaos import verdict
from kafka_chaos.check import write_no_verdict
from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import FAIL_ON, console, fail, sigterm_as_interrupt
from kafka_chaos.cli.flags import with_settings
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.orchestrate import check_inputs, execute


def analyze_dir(run_dir: Path | str, spark_master: str, fail_on: str,
                facts: dict | None = None, out_dir: Path | None = None,
                fresh: bool = False, limits: dict | None = None) -> int:
    """Check ``run_dir/history.jsonl`` (``run_dir`` may be a URL), write ``results.json``,
    ``junit.xml`` and ``report.html`` (into ``out_dir``, default ``run_dir``), print the
    verdict; returns the exit code (``check.analyze_run``). Bad input or a crash of the
    analysis exits 254 or 255 with its message, an interrupt 2, leaving an earlier
    ``results.json`` as it was; in a ``fresh`` run directory (``run``'s own, which has none)
    they leave the unknown verdict's (``check.write_no_verdict``). ``limits`` replace the
    run's steady-state limits (``check.analyze_run``)."""
    from kafka_chaos.check import analyze_run

    try:
        decided = analyze_run(run_dir, spark_master, fail_on, facts, console, out_dir, limits)
    except KeyboardInterrupt:
        if fresh:
            write_no_verdict(Path(run_dir), "interrupted during the analysis", facts)
        console.print("[yellow]interrupted[/]: no verdict (unknown)"
                      + ("" if fresh else "; results.json left as it was"))
        raise typer.Exit(verdict.EXIT_UNKNOWN)
    if decided.error is not None:
        if fresh:
            write_no_verdict(Path(run_dir), decided.error, facts)
        fail(decided.error, decided.code)
    return decided.code


#: The end of the help of ``run`` and ``analyze`` (typer keeps paragraphs apart).
EXIT_CODES_HELP = ("Writes results.json, junit.xml, summary.md and report.html into the run "
                   "directory.\n\n"
                   "Exit codes: 0 valid; 1 anomalies counted under --fail-on (violations, or any "
                   "anomaly), or a steady-state limit broken (--max-unavailable, "
                   "--max-recovery); 2 unknown verdict or interrupted; 254 bad input (an option, a "
                   "plan, a history, a file); 255 the tool failed while it ran (never 0 when "
                   "the analysis failed).")


def run_cmd(
    ctx: typer.Context,
    plan: Optional[Path] = typer.Option(None, help="Plan file: the run's settings in YAML "
                                        "(README, Plan files; its schema: kafka-chaos plan "
                                        "schema). Flags given on the command line override "
                                        "it."),
    fail_on: str = FAIL_ON,
    out: Path = typer.Option(Path("runs"), help="Directory of run directories."),
    publish: Optional[str] = typer.Option(None, help="After the verdict, copy the run "
                                          "directory (history and its columnar copy) into "
                                          "this directory or URL (hdfs://...): storage a "
                                          "Spark cluster reads (kafka-chaos publish)."),
    **settings: Any,
) -> None:
    """Bring up a cluster, run the workload under faults, and check the history."""
    from kafka_chaos.analysis.remote import is_url
    from kafka_chaos.runner import new_run_dir

    params = {"plan": plan, "fail_on": fail_on, **settings}
    given = {name for name in params
             if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"}
    try:
        if plan is not None and plan_file.load(plan).compares:
            raise ValueError(f"--plan {plan}: its matrix: and repeats: sections are for "
                             "kafka-chaos compare")
        cfg, fail_on = run_options.configure(params, given, announce=console.print)
    except ValueError as exc:
        fail(str(exc))
    if publish is not None and not is_url(publish) and Path(publish).exists() \
            and not Path(publish).is_dir():
        fail(f"--publish {publish}: not a directory")
    try:
        kafka = check_inputs(cfg)
    except ValueError as exc:
        fail(str(exc))
    sigterm_as_interrupt()
    run_dir = new_run_dir(out)
    console.print(f"run directory: {run_dir}")
    try:
        facts = execute(cfg, kafka, run_dir, console, fail_on=fail_on)
    except KeyboardInterrupt:
        write_no_verdict(run_dir, "interrupted before the analysis")
        console.print("[yellow]interrupted[/]: faults healed, cluster removed; "
                      f"re-analyse with: kafka-chaos analyze {run_dir}")
        raise typer.Exit(verdict.EXIT_UNKNOWN)
    except ClusterError as exc:
        write_no_verdict(run_dir, f"the run failed: {exc}")
        fail(str(exc), exc.exit_code)
    except Exception as exc:  # a bug or an unforeseen client error: never "anomalies"
        write_no_verdict(run_dir, f"the run crashed: {type(exc).__name__}: {exc}")
        fail(f"{type(exc).__name__}: {exc} (traceback in {run_dir / 'error.txt'}); "
             f"the history so far can be checked with: kafka-chaos analyze {run_dir}",
             verdict.EXIT_ERROR)
    code = analyze_dir(run_dir, cfg.spark_master, fail_on, facts, fresh=True)
    console.print(f"rerun: {(run_dir / 'command.txt').read_text().strip()}"
                  + ("" if "--seed" in sys.argv else f" --seed {cfg.seed}"))
    if publish is not None:
        try:
            _publish(run_dir, publish)
        except typer.Exit:  # the verdict stands; a failed copy is never a silent 0
            code = code if code == verdict.EXIT_ANOMALIES else verdict.EXIT_ERROR
    raise typer.Exit(code)


# typer reads the options from the signature: one per setting of the table, after --plan
app.command("run", epilog=EXIT_CODES_HELP)(with_settings(run_cmd, before=["ctx", "plan"]))


def run_params(args: list[str], prog: str) -> tuple[dict[str, Any], set[str]]:
    """The ``run`` command's parameters parsed from ``args`` (its defaults for the rest), and
    the names of those ``args`` gave: what ``compare`` and ``plan check`` configure a run
    from, as ``run`` itself does. Raises ``click.UsageError`` on a bad option."""
    command = typer.main.get_command(app).get_command(None, "run")  # type: ignore[attr-defined]
    ctx = command.make_context(prog, list(args))
    params = dict(ctx.params)
    given = {name for name in params
             if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"}
    return params, given


def _publish(run_dir: Path, dest: str) -> Path | str:
    """``publish.publish`` with its errors turned into one message and exit 254 (no history,
    the destination exists, a malformed history) or 255 (the copy failed): a ``typer.Exit``
    here, so that ``run --publish`` keeps the verdict it has."""
    from kafka_chaos.analysis.remote import is_url
    from kafka_chaos.publish import publish

    try:
        target = publish(run_dir, dest if is_url(dest) else Path(dest))
    except KafkaChaosError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:
        fail(f"{exc.filename or dest}: {exc.strerror}", verdict.EXIT_ERROR)
    console.print(f"published: {target} (kafka-chaos analyze {target} --spark-master URL)")
    return target


@app.command("analyze", epilog=EXIT_CODES_HELP)
def analyze_cmd(
    run_dir: str = typer.Argument(..., help="A run directory holding history.jsonl, or its "
                                  "URL (hdfs://..., s3a://...: kafka-chaos publish)."),
    spark_master: str = typer.Option("local[2]", help="Spark master (local[*], spark://..., "
                                     "sc://... of kafka-chaos spark-server)."),
    fail_on: str = FAIL_ON,
    out: Optional[Path] = typer.Option(
        None, "--out", help="Write results.json, junit.xml, summary.md and report.html into "
        "this folder (made if missing) instead of RUN_DIR: for a run directory that cannot be "
        "written."),
    max_unavailable: Optional[str] = typer.Option(
        None, "--max-unavailable", help="Judge the run's steady state with this limit (10% of "
        "the time, or 30s) instead of the one it ran with; none: no limit."),
    max_recovery: Optional[str] = typer.Option(
        None, "--max-recovery", help="Judge the recovery after each heal with this limit (s) "
        "instead of the one the run had; none: no limit."),
) -> None:
    """Re-analyse a stored history; rewrites results.json (keeping the run's facts)."""
    from kafka_chaos.analysis.remote import is_url
    from kafka_chaos.analysis.spark import check_master

    if fail_on not in verdict.FAIL_ON:
        fail(f"--fail-on {fail_on!r}: choose violation or any")
    limits = _limits(max_unavailable, max_recovery)
    try:
        check_master(spark_master)
    except ValueError as exc:
        fail(f"--spark-master {exc}")
    url = is_url(run_dir)
    if url and out is None:
        fail(f"{run_dir}: a URL: give --out DIR for results.json, junit.xml and report.html")
    if not url and not (Path(run_dir) / "history.jsonl").is_file():
        fail(f"{run_dir}: no history.jsonl here")
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"--out {out}: {exc.strerror or exc}")
    target = out if out is not None else Path(run_dir)
    # access(2) also answers EROFS for a read-only mount, where root's rights do not help
    if not os.access(target, os.W_OK):
        fail(f"{target}: cannot be written" if out is not None else
             f"{run_dir}: cannot be written: give --out DIR for results.json, junit.xml and "
             "report.html")
    raise typer.Exit(analyze_dir(run_dir if url else Path(run_dir), spark_master, fail_on,
                                 out_dir=out, limits=limits))


def _limits(max_unavailable: str | None, max_recovery: str | None) -> dict[str, Any]:
    """``analyze``'s steady-state limits: the ones given, ``none`` as None (no limit); exits
    254 naming the flag for a value that is no limit."""
    from kafka_chaos import steady

    out: dict[str, Any] = {}
    if max_unavailable is not None:
        try:
            out["max_unavailable"] = (None if max_unavailable.lower() == "none"
                                      else steady.canonical(max_unavailable))
        except ValueError as exc:
            fail(str(exc))
    if max_recovery is not None:
        try:
            seconds = None if max_recovery.lower() == "none" else float(max_recovery)
        except ValueError:
            seconds = -1.0
        if seconds is not None and not seconds >= 0:
            fail(f"--max-recovery {max_recovery!r}: give seconds (15) or none")
        out["max_recovery_s"] = seconds
    return out


@app.command("publish")
def publish_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl."),
    dest: str = typer.Argument(..., help="Directory to copy it into: storage every executor "
                               "of the Spark cluster mounts at the same path, or a URL "
                               "(hdfs://..., s3a://...)."),
) -> None:
    """Copy a run directory (history, its columnar copy, the run's files) to DEST/<name> for
    analysis on a Spark cluster; never overwrites (exit 254 naming the problem)."""
    _publish(run_dir, dest)
