"""The one place a SparkSession is configured for the analysis."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from kafka_chaos.analysis import cds, jvm
# check_master and CONNECT_PORT are this module's names too (cli/spark.py, server.py)
from kafka_chaos.analysis.masters import CONNECT as _CONNECT
from kafka_chaos.analysis.masters import CONNECT_PORT, check_master  # noqa: F401
from kafka_chaos.analysis.masters import LOCAL as _LOCAL

#: Shuffle partitions for joins/aggregations. Spark's default (200) makes every small shuffle of a
#: local run schedule 200 near-empty tasks; histories are at most a few million rows.
SHUFFLE_PARTITIONS = 4


def is_connect(spark: SparkSession) -> bool:
    """``spark`` is a Spark Connect client session (``sc://``): no ``sparkContext``, no JVM in
    this process; the plans run in the server's driver."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


#: Below this many history lines a check is many small Spark jobs: the driver JVM then starts
#: with the client compiler only and the serial collector (4,837-line history, 2 cores, cold
#: JVM: 27.8 s instead of 35.9 s), and every shuffle goes into one partition (the checkers'
#: single summary job of a 1,925-line history: 37 tasks in 20 stages, 8.5 s -> 4.5 s warm).
#: Large histories keep the default JIT and ``SHUFFLE_PARTITIONS``.
SMALL_HISTORY_OPS = 200_000
#: With C1 alone the JVM reserves only 48 MiB for compiled code; a session that checks a few
#: histories filled it ("CodeCache is full. Compiler has been disabled") and slowed down.
_SHORT_JOB_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
#: A large history's JVM: the parallel collector. Spark's sort and hash pages and cached
#: batches are large arrays, which G1 keeps in runs of regions of their own; with G1 a 10 M-op
#: check took 139 s in a 3 GiB heap and 160 s in a 2 GiB one, with this 133 s and 134 s
#: (``docs/performance.md``). And the optimizing compiler (C2) only for methods called or
#: looped ten times as often as HotSpot's defaults ask: a check plans, generates and compiles
#: code for every query (Janino, Catalyst), and C2 spent 40 s of CPU at 10 M ops (a fifth of
#: the JVM's) on such code that ran a few thousand times; the hot loops over rows reach the
#: higher thresholds within milliseconds. C2 then took 25 s, and the check 3.5-16 s less (4
#: paired runs, mean 7.8 s). And C2 inlines a hot callee only up to 100 bytes of bytecode,
#: not 325 (``-XX:FreqInlineSize``): at 10 M ops C2's CPU 22 s -> 14 s with the task threads
#: as fast, the check 3.5-5.2 s less (4 paired runs); at 50 bytes the tasks took a fifth
#: longer.
_LONG_JOB_JVM = ("-XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000 "
                 "-XX:Tier4MinInvocationThreshold=6000 -XX:Tier4CompileThreshold=150000 "
                 "-XX:Tier4BackEdgeThreshold=400000 -XX:FreqInlineSize=100")
#: The environment the driver JVM starts with (``session``, ``server.start``): glibc's malloc
#: keeps an arena per thread that allocated, up to 8 per core, and Spark's many threads left
#: them resident: a 10 M-op check's JVM peaked at 3.49 GiB in a 3 GiB heap, with 2 arenas at
#: 3.20 GiB (``docs/performance.md``).
JVM_ENV = {"MALLOC_ARENA_MAX": "2"}


#: SQL settings of a small history (first value) and a large one (second, Spark's defaults).
#: A small check's cost is planning and compiling many operators over few rows: interpreted
#: expressions and no whole-stage code generation skip the Janino compiles, and joins without
#: a broadcast hint shuffle instead of running a broadcast job each (1,925-line fixture, warm
#: median of 3: 6.4 s -> 4.3 s, 19 -> 12 jobs; ``bench/small_check_bench.py``).
_SHORT_JOB_SQL = {
    "spark.sql.codegen.wholeStage": ("false", "true"),
    "spark.sql.codegen.factoryMode": ("NO_CODEGEN", "FALLBACK"),
    "spark.sql.autoBroadcastJoinThreshold": ("-1", "10MB"),
}


#: Driver heap bounds, MiB: the machine's RAM / 8, within these (``machine_settings``).
DRIVER_MEMORY_MB = (1024, 3072)
#: Driver heap per worker thread of a local master, MiB, at most (``machine_settings``).
HEAP_PER_THREAD_MB = 1024
#: Spark's memory page below a full-size heap (``heap_settings``).
SMALL_HEAP_PAGE = "4m"
#: Environment variable of extra Spark settings, ``key=value`` pairs separated by commas
#: (``--spark-conf`` on the command line adds to them).
SPARK_CONF_ENV = "KAFKA_CHAOS_SPARK_CONF"


def machine_settings(threads: int | None = None) -> dict[str, str]:
    """Spark settings sized from this machine: ``spark.driver.memory``, an eighth of its RAM
    within ``DRIVER_MEMORY_MB``, and for a ``local`` master of ``threads`` worker threads at
    most ``HEAP_PER_THREAD_MB`` per thread (not below the lower bound). With local masters the
    driver JVM is the executor, and Spark divides its execution memory among the running
    tasks: a 10 M-op check took 131.6 s in a 3 GiB heap and 134.1 s in a 2 GiB one on 2
    threads, at 4.37 and 3.92 GiB peak RSS (``docs/performance.md``). What follows from the
    heap is ``heap_settings``'s, applied to the heap in effect after the user's overrides."""
    try:
        total_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (ValueError, OSError):
        total_mb = 8 * DRIVER_MEMORY_MB[0]
    lo, hi = DRIVER_MEMORY_MB
    heap_mb = min(max(total_mb // 8, lo), hi)
    if threads:
        heap_mb = max(lo, min(heap_mb, threads * HEAP_PER_THREAD_MB))
    return {"spark.driver.memory": f"{heap_mb}m"}


_SIZE = re.compile(r"([0-9]+)\s*([kmgtp]?)b?", re.IGNORECASE)


def size_mb(size: str) -> int:
    """A JVM memory size as Spark reads ``spark.driver.memory`` (``2g``, ``2048m``, ``2048``:
    MiB without a unit; ``k``/``m``/``g``/``t``/``p``, optionally with ``b``) -> MiB, rounded
    down. Raises ``ValueError`` naming the size."""
    m = _SIZE.fullmatch(size.strip())
    if m is None:
        raise ValueError(f"spark.driver.memory={size!r} is not a memory size (e.g. 2g, 2048m)")
    shift = {"k": -10, "": 0, "m": 0, "g": 10, "t": 20, "p": 30}[m[2].lower()]
    return int(m[1]) << shift if shift >= 0 else int(m[1]) >> -shift


def heap_settings(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` (merged: ``machine_settings``, then the user's) with what follows from the
    heap in them (``spark.driver.memory``, Spark's 1 GiB default if absent) filled in, unless
    the user set it:

    - ``spark.driver.maxResultSize``, the heap: the cycle search collects its edge lists,
      which outgrew Spark's 1 GiB default at 10 M ops (its anomalies were then unknown).
    - ``spark.buffer.pageSize``, ``SMALL_HEAP_PAGE`` below ``DRIVER_MEMORY_MB[1]``: Spark
      sizes its sort and hash pages from the heap and the cores (1 to 64 MiB), and the JVM's
      G1 collector, whose regions are 1 MiB in such a heap, needs as many free regions in a
      row for each page as it has MiB; with a 2 GiB heap a 10 M-op check spent 17 minutes in
      full collections (or the JVM died), where 4 MiB pages finished it in 159 s
      (``docs/performance.md``). At 3 GiB the default pages were faster (139 s against 148 s).
      The parallel collector large histories now run (``_LONG_JOB_JVM``) was measured with
      them: 134 s in a 2 GiB heap.

    Raises ``ValueError`` when ``spark.driver.memory`` is not a memory size."""
    heap_mb = size_mb(settings.get("spark.driver.memory", "1g"))
    derived = {"spark.driver.maxResultSize": f"{heap_mb}m"}
    if heap_mb < DRIVER_MEMORY_MB[1]:
        derived["spark.buffer.pageSize"] = SMALL_HEAP_PAGE
    return {**derived, **settings}


def parse_conf(pairs: list[str] | str | None) -> dict[str, str]:
    """``["k=v", ...]`` or ``"k=v,k=v"`` -> ``{k: v}``. Raises ``ValueError`` naming the bad
    pair (no ``=``, a key that is not a ``spark.`` setting, or a ``spark.driver.memory`` that
    is not a memory size: ``size_mb``)."""
    if isinstance(pairs, str):
        pairs = [p for p in pairs.split(",") if p.strip()]
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark.") or not value.strip():
            raise ValueError(f"{pair!r} is not a Spark setting (spark.some.key=value)")
        if key == "spark.driver.memory":
            size_mb(value)
        out[key] = value.strip()
    return out


#: The errors-only log4j2 configuration of every JVM the analysis starts: the driver names its
#: file (``session``); the Connect server and standalone daemons get the folder as
#: ``SPARK_CONF_DIR``.
CONF_DIR = Path(__file__).with_name("conf")


def session(master: str = "local[2]", small: bool = False,
            conf: dict[str, str] | None = None) -> SparkSession:
    """Return the process-wide SparkSession, creating it on first use.

    Args:
        master: Spark master URL; ``local[N]`` runs N worker threads in this process's JVM.
        small: the history is small (``SMALL_HISTORY_OPS``): start the driver JVM tuned for
            short jobs (only when this call launches the JVM) and shuffle into one partition
            (runtime settings: applied to an existing session too, either way).
        conf: Spark settings that override everything here (``--spark-conf``); those of the
            ``KAFKA_CHAOS_SPARK_CONF`` environment variable come before them.

    Settings: app name ``kafka-chaos``, web UI and console progress bars off, SQL shuffles into
    ``SHUFFLE_PARTITIONS`` partitions (1 when ``small``), adaptive query execution off, log
    level ``ERROR`` (Spark's WARN lines would interleave with the CLI's output),
    ``driver_settings`` (driver memory, collector), and ``heap_settings`` of the heap in
    effect once ``conf`` is applied. The driver JVM starts with ``JVM_ENV`` in its
    environment.

    For a ``local`` master the driver binds to 127.0.0.1, and ``SPARK_LOCAL_IP`` is set to it in
    this process's environment unless already set (the JVM reads it at launch): the nemesis
    and the local backend add bridges and addresses on this host, and the analysis must not
    depend on the machine's outside address (Spark otherwise resolves the hostname and may pick
    an interface a run created or cut).

    The driver JVM logs errors only (``analysis/conf/log4j2.properties``, named by
    ``-Dlog4j2.configurationFile`` in ``spark.driver.defaultJavaOptions``) and its start-up
    lines are left out of stderr (``analysis.jvm``), so Spark's lines do not interleave with
    the verdict, and maps the classes of the class data sharing
    archive when there is one (``analysis.cds``: half the start-up time); a JVM that cannot
    start with it starts without, and the archive is deleted. ``SPARK_CONF_DIR`` is an empty
    folder while the JVM launches (``cds.conf_dir``: HotSpot archives no class path with
    files in a folder), unless the environment names one.

    ``getOrCreate`` semantics: when a session already exists in this process it is returned
    as is and ``master`` is ignored.

    ``sc://host[:port]`` (``CONNECT_PORT`` by default) makes a Spark Connect client session of
    a running server (``analysis.server``, ``kafka-chaos spark-server``) instead: no JVM starts
    here, the check's runtime SQL settings are set on it, ``machine_settings()`` and the JVM
    options are the server's own, and a ``conf`` or environment setting that is not a runtime
    one raises. The server reads the history's columnar copy at the path this process gives:
    a server on this machine, or one that mounts the same folder at the same path.

    Raises:
        pyspark.errors.PySparkRuntimeError: the JVM could not start (e.g. no Java 17+ on PATH).
        ValueError: a setting is malformed (``parse_conf``, ``size_mb``), naming it.
    """
    overrides = {**parse_conf(os.environ.get(SPARK_CONF_ENV)), **(conf or {})}
    if _CONNECT.fullmatch(master):
        return _connect(master, {**_runtime_settings(small), **overrides})
    log = f"-Dlog4j2.configurationFile={(CONF_DIR / 'log4j2.properties').as_uri()}"
    archive = cds.java_options()
    jvm_options = {"spark.driver.extraJavaOptions": _SHORT_JOB_JVM} if small else {}
    settings = heap_settings({"spark.master": master, "spark.app.name": "kafka-chaos",
                              **driver_settings(master), **jvm_options,
                              "spark.driver.defaultJavaOptions": f"{log} {archive}".strip(),
                              **_runtime_settings(small, local_threads(master)), **overrides})
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with launch_env({"SPARK_CONF_DIR": str(cds.conf_dir())}):
        try:
            jvm.launch(settings)
        except PySparkRuntimeError:
            # only a mapped archive is dropped: ``cds.build``'s child, which writes one, and
            # the user's own options fail as they are
            if (not archive.startswith(cds.MAP_OPTION)
                    or archive not in settings["spark.driver.defaultJavaOptions"]):
                raise
            # a JVM that cannot start with the archive (a damaged file: HotSpot stops on it)
            # starts without; the archive goes only if that start works
            settings["spark.driver.defaultJavaOptions"] = log
            jvm.launch(settings)
            cds.discard()
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def launch_env(env: dict[str, str] | None = None) -> Iterator[None]:
    """``JVM_ENV`` and ``env`` (each unless set already) in this process's environment while
    the JVM launches (pyspark hands the launched JVM this process's environment; it takes no
    other), removed again after: brokers and tools started later do not inherit them. One
    that another thread starts during the launch would: harmless, since they only bound
    malloc's arenas and name Spark's configuration folder."""
    wanted = {**JVM_ENV, **(env or {})}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update({key: saved[key] or value for key, value in wanted.items()})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def driver_settings(master: str) -> dict[str, str]:
    """Static settings of every driver JVM the analysis starts (its own session's, or the
    ``spark-server``'s) for Spark master ``master``: ``machine_settings()``, the parallel
    collector (``_LONG_JOB_JVM``; a small history's session has its own options), web UI and
    console progress bars off, a bounded history of past jobs, and for a ``local`` master a
    driver bound to 127.0.0.1 (``session``)."""
    settings = {
        **machine_settings(local_threads(master)),
        "spark.driver.extraJavaOptions": _LONG_JOB_JVM,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # the driver keeps UI data of past jobs even with the UI off; a session that runs many
        # checks (tests, a live verdict) ran out of its 1 GiB heap holding 5,000 stages
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "10000",
        "spark.sql.ui.retainedExecutions": "50",
    }
    if master.startswith("local"):
        settings["spark.driver.host"] = settings["spark.driver.bindAddress"] = "127.0.0.1"
    return settings


def local_threads(master: str) -> int | None:
    """Worker threads of a ``local`` master (``local``: 1, ``local[N]``: N, ``local[*]``: this
    machine's cores); None for any other master."""
    m = _LOCAL.fullmatch(master)
    if m is None:
        return None
    return (os.cpu_count() or 1) if m[2] == "*" else int(m[2] or 1)


def _runtime_settings(small: bool, threads: int | None = None) -> dict[str, str]:
    """The SQL settings of a check: runtime ones, which a Spark Connect session can set too.
    ``threads``: the cores of a ``local`` master, if known."""
    settings = {
        "spark.sql.shuffle.partitions": "1" if small else str(SHUFFLE_PARTITIONS),
        # the analysis's tables are partitioned by key alone; joins on (key, value) or
        # (key, offset, value) then need no second shuffle
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        # an aggregation whose input is already sorted by its keys (the cached reads, by
        # process, key, op) streams instead of building a hash table of every group
        "spark.sql.execution.replaceHashWithSortAgg": "true",
        # cached tables uncompressed: building compressed column batches cost more than it
        # saved (the reads of a 1 M-op history: 12.7 s -> 9.0 s)
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Adaptive query execution off, whatever the size: it runs each shuffle as a job of
        # its own and plans again after it, and there is no skew for it to handle (the key
        # shuffles choose their own partitions: ``versions.key_partitions``); 799 lines:
        # 27.7 s -> 23.5 s cold, 15.2 s -> 12.3 s warm; 10 M ops, 3 pairs: 91.2-94.8 s ->
        # 87.9-90.3 s (``docs/performance.md``)
        "spark.sql.adaptive.enabled": "false",
    }
    for key, (small_value, large_value) in _SHORT_JOB_SQL.items():
        settings[key] = small_value if small else large_value
    if threads and not small:
        # Spark splits a Parquet file into as many parts as cores, by bytes; the final reads
        # are the last rows of the reads' file, which every check but one skips by their
        # row groups' statistics: of 2 parts of a 10 M-op history's reads, one task scanned
        # all the polls' rows (8.3 s) while the other core idled (0.5 s)
        settings["spark.sql.files.minPartitionNum"] = str(4 * threads)
    return settings


def _connect(url: str, settings: dict[str, str]) -> SparkSession:
    """This process's Spark Connect session to ``url``, with ``settings`` set on it. Only
    runtime settings can be: a static one (``spark.driver.memory``) raises, naming it."""
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in settings.items():
        spark.conf.set(key, value)
    return spark


def cores(spark: SparkSession) -> int:
    """The cores Spark runs tasks on (``defaultParallelism``; under Spark Connect, what the
    server was started with, if it says)."""
    if is_connect(spark):
        return int(spark.conf.get("spark.default.parallelism", None) or SHUFFLE_PARTITIONS // 2)
    return spark.sparkContext.defaultParallelism
