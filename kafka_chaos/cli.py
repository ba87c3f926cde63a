"""``kafka-chaos``: run chaos tests, compare configurations, re-analyse histories, follow
verdicts across runs, manage clusters of every backend.

Exit codes of ``run``, ``analyze`` and ``compare``: 0 valid, 1 anomalies counted under
``--fail-on``, 2 unknown, error (bad input included) or interrupted; never 0 when the analysis
failed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kafka_chaos import options as run_options
from kafka_chaos import plan as plan_file
from kafka_chaos import report
from kafka_chaos.cli_cluster import cluster_app
from kafka_chaos.cli_common import (ACCEPT_KEYS, BACKEND, FAIL_ON, IMAGE, INVENTORY, console,
                                    fail, sigterm_as_interrupt)
from kafka_chaos.cli_spark import spark_app
from kafka_chaos.clusters import dist
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.config import SCENARIOS, RunConfig

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Jepsen-style chaos testing of real Kafka clusters.")
app.add_typer(cluster_app, name="cluster")
plan_app = typer.Typer(no_args_is_help=True, help="Plan files: their JSON schema, and checking "
                       "one without running it.")
app.add_typer(plan_app, name="plan")
app.add_typer(spark_app, name="spark-server")


def analyze_dir(run_dir: Path | str, spark_master: str, fail_on: str,
                facts: dict | None = None, out_dir: Path | None = None) -> int:
    """Check ``run_dir/history.jsonl`` (``run_dir`` may be a URL), write ``results.json``,
    ``junit.xml`` and ``report.html`` (into ``out_dir``, default ``run_dir``), print the
    verdict; returns the exit code (``verdict.analyze_run``). Bad input or a crash of the
    analysis exits 2 with its message; so does an interrupt, leaving an earlier
    ``results.json`` as it was."""
    from kafka_chaos.verdict import analyze_run

    try:
        verdict = analyze_run(run_dir, spark_master, fail_on, facts, console, out_dir)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: no verdict (unknown); results.json left as it was")
        raise typer.Exit(report.EXIT_UNKNOWN)
    if verdict.error is not None:
        fail(verdict.error)
    return verdict.code


#: Runs at most this long get their analysis session started while the workload runs: their
#: histories stay under ``SMALL_HISTORY_OPS`` lines at the rates measured here.
WARM_UP_MAX_S = 120.0
#: Longest wait, seconds, for the warm-up to end before the verdict's own check starts.
WARM_UP_JOIN_S = 60.0


def _warm_up_spark(cfg: RunConfig) -> threading.Thread | None:
    """Start the analysis SparkSession on a background thread while a short run goes, and
    check a tiny made-up history on it (``analysis.warm``), so the verdict waits neither for
    the JVM (about 6 s of launch on 2 cores) nor for a cold first check (30 s runs of about
    3,000 ops: 9.5 s of analysis without the check, 5.3 s with it; ``docs/performance.md``).
    With ``--live`` the live checks warm the session, and an extra check would only delay
    the first of them. A failure here is ignored: the analysis starts its own session and
    reports the error. Returns the thread (None when there is no warm-up), which the caller
    joins before the verdict's check: both share one session, whose runtime settings each
    check sets for its own history's size."""
    if cfg.time_limit_s > WARM_UP_MAX_S or not cfg.spark_master.startswith("local"):
        return None

    def warm() -> None:
        try:
            if cfg.follows_live:
                from kafka_chaos.analysis.spark import session
                session(cfg.spark_master, small=True).range(1).count()
            else:
                from kafka_chaos.analysis.warm import warm_up
                warm_up(cfg.spark_master)
        except Exception:
            pass

    thread = threading.Thread(target=warm, name="spark-warm-up", daemon=True)
    thread.start()
    return thread


def check_inputs(cfg: RunConfig) -> "dist.KafkaDist":
    """Everything checkable before a run starts: Spark master, Kafka jars, the backend's needs
    (for ``local``: root and network namespaces); exits 2 naming the problem."""
    from kafka_chaos.analysis.spark import check_master
    from kafka_chaos.clusters import backends

    try:
        check_master(cfg.spark_master)
    except ValueError as exc:
        fail(f"--spark-master {exc}")
    try:
        # before any download or run directory
        backends.get(cfg.backend).check_environment(cfg.backend_options(), cfg.brokers,
                                                    cfg.controllers)
        kafka = (dist.from_home(Path(cfg.kafka_home)) if cfg.kafka_home
                 else dist.resolve(cfg.kafka_version))
        dist.check_java()
    except ClusterError as exc:
        fail(str(exc))
    return kafka


