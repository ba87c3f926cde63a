"""Warming the analysis up while a short run goes, so that the run's verdict comes warm.

The first check in a fresh JVM pays for loading and compiling Spark's planner and operators:
8.65 s on the 1,925-line report fixture, against 4.50 s for the next ones
(``bench/small_check_bench.py``, ``docs/performance.md``). ``warm_up`` pays it early, on a
tiny made-up history that touches every checker (sends, polls, a transaction, an assign,
final reads), so the verdict after the run is a warm check.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kafka_chaos.history import HistoryWriter

#: The made-up history: ``(process, type, f, value)`` lines after its header. Two keys, one
#: producer, one transactional producer, one consumer, and final reads of both keys.
_LINES = [
    (0, "invoke", "assign", {"keys": [0, 1], "seek": "beginning"}),
    (0, "ok", "assign", {"keys": [0, 1], "seek": "beginning"}),
    (1, "invoke", "send", [["send", 0, 1], ["send", 1, 2]]),
    (1, "ok", "send", [["send", 0, [0, 1]], ["send", 1, [0, 2]]]),
    (2, "invoke", "txn", [["send", 0, 3], ["poll"]]),
    (2, "ok", "txn", [["send", 0, [1, 3]], ["poll", {"1": [[0, 2]]}]]),
    (0, "invoke", "poll", [["poll"]]),
    (0, "ok", "poll", [["poll", {"0": [[0, 1], [1, 3]], "1": [[0, 2]]}]]),
    (3, "invoke", "poll", [["poll"]]),
    (3, "ok", "poll", [["poll", {"0": [[0, 1], [1, 3]]},
                        {"final": True, "range": {"0": [0, 2]}, "eof": True}]]),
    (3, "invoke", "poll", [["poll"]]),
    (3, "ok", "poll", [["poll", {"1": [[0, 2]]},
                        {"final": True, "range": {"1": [0, 1]}, "eof": True}]]),
]

#: The configuration the made-up history claims (what a default run promises).
_CONFIG = {"acks": "all", "idempotence": True, "txn": True, "retries": 2147483647,
           "max_in_flight": 5, "min_insync_replicas": 2, "replication_factor": 3,
           "unclean_leader_election": False, "isolation_level": "read_committed",
           "sub_via": "assign", "auto_commit": False, "auto_offset_reset": "earliest"}


#: The made-up history's temporary directory: ``kc-warm-up-<pid>-<random>``.
PREFIX = "kc-warm-up-"


def remove_stale(folder: Path | None = None) -> list[str]:
    """Remove the warm-up directories in ``folder`` (default: the temporary directory) whose
    process is gone: a run SIGKILLed while it warmed up cannot remove its own. Returns what
    was removed, as text (``kafka-chaos cluster down`` prints it)."""
    removed = []
    for d in Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = d.name[len(PREFIX):].partition("-")[0]
        if d.is_dir() and (not pid.isdigit() or not Path(f"/proc/{pid}").exists()):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"warm-up history {d}")
    return removed


def warm_up(spark_master: str) -> dict[str, Any]:
    """Start the analysis session for a small history (``analysis.spark.session``) and check
    the made-up history once, in a temporary directory removed afterwards. Returns that
    check's result (``analysis.check``; ``analysis_time_s`` is what the warm-up cost, the
    session start included when this call started it). Raises whatever ``analysis.check``
    raises (callers on a background thread ignore it: the real check reports its own
    errors)."""
    from kafka_chaos.analysis import check

    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-") as tmp:
        path = Path(tmp) / "history.jsonl"
        with HistoryWriter(path, header={"config": _CONFIG}, columnar="inline",
                           flush_each=False) as w:
            for process, type_, f, value in _LINES:
                w.append(process, type_, f, value)
        return check(path, spark_master=spark_master)


def archive_child(master: str) -> None:
    """``cds.build``'s child process: the made-up check, then the JVM's exit, awaited (it
    writes the class archive as it exits, after this process could have ended)."""
    from pyspark import SparkContext

    from kafka_chaos.analysis.cds import BUILD_TIMEOUT_S
    from kafka_chaos.analysis.spark import session

    warm_up(master)
    session(master).stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the gateway JVM exits at the end of its input
        gateway.proc.wait(timeout=BUILD_TIMEOUT_S)
