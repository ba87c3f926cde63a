"""``kafka-chaos``: run chaos tests, re-analyse histories, manage clusters of every backend.

Exit codes of ``run`` and ``analyze``: 0 valid, 1 anomalies counted under ``--fail-on``, 2
unknown, error (bad input included) or interrupted; never 0 when the analysis failed.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from clusters import dist
from clusters.errors import ClusterError
from kafka_chaos import plan as plan_file
from kafka_chaos import report
from kafka_chaos.config import SCENARIOS, RunConfig, load_scenario, parse_range

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Jepsen-style chaos testing of real Kafka clusters.")
cluster_app = typer.Typer(no_args_is_help=True, help="Start, inspect and remove clusters of any "
                          "backend; build the docker backend's image.")
app.add_typer(cluster_app, name="cluster")
plan_app = typer.Typer(no_args_is_help=True, help="Plan files: their JSON schema, and checking "
                       "one without running it.")
app.add_typer(plan_app, name="plan")
console = Console()


def _fail(message: str) -> None:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(report.EXIT_UNKNOWN)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _sigterm_as_interrupt() -> None:
    # so that `kill <runner>` heals and tears down like Ctrl-C does
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _config_of(run_dir: Path) -> dict | None:
    # format-1 histories carry no configuration; the run directory's config.json does
    try:
        return json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None


def _analyze(run_dir: Path, spark_master: str, fail_on: str, facts: dict | None = None) -> int:
    """Check ``run_dir/history.jsonl``, write ``results.json``, print the verdict; the exit code.

    Any error or interrupt is exit 2 (unknown) and leaves an earlier ``results.json`` as it was.
    """
    import analysis
    from history import HistoryError

    path = run_dir / "history.jsonl"
    try:
        result = analysis.check(path, spark_master=spark_master, config=_config_of(run_dir))
    except HistoryError as exc:
        _fail(f"{path}: {exc}")
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: no verdict (unknown); results.json left as it was")
        raise typer.Exit(report.EXIT_UNKNOWN)
    except (Exception, MemoryError) as exc:  # a crash of the analysis is no verdict: unknown
        _fail(f"analysis failed: {type(exc).__name__}: {str(exc)[:300]}")
    result["fail_on"] = fail_on
    facts = facts if facts is not None else report.run_facts(run_dir)
    report.judge_run(result, facts)
    report.write_results(run_dir, result, facts)
    report.render(result, console, run_dir)
    return _write_reports(run_dir, {**result, "run": facts}, report.exit_code(result, fail_on))


def _write_reports(run_dir: Path, results: dict, code: int) -> int:
    """Write ``junit.xml`` and ``report.html`` next to ``results.json``; returns the exit code.
    A report that cannot be written is an error: exit 2 unless anomalies made it 1 already
    (an interrupt is exit 2), never a silent 0."""
    from history import read_header
    from kafka_chaos import html_report, junit

    try:
        header = read_header(run_dir / "history.jsonl") or {}
        junit.write(run_dir, results, header.get("config") or _config_of(run_dir))
        path = html_report.write(run_dir, results)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/] while writing junit.xml and report.html")
        return report.EXIT_UNKNOWN
    except Exception as exc:
        console.print(f"[red]error:[/] could not write junit.xml and report.html: "
                      f"{type(exc).__name__}: {str(exc)[:300]}")
        return code if code == report.EXIT_ANOMALIES else report.EXIT_UNKNOWN
    console.print(f"report: {path} (and junit.xml)")
    return code


#: Runs at most this long get their analysis session started while the workload runs: their
#: histories stay under ``SMALL_HISTORY_OPS`` lines at the rates measured here.
WARM_UP_MAX_S = 120.0


def _warm_up_spark(cfg: RunConfig) -> None:
    """Start the analysis SparkSession on a background thread while a short run goes, so the
    verdict does not wait for the JVM (about 4.5 s of launch on 2 cores). A failure here is
    ignored: the analysis starts its own session and reports the error."""
    if cfg.time_limit_s > WARM_UP_MAX_S or not cfg.spark_master.startswith("local"):
        return

    def warm() -> None:
        try:
            from analysis.spark import session
            session(cfg.spark_master, small=True).range(1).count()
        except Exception:
            pass

    threading.Thread(target=warm, name="spark-warm-up", daemon=True).start()


#: ``run`` options whose ``RunConfig`` field is named otherwise (units in the field's name).
_FIELD_OF = {"time_limit": "time_limit_s", "nemesis_interval": "nemesis_interval_s",
             "crash_client_interval": "crash_client_interval_s"}


def _scenario_settings(fields: dict, given: set[str]) -> dict:
    """Apply the scenario's settings to ``fields`` except the options the user gave (command
    line or plan), announcing each; returns the settings applied."""
    applied = {}
    settings = load_scenario(fields["scenario"]).settings
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if name not in RunConfig.model_fields or name.startswith("scenario"):
            raise ValueError(f"--scenario {fields['scenario']}: settings.{name} is no run "
                             "option")
        if name in given and fields.get(name) != value:
            console.print(f"[yellow]scenario {fields['scenario']}[/]: keeping your {flag} "
                          f"{fields[name]} (the scenario sets {value}; its preconditions may "
                          "not happen)")
            continue
        fields[name] = value
        applied[name] = value
    if applied:
        console.print(f"scenario {fields['scenario']} sets "
                      + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in applied.items()))
    return applied


def _check_inputs(cfg: RunConfig) -> "dist.KafkaDist":
    """Everything checkable before a run starts: Spark master, Kafka jars, the backend's needs
    (for ``local``: root and network namespaces)."""
    from analysis.spark import check_master
    from clusters import backends

    try:
        check_master(cfg.spark_master)
    except ValueError as exc:
        _fail(f"--spark-master {exc}")
    try:
        # before any download or run directory
        backends.get(cfg.backend).check_environment(cfg.backend_options(), cfg.brokers,
                                                    cfg.controllers)
        kafka = (dist.from_home(Path(cfg.kafka_home)) if cfg.kafka_home
                 else dist.resolve(cfg.kafka_version))
        dist.check_java()
    except ClusterError as exc:
        _fail(str(exc))
    return kafka


BACKEND = typer.Option("local", help="Cluster backend: local (one broker JVM per network "
                       "namespace on this machine), docker (one container per node) or ssh "
                       "(existing hosts of an --inventory).")
IMAGE = typer.Option(None, help="Docker backend: the Kafka image (default apache/kafka:VERSION; "
                     "java 17+ and sh on PATH, jars in /opt/kafka/libs).")
INVENTORY = typer.Option(None, help="ssh backend: the inventory YAML (hosts, SSH users and keys, "
                         "node ids, roles, Kafka home or upload).")
ACCEPT_KEYS = typer.Option(False, "--accept-unknown-host-keys", help="ssh backend: accept host "
                           "keys missing from known_hosts (logged); a changed key is refused.")
FAIL_ON = typer.Option("violation", help="Exit 1 on a 'violation' (an anomaly the configuration "
                       "does not permit) or on 'any' anomaly.")
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
                                        "clock, lose-unfsynced); in-sync-follower (leader); "
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
    out: Path = typer.Option(Path("runs"), help="Directory of run directories."),
) -> None:
    """Bring up a cluster, run the workload under faults, and check the history."""
    from nemesis.schedule import parse_packages

    options = dict(locals())
    try:
        if fail_on not in report.FAIL_ON:
            raise ValueError(f"--fail-on {fail_on!r}: choose violation or any")
        packages = parse_packages(nemesis)
        try:
            span = parse_range(ops_per_txn)
        except ValueError as exc:
            raise ValueError(f"--ops-per-txn {exc}") from None
        fields = {k: v for k, v in options.items() if k in RunConfig.model_fields}
        fields.update({
            "kafka_home": kafka_home and str(kafka_home), "time_limit_s": time_limit,
            "inventory": inventory and str(inventory.resolve()),
            "ops_per_txn": span, "crash_client_interval_s": crash_client_interval,
            "nemesis": packages, "nemesis_interval_s": nemesis_interval})
        fields = {k: v for k, v in fields.items() if v is not None}
        given = {_FIELD_OF.get(name, name) for name in options
                 if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"}
        if plan is not None:  # a plan's values give way to flags given on the command line
            planned = plan_file.run_fields(plan_file.load(plan), plan)
            if "fail_on" not in given:
                fail_on = planned.get("fail_on", fail_on)
            fields.update({k: v for k, v in planned.items() if k not in given | {"fail_on"}})
            given |= set(planned)
            if fail_on not in report.FAIL_ON:
                raise ValueError(f"--fail-on {fail_on!r}: choose violation or any")
        if fields.get("scenario") is not None:
            if fields["scenario"] not in SCENARIOS and Path(fields["scenario"]).exists():
                fields["scenario"] = str(Path(fields["scenario"]).resolve())
            fields["scenario_settings"] = _scenario_settings(fields, given)
        cfg = RunConfig(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "--" + str(err["loc"][0]).removesuffix("_s").replace("_", "-") if err["loc"] else ""
        _fail(f"{where} {err['msg'].removeprefix('Value error, ')}".strip())
    except ValueError as exc:
        _fail(str(exc))

    from kafka_chaos.runner import new_run_dir, run

    kafka = _check_inputs(cfg)
    _sigterm_as_interrupt()
    run_dir = new_run_dir(out)
    console.print(f"run directory: {run_dir}")
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("workload", total=1.0)

        def progress(frac: float, counts: dict) -> None:
            bar.update(task, completed=frac, description=f"workload {counts}")

        try:
            facts = run(cfg, kafka, run_dir, log=console.log, progress=progress,
                        on_ready=lambda: _warm_up_spark(cfg))
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]: faults healed, cluster removed; "
                          f"re-analyse with: kafka-chaos analyze {run_dir}")
            raise typer.Exit(report.EXIT_UNKNOWN)
        except ClusterError as exc:
            _fail(str(exc))
        except Exception as exc:  # a bug or an unforeseen client error: unknown, never "anomalies"
            (run_dir / "error.txt").write_text(traceback.format_exc())
            _fail(f"{type(exc).__name__}: {exc} (traceback in {run_dir / 'error.txt'}); "
                  f"the history so far can be checked with: kafka-chaos analyze {run_dir}")
    code = _analyze(run_dir, spark_master, fail_on, facts)
    console.print(f"rerun: {(run_dir / 'command.txt').read_text().strip()}"
                  + ("" if "--seed" in sys.argv else f" --seed {seed}"))
    raise typer.Exit(code)


@app.command("analyze", epilog=EXIT_CODES_HELP)
def analyze_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl."),
    spark_master: str = typer.Option("local[2]", help="Spark master (local[*], spark://...)."),
    fail_on: str = FAIL_ON,
) -> None:
    """Re-analyse a stored history; rewrites results.json (keeping the run's facts)."""
    from analysis.spark import check_master

    if fail_on not in report.FAIL_ON:
        _fail(f"--fail-on {fail_on!r}: choose violation or any")
    try:
        check_master(spark_master)
    except ValueError as exc:
        _fail(f"--spark-master {exc}")
    if not (run_dir / "history.jsonl").is_file():
        _fail(f"{run_dir}: no history.jsonl here")
    raise typer.Exit(_analyze(run_dir, spark_master, fail_on))


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl and "
                                   "results.json."),
) -> None:
    """Rebuild report.html of a run directory from its history.jsonl and results.json (no
    analysis; exit 2 naming the file when one is missing or malformed)."""
    from history import HistoryError
    from kafka_chaos import html_report

    try:
        path = html_report.write(run_dir)
    except (html_report.ReportError, HistoryError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or run_dir}: {exc.strerror}")
    console.print(f"report: {path}")