#: The end of the help of ``run`` and ``analyze`` (typer keeps paragraphs apart).
EXIT_CODES_HELP = ("Writes results.json, junit.xml and report.html into the run directory.\n\n"
                   "Exit codes: 0 valid; 1 anomalies counted under --fail-on (violations, or any "
                   "anomaly); 2 unknown verdict, error or interrupted (never 0 when the analysis "
                   "failed).")


@app.command("run", epilog=EXIT_CODES_HELP)
def run_cmd(
    ctx: typer.Context,
    plan: Optional[Path] = typer.Option(None, help="YAML plan file (see kafka_chaos/plan.py); "
                                        "flags given on the command line override it."),
    backend: str = BACKEND,
    image: Optional[str] = IMAGE,
    inventory: Optional[Path] = INVENTORY,
    accept_unknown_host_keys: bool = ACCEPT_KEYS,
    brokers: int = typer.Option(3, help="Number of brokers."),
    controllers: int = typer.Option(0, help="Dedicated KRaft controllers (0: combined mode)."),
    kafka_version: str = typer.Option(None, help="Kafka version from Maven Central."),
    kafka_home: Optional[Path] = typer.Option(None, help="Unpacked Apache Kafka distribution."),
    time_limit: float = typer.Option(30.0, help="Seconds of workload."),
    rate: float = typer.Option(200.0, help="Target ops per second, all client processes together."),
    clients: int = typer.Option(4, help="Concurrent client processes."),
    keys: int = typer.Option(6, help="Keys; each is one partition."),
    topics: int = typer.Option(1, help="Topics the keys are spread over."),
    ops_per_txn: str = typer.Option("1..4", help="Micro-ops per op: sends of a send op, sends "
                                    "and polls of a transaction (N or MIN..MAX)."),
    poll_p: float = typer.Option(0.25, help="Share of ops (or txn micro-ops) that poll."),
    sub_via: str = typer.Option("assign", help="How consumers get partitions: assign or subscribe "
                                "(a consumer group)."),
    sub_p: float = typer.Option(0.02, help="Share of ops that re-assign / re-subscribe."),
    txn: bool = typer.Option(False, "--txn/--no-txn", help="Transactions: each op is one "
                             "transaction (transactional.id producers, read-process-write)."),
    abort_p: float = typer.Option(0.0, help="Share of transactions aborted on purpose."),
    isolation_level: str = typer.Option("read_committed",
                                        help="Consumers' isolation.level: read_committed or "
                                        "read_uncommitted."),
    auto_commit: bool = typer.Option(False, "--auto-commit/--no-auto-commit",
                                     help="enable.auto.commit (else a manual commit after polls "
                                     "with --sub-via subscribe)."),
    auto_offset_reset: str = typer.Option("earliest", help="auto.offset.reset: earliest or latest."),
    crash_clients: bool = typer.Option(False, "--crash-clients/--no-crash-clients",
                                       help="Drop a client without closing it now and then."),
    crash_client_interval: float = typer.Option(10.0, help="Seconds between client crashes."),
    acks: str = typer.Option("all", help="Producer acks: 0, 1 or all."),
    idempotence: bool = typer.Option(False, "--idempotence/--no-idempotence",
                                     help="enable.idempotence (KIP-98)."),
    retries: int = typer.Option(2147483647, help="Producer retries."),
    max_in_flight: int = typer.Option(5, help="max.in.flight.requests.per.connection."),
    linger_ms: int = typer.Option(5, help="linger.ms."),
    delivery_timeout_ms: int = typer.Option(10000, help="delivery.timeout.ms."),
    replication_factor: int = typer.Option(3, help="Replication factor of the test topics."),
    min_insync_replicas: int = typer.Option(2, help="min.insync.replicas."),
    unclean_leader_election: bool = typer.Option(
        False, "--unclean-leader-election/--no-unclean-leader-election",
        help="unclean.leader.election.enable."),
    replica_lag_time_max_ms: int = typer.Option(10000, help="replica.lag.time.max.ms."),
    nemesis: str = typer.Option("none", help="Faults: comma list of kill, stop, pause, "
                                "roll, partition, leader, unclean, clock (local, ssh), "
                                "lose-unfsynced (power loss; local); or none."),
    nemesis_targets: str = typer.Option("", help="Comma list of targets the faults draw from: "
                                        "one, leader, controller, follower, minority, majority, "
                                        "all or node ids (kill, stop, pause, roll, "
                                        "clock, lose-unfsynced); lagging-leader (kill); "
                                        "lone-leader (kill, lose-unfsynced); "
                                        "in-sync-follower (leader); "
                                        "isolate-one, "
                                        "halves, isolate-leader, isolate-controller, bridge, "
                                        "leader-replication, zombie-leader, clients-leader, "
                                        "clients-one, majorities-ring, "
                                        "one-way (partition); topic, cluster (unclean). "
                                        "Default: each fault's own."),
    nemesis_interval: float = typer.Option(10.0, help="Seconds between fault start and stop."),
    scenario: Optional[str] = typer.Option(None, help="Scripted scenario: a built-in one ("
                                           f"{', '.join(SCENARIOS)}) or a schedule file (YAML, "
                                           "see docs/scenarios.md)."),
    seed: int = typer.Option(0, help="Seed of every random choice."),
    spark_master: str = typer.Option("local[2]", help="Spark master for the analysis."),
    fail_on: str = FAIL_ON,
    live: bool = typer.Option(False, "--live/--no-live", help="Check the history while the "
                              "run goes and show the anomalies found so far (live.jsonl); the "
                              "verdict is still the full analysis at the end."),
    live_interval: float = typer.Option(10.0, help="Seconds between live checks."),
    stop_on_violation: bool = typer.Option(
        False, "--stop-on-violation/--no-stop-on-violation",
        help="End the workload at the first anomaly a live check counts under --fail-on, then "
        "heal, read every partition and analyse (implies --live)."),
    out: Path = typer.Option(Path("runs"), help="Directory of run directories."),
    publish: Optional[str] = typer.Option(None, help="After the verdict, copy the run "
                                          "directory (history and its columnar copy) into "
                                          "this directory or URL (hdfs://...): storage a "
                                          "Spark cluster reads (kafka-chaos publish)."),
) -> None:
    """Bring up a cluster, run the workload under faults, and check the history."""
    from kafka_chaos.analysis.remote import is_url
    from kafka_chaos.runner import new_run_dir

    params = {k: v for k, v in locals().items() if k != "ctx"}
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
    kafka = check_inputs(cfg)
    sigterm_as_interrupt()
    run_dir = new_run_dir(out)
    console.print(f"run directory: {run_dir}")
    try:
        facts = execute(cfg, kafka, run_dir, fail_on=fail_on)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: faults healed, cluster removed; "
                      f"re-analyse with: kafka-chaos analyze {run_dir}")
        raise typer.Exit(report.EXIT_UNKNOWN)
    except ClusterError as exc:
        fail(str(exc))
    except Exception as exc:  # a bug or an unforeseen client error: unknown, never "anomalies"
        fail(f"{type(exc).__name__}: {exc} (traceback in {run_dir / 'error.txt'}); "
             f"the history so far can be checked with: kafka-chaos analyze {run_dir}")
    code = analyze_dir(run_dir, cfg.spark_master, fail_on, facts)
    console.print(f"rerun: {(run_dir / 'command.txt').read_text().strip()}"
                  + ("" if "--seed" in sys.argv else f" --seed {cfg.seed}"))
    if publish is not None:
        try:
            _publish(run_dir, publish)
        except typer.Exit:  # the verdict stands; a failed copy is never a silent 0
            code = code if code == report.EXIT_ANOMALIES else report.EXIT_UNKNOWN
    raise typer.Exit(code)


