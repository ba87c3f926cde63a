"""Starting the analysis's driver JVM with its start-up chatter left out of the terminal.

Every fresh JVM prints a few lines to stderr before any log configuration applies: the JDK's
``WARNING: Using incubator modules: jdk.incubator.vector`` (Spark 4 opens the module) and
Spark's ``Setting default log level to "WARN".`` with its ``To adjust logging level ...``
line (printed for PySpark shells whatever the log4j2 file says). They interleave with the
verdict and tell the user nothing. pyspark lets the caller give the JVM's ``Popen``
arguments (``pyspark.java_gateway.launch_gateway``, "capturing stdout/stderr"), so the JVM's
stderr goes into a pipe that a daemon thread copies to this process's stderr, line by line,
all but those lines: an error the JVM prints still reaches the user.
"""

from __future__ import annotations

import os
import re
import sys
import threading

#: The start-up lines left out (bytes, matched at the start of a line).
NOISE = re.compile(rb"WARNING: Using incubator modules|Setting default log level to|"
                   rb"To adjust logging level use sc\.setLogLevel")


def _forward(fd: int) -> None:
    """Copy lines from ``fd`` to ``sys.stderr`` (as it is at each line: test runners swap
    it), but ``NOISE``, until the last writer closes the pipe."""
    with os.fdopen(fd, "rb") as pipe:
        for line in pipe:
            if not NOISE.match(line):
                try:
                    sys.stderr.write(line.decode(errors="replace"))
                    sys.stderr.flush()
                except (OSError, ValueError):  # stderr closed while the interpreter ends
                    return


def launch(settings: dict[str, str]) -> bool:
    """Start the driver JVM and its py4j gateway with Spark settings ``settings`` (every
    ``spark.*`` key the session is built with, ``spark.master`` included: spark-submit reads
    the JVM's options from them) unless this process has one already; ``SparkSession``'s
    builder then uses it. Returns whether this call started it.

    Raises ``pyspark.errors.PySparkRuntimeError`` (``JAVA_GATEWAY_EXITED``) when the JVM
    exits before its gateway is up (its stderr has then been copied to this process's).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return False
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    read, write = os.pipe()
    threading.Thread(target=_forward, args=(read,), daemon=True,
                     name="spark-jvm-stderr").start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write})
    finally:
        os.close(write)  # the JVM holds its own copy; the reader ends when the JVM does
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    return True
