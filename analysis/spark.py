"""The one place a SparkSession is configured for the analysis."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from pyspark.sql import SparkSession

#: Shuffle partitions for joins/aggregations. Spark's default (200) makes every small shuffle of a
#: local run schedule 200 near-empty tasks; histories are at most a few million rows.
SHUFFLE_PARTITIONS = 4

_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_STANDALONE = re.compile(r"spark://([^:/,]+:[0-9]+)(,[^:/,]+:[0-9]+)*")


def check_master(master: str, timeout_s: float = 3.0) -> None:
    """Refuse a Spark master URL that cannot work, before a run spends minutes on it.

    Accepted (Spark's "Master URLs"): ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``;
    ``spark://host:port[,host:port...]`` of which one must accept a TCP connection within
    ``timeout_s`` seconds; ``yarn``; ``k8s://...``; ``sc://...`` (Spark Connect).

    Raises ``ValueError`` naming the problem.
    """
    if _LOCAL.fullmatch(master) or master == "yarn" or master.startswith(("k8s://", "sc://")):
        return
    if not _STANDALONE.fullmatch(master):
        raise ValueError(f"{master!r} is not a Spark master URL (local[N], local[*], "
                         "spark://host:port, yarn, k8s://...)")
    errors = []
    for hostport in master.removeprefix("spark://").split(","):
        host, port = hostport.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            errors.append(f"{hostport}: {exc}")
    raise ValueError(f"{master!r}: no master answers ({'; '.join(errors)})")


#: Below this many history lines a check is many small Spark jobs: the driver JVM then starts
#: with the client compiler only and the serial collector (4,837-line history, 2 cores, cold
#: JVM: 27.8 s instead of 35.9 s), and adaptive query execution is off: it runs each shuffle
#: as a job of its own, and there is no skew to adapt to (799 lines: 27.7 s -> 23.5 s cold,
#: 15.2 s -> 12.3 s warm); every shuffle goes into one partition (the checkers' single
#: summary job of a 1,925-line history: 37 tasks in 20 stages, 8.5 s -> 4.5 s warm). Large
#: histories keep the default JIT, AQE and ``SHUFFLE_PARTITIONS``.
SMALL_HISTORY_OPS = 200_000
#: With C1 alone the JVM reserves only 48 MiB for compiled code; a session that checks a few
#: histories filled it ("CodeCache is full. Compiler has been disabled") and slowed down.
_SHORT_JOB_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"


def session(master: str = "local[2]", small: bool = False) -> SparkSession:
    """Return the process-wide SparkSession, creating it on first use.

    Args:
        master: Spark master URL; ``local[N]`` runs N worker threads in this process's JVM.
        small: the history is small (``SMALL_HISTORY_OPS``): start the driver JVM tuned for
            short jobs (only when this call launches the JVM), turn adaptive query execution
            off and shuffle into one partition (runtime settings: applied to an existing
            session too, either way).

    Settings: app name ``kafka-chaos``, web UI and console progress bars off, SQL shuffles into
    ``SHUFFLE_PARTITIONS`` partitions (1 when ``small``), log level ``ERROR`` (Spark's WARN lines would interleave
    with the CLI's output). Driver memory is Spark's default (1 GiB heap).

    For a ``local`` master the driver binds to 127.0.0.1, and ``SPARK_LOCAL_IP`` is set to it in
    this process's environment unless already set (the JVM reads it at launch): the nemesis
    and the local backend add bridges and addresses on this host, and the analysis must not
    depend on the machine's outside address (Spark otherwise resolves the hostname and may pick
    an interface a run created or cut).

    ``SPARK_CONF_DIR`` defaults to ``analysis/conf`` (errors-only log4j2 configuration), so
    Spark's start-up banner does not interleave with the verdict.

    ``getOrCreate`` semantics: when a session already exists in this process it is returned
    as is and ``master`` is ignored.

    Raises:
        pyspark.errors.PySparkRuntimeError: the JVM could not start (e.g. no Java 17+ on PATH).
    """
    builder = (SparkSession.builder
               .master(master)
               .appName("kafka-chaos")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1" if small else str(SHUFFLE_PARTITIONS))
               # the driver keeps UI data of past jobs even with the UI off; a session that runs
               # many checks (tests, a live verdict) ran out of its 1 GiB heap holding 5,000 stages
               .config("spark.ui.retainedJobs", "100")
               .config("spark.ui.retainedStages", "100")
               .config("spark.ui.retainedTasks", "10000")
               .config("spark.sql.ui.retainedExecutions", "50"))
    builder = builder.config("spark.sql.adaptive.enabled", str(not small).lower())
    if small:
        builder = builder.config("spark.driver.extraJavaOptions", _SHORT_JOB_JVM)
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).with_name("conf")))
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