def _publish(run_dir: Path, dest: str) -> Path | str:
    """``publish.publish`` with its errors turned into one message and exit 2."""
    from kafka_chaos.analysis.remote import RemoteError, is_url
    from kafka_chaos.history import HistoryError
    from kafka_chaos.publish import PublishError, publish

    try:
        target = publish(run_dir, dest if is_url(dest) else Path(dest))
    except (PublishError, HistoryError, RemoteError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or dest}: {exc.strerror}")
    console.print(f"published: {target} (kafka-chaos analyze {target} --spark-master URL)")
    return target


def execute(cfg: RunConfig, kafka: "dist.KafkaDist", run_dir: Path,
            command: str | None = None, fail_on: str = "violation") -> dict:
    """``runner.run`` with a progress bar, then the end of the Spark warm-up (at most
    ``WARM_UP_JOIN_S``); returns the run facts. ``fail_on`` is what a live
    check counts (``--fail-on``). Exceptions propagate (faults healed, cluster removed); a
    ``ClusterError`` leaves its message and an unforeseen one its traceback in
    ``run_dir/error.txt``."""
    from kafka_chaos.runner import run

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("workload", total=1.0)

        def progress(frac: float, counts: dict, note: str = "") -> None:
            bar.update(task, completed=frac,
                       description=f"workload {counts}" + (f"; {note}" if note else ""))

        warming: list[threading.Thread] = []

        def ready() -> None:
            thread = _warm_up_spark(cfg)
            if thread is not None:
                warming.append(thread)

        try:
            facts = run(cfg, kafka, run_dir, log=console.log, progress=progress,
                        on_ready=ready, command=command, fail_on=fail_on)
        except KeyboardInterrupt:
            raise
        except ClusterError as exc:  # the run directory keeps why there is no history
            (run_dir / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
            raise
        except Exception:
            (run_dir / "error.txt").write_text(traceback.format_exc())
            raise
    for thread in warming:  # the verdict's check then never races the warm-up's
        thread.join(WARM_UP_JOIN_S)
    return facts


@app.command("analyze", epilog=EXIT_CODES_HELP)
def analyze_cmd(
    run_dir: str = typer.Argument(..., help="A run directory holding history.jsonl, or its "
                                  "URL (hdfs://..., s3a://...: kafka-chaos publish)."),
    spark_master: str = typer.Option("local[2]", help="Spark master (local[*], spark://..., "
                                     "sc://... of kafka-chaos spark-server)."),
    fail_on: str = FAIL_ON,
    out: Optional[Path] = typer.Option(
        None, "--out", help="Write results.json, junit.xml and report.html into this folder "
        "(made if missing) instead of RUN_DIR: for a run directory that cannot be written."),
) -> None:
    """Re-analyse a stored history; rewrites results.json (keeping the run's facts)."""
    from kafka_chaos.analysis.remote import is_url
    from kafka_chaos.analysis.spark import check_master

    if fail_on not in report.FAIL_ON:
        fail(f"--fail-on {fail_on!r}: choose violation or any")
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
                                 out_dir=out))


