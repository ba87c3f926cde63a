"""The one place a SparkSession is configured for the analysis."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

#: Shuffle partitions for joins/aggregations. Spark's default (200) makes every small shuffle of a
#: local run schedule 200 near-empty tasks; histories are at most a few million rows.
SHUFFLE_PARTITIONS = 4


def session(master: str = "local[2]") -> SparkSession:
    """Return the process-wide SparkSession, creating it on first use.

    Args:
        master: Spark master URL; ``local[N]`` runs N worker threads in this process's JVM.

    Settings: app name ``kafka-chaos``, web UI and console progress bars off, SQL shuffles into
    ``SHUFFLE_PARTITIONS`` partitions, log level ``ERROR`` (Spark's WARN lines would interleave
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
               .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS)))
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).with_name("conf")))
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
