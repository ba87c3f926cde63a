"""One run from checked inputs to its facts, outside the CLI: what ``run`` and every cell of
``compare`` do between parsing their options and the verdict (``kafka_chaos.check``).

``check_inputs`` refuses what cannot work before anything starts (``check_offline``: the
part that needs neither network, root nor download); ``execute`` runs the cluster, workload
and nemesis (``runner.run``: faults always healed, cluster always torn down) with a progress
bar, while a short run's analysis session warms up. Both raise; the CLI turns their errors
into exit codes.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kafka_chaos.admission import Admitted, admit
from kafka_chaos.clusters import dist
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.config import RunConfig


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


def distinct(configs: list[RunConfig]) -> list[RunConfig]:
    """The first of each group of ``configs`` that ``check_inputs`` would check alike: the
    same backend and backend options, shape, Kafka version or home and Spark master (a
    comparison's cells differ mostly elsewhere, and each check may download or probe)."""
    seen: dict[tuple, RunConfig] = {}
    for cfg in configs:
        key = (cfg.backend, admit(cfg).backend, cfg.brokers, cfg.controllers,
               cfg.kafka_version, cfg.kafka_home, cfg.spark_master)
        seen.setdefault(key, cfg)
    return list(seen.values())


def check_offline(cfg: RunConfig) -> Admitted:
    """What ``check_inputs`` checks that needs no network, no root and no download: the
    admission (``admission.admit``: the scenario), the Spark master's syntax, the backend's
    options and the files they name (an inventory, a client properties file), the Kafka
    version's syntax or the jars of ``--kafka-home``. Fast (files read, nothing run):
    ``plan check`` without ``--online``. Returns the admitted configuration. Raises
    ``ValueError`` (``--spark-master ...``, a scenario) or a ``ClusterError`` that is bad
    input (``DistributionError``, ``EnvironmentUnsupported``, ``SecurityError``) naming the
    problem."""
    from kafka_chaos.analysis.masters import endpoints
    from kafka_chaos.clusters import backends

    admitted = admit(cfg)
    try:
        endpoints(cfg.spark_master)
    except ValueError as exc:
        raise ValueError(f"--spark-master {exc}") from None
    backends.get(cfg.backend).check_options(admitted.backend, cfg.brokers, cfg.controllers)
    if cfg.kafka_home:
        dist.from_home(Path(cfg.kafka_home))
    else:
        dist.check_version(cfg.kafka_version)
    return admitted


def check_inputs(cfg: RunConfig) -> dist.KafkaDist:
    """Everything checkable before a run starts: ``check_offline``, then what needs this
    machine or the network: the Spark master answers, the backend's needs (for ``local``:
    root and network namespaces; for ``docker``: the daemon), the Kafka jars (downloaded now
    if missing: seconds to a minute), Java, and what the client's release needs
    (``Driver.prepare``: another confluent-kafka release's virtualenv). Returns the Kafka
    distribution. Raises
    ``ValueError`` (``--spark-master ...``, a scenario) or ``ClusterError`` naming the
    problem."""
    from kafka_chaos.analysis.masters import check_master
    from kafka_chaos.clusters import backends

    admitted = check_offline(cfg)
    try:
        check_master(cfg.spark_master)
    except ValueError as exc:
        raise ValueError(f"--spark-master {exc}") from None
    # before any download or run directory
    backends.get(cfg.backend).check_machine(admitted.backend)
    kafka = (dist.from_home(Path(cfg.kafka_home)) if cfg.kafka_home
             else dist.resolve(cfg.kafka_version))
    dist.check_java()
    from kafka_chaos.errors import ClientError
    from kafka_chaos.workloads import drivers

    try:  # what the client's release needs, had now rather than once the cluster runs
        drivers.driver_class(cfg.client).prepare(cfg.client_version)
    except ClientError as exc:
        raise ValueError(f"--client-version {cfg.client_version}: {exc}") from None
    return kafka


def execute(cfg: RunConfig, kafka: dist.KafkaDist, run_dir: Path, console: Console,
            command: str | None = None, fail_on: str = "violation") -> dict:
    """``runner.run`` of the admitted ``cfg`` (``admission.admit``) with a progress bar on
    ``console``, then the end of the Spark warm-up (at most ``WARM_UP_JOIN_S``); returns the
    run facts. ``fail_on`` is what a live check counts (``--fail-on``). Exceptions propagate
    (faults healed, cluster removed); a ``ClusterError`` leaves its message and an unforeseen
    one its traceback in ``run_dir/error.txt``. Raises ``ValueError`` before anything starts
    when ``cfg`` is not admitted."""
    from kafka_chaos.runner import run

    admitted = admit(cfg)

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("workload", total=1.0)

        def progress(frac: float, counts: dict, note: str = "") -> None:
            done = ", ".join(f"{counts.get(k, 0):,} {k}" for k in ("ok", "fail", "info"))
            bar.update(task, completed=frac,
                       description=f"workload: {done}" + (f"; {note}" if note else ""))

        warming: list[threading.Thread] = []

        def plain(text: str) -> None:
            # the run's lines are text: a partition's "[n1] | [n2, n3]" or an error's
            # "[Errno 111]" are no Rich markup to strip
            console.log(text, markup=False, highlight=False)

        def ready() -> None:
            thread = _warm_up_spark(cfg)
            if thread is not None:
                warming.append(thread)

        try:
            facts = run(admitted, kafka, run_dir, log=plain, progress=progress,
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