@app.command("publish")
def publish_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl."),
    dest: str = typer.Argument(..., help="Directory to copy it into: storage every executor "
                               "of the Spark cluster mounts at the same path, or a URL "
                               "(hdfs://..., s3a://...)."),
) -> None:
    """Copy a run directory (history, its columnar copy, the run's files) to DEST/<name> for
    analysis on a Spark cluster; never overwrites (exit 2 naming the problem)."""
    _publish(run_dir, dest)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl and "
                                   "results.json."),
) -> None:
    """Rebuild report.html of a run directory from its history.jsonl and results.json (no
    analysis; exit 2 naming the file when one is missing or malformed)."""
    from kafka_chaos.history import HistoryError
    from kafka_chaos import html_report

    try:
        path = html_report.write(run_dir)
    except (html_report.ReportError, HistoryError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or run_dir}: {exc.strerror}")
    console.print(f"report: {path}")


@plan_app.command("schema")
def plan_schema() -> None:
    """Print the JSON schema of plan files (for editors and CI linters)."""
    print(json.dumps(plan_file.schema(), indent=2))


@plan_app.command("check")
def plan_check(path: Path = typer.Argument(..., help="A plan file.")) -> None:
    """Validate a plan and print the run configuration it gives, and the cells and repeats of
    its matrix (exit 2 naming the line and key path of the first problem)."""
    from kafka_chaos import matrix

    try:
        plan = plan_file.load(path)
        fields = plan_file.run_fields(plan, path)
        fail_on = fields.pop("fail_on", "violation")
        cfg = RunConfig(**fields)
    except ValidationError as exc:
        fail(f"--plan {path}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    except ValueError as exc:
        fail(str(exc))
    shown = {**cfg.model_dump(mode="json"), "fail_on": fail_on}
    if plan.compares:  # what `compare --plan` would run
        cells = matrix.cells(plan_file.dimensions(plan, path))
        shown["compare"] = {"cells": [c.label for c in cells], "repeats": plan.repeats or 1}
    print(json.dumps(shown, indent=2))


@app.command("fetch-kafka")
def fetch_kafka(versions: list[str] = typer.Argument(None, help="Versions (default: the pinned one).")) -> None:
    """Download Kafka broker jars from Maven Central into the cache (done by setup.sh)."""
    try:
        dist.check_java()
        for version in versions or [dist.DEFAULT_KAFKA_VERSION]:
            kafka = dist.resolve(version)
            console.print(f"Kafka {kafka.version}: {kafka.libs}")
    except ClusterError as exc:
        fail(str(exc))


@app.command("spark-archive")
def spark_archive(
    master: str = typer.Option("local[2]", help="Spark master of the check that loads the "
                               "classes."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Keep the archive for this "
                                    "Java and pyspark if there is one."),
) -> None:
    """Build the class data sharing archive of the analysis's driver JVM, so that its sessions
    start in half the time (done by setup.sh; again after upgrading Java or pyspark)."""
    from kafka_chaos.analysis import cds

    started = time.monotonic()
    existing = cds.archive()
    if if_missing and existing is not None and existing.is_file():
        console.print(f"class archive: {existing}")
        return
    try:
        path = cds.build(master)
    except cds.CdsError as exc:
        fail(str(exc))
    console.print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MiB, "
                  f"{time.monotonic() - started:.1f} s)")


from kafka_chaos import cli_compare  # noqa: E402,F401  (registers compare and history on app)

if __name__ == "__main__":
    app()