@plan_app.command("schema")
def plan_schema() -> None:
    """Print the JSON schema of plan files (for editors and CI linters)."""
    print(json.dumps(plan_file.schema(), indent=2))


@plan_app.command("check")
def plan_check(path: Path = typer.Argument(..., help="A plan file.")) -> None:
    """Validate a plan and print the run configuration it gives (exit 2 naming the line and
    key path of the first problem)."""
    try:
        fields = plan_file.run_fields(plan_file.load(path), path)
        fail_on = fields.pop("fail_on", "violation")
        cfg = RunConfig(**fields)
    except ValidationError as exc:
        _fail(f"--plan {path}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    except ValueError as exc:
        _fail(str(exc))
    print(json.dumps({**cfg.model_dump(mode="json"), "fail_on": fail_on}, indent=2))


@app.command("fetch-kafka")
def fetch_kafka(versions: list[str] = typer.Argument(None, help="Versions (default: the pinned one).")) -> None:
    """Download Kafka broker jars from Maven Central into the cache (done by setup.sh)."""
    try:
        dist.check_java()
        for version in versions or [dist.DEFAULT_KAFKA_VERSION]:
            kafka = dist.resolve(version)
            console.print(f"Kafka {kafka.version}: {kafka.libs}")
    except ClusterError as exc:
        _fail(str(exc))


@cluster_app.command("image")
def cluster_image(
    kafka_version: str = typer.Option(None, help="Kafka version of the jars."),
) -> None:
    """Build a Kafka image for the docker backend without any registry (debootstrap + JRE +
    the jars from Maven Central; cached by content hash) and print its tag for --image."""
    from clusters import backends, docker_image

    try:
        backends.get("docker").check_environment(backends.BackendOptions(), 0, 0)
        kafka = dist.resolve(kafka_version) if kafka_version else dist.resolve()
        import docker

        tag = docker_image.ensure_image(docker.from_env(), kafka,
                                        log=Console(stderr=True).log)  # stdout: the tag only
    except ClusterError as exc:
        _fail(str(exc))
    console.print(tag)


@cluster_app.command("up")
def cluster_up(
    backend: str = BACKEND,
    image: Optional[str] = IMAGE,
    inventory: Optional[Path] = INVENTORY,
    accept_unknown_host_keys: bool = ACCEPT_KEYS,
    brokers: int = typer.Option(3), controllers: int = typer.Option(0),
    kafka_version: str = typer.Option(None), dir: Path = typer.Option(Path("runs/cluster")),
) -> None:
    """Start a cluster and leave it running (stop it with `cluster down`)."""
    from clusters import admin, backends

    cluster = None
    try:
        chosen = backends.get(backend)
        options = backends.BackendOptions(image, inventory, accept_unknown_host_keys)
        chosen.check_environment(options, brokers, controllers)
        kafka = dist.resolve(kafka_version) if kafka_version else dist.resolve()
        old = sorted(dir.glob("*/data/meta.properties"))
        if old:  # formatting would refuse it: another cluster id (and it is someone's data)
            _fail(f"--dir {dir} holds the data of an earlier cluster ({old[0].parent}); "
                  f"remove it (rm -r {dir}) or choose another --dir")
        cluster = chosen.create(kafka, dir, brokers, controllers, {}, options)
        cluster.setup()
        admin.wait_ready(cluster.bootstrap_servers, brokers, [], timeout_s=120)
    except ClusterError as exc:
        if cluster is not None:
            cluster.teardown()  # only what this call created
        _fail(str(exc))
    console.print(f"cluster up: bootstrap servers {cluster.bootstrap_servers}")


@cluster_app.command("status")
def cluster_status(backend: str = BACKEND) -> None:
    """Show the recorded cluster and which of its processes are alive."""
    from clusters import backends

    try:
        state = backends.get(backend).status(backends.BackendOptions())
    except ClusterError as exc:
        _fail(str(exc))
    if state is None:
        console.print(f"no {backend} cluster recorded")
        raise typer.Exit(0)
    for node in state.get("nodes", []):
        alive = state["alive"].get(str(node["node_id"]), False)
        console.print(f"{node['name']:>4} id={node['node_id']} {node['host']} "
                      f"{','.join(node['roles'])}: {'[green]running' if alive else '[red]down'}[/]")
    console.print(f"bootstrap servers: {state.get('bootstrap_servers')}")


@cluster_app.command("down")
def cluster_down(
    backend: str = BACKEND,
    inventory: Optional[Path] = typer.Option(None, help="ssh backend: also clean these hosts "
                                             "when no cluster is recorded on this machine."),
    accept_unknown_host_keys: bool = ACCEPT_KEYS,
) -> None:
    """Remove the cluster and anything a crashed run left (local: processes, namespaces,
    iptables rules; docker: labelled containers and network; ssh: remote processes, the
    tool's iptables chains, node directories)."""
    from clusters import backends

    try:
        removed = backends.get(backend).cleanup(
            backends.BackendOptions(inventory=inventory,
                                    accept_unknown_host_keys=accept_unknown_host_keys))
    except ClusterError as exc:
        _fail(str(exc))
    for item in removed:
        console.print(f"[red]{item}[/]" if item.startswith("NOT") else f"removed {item}")
    if not removed:
        console.print("nothing to remove")
    if any(item.startswith("NOT") for item in removed):
        raise typer.Exit(2)


if __name__ == "__main__":
    app()
