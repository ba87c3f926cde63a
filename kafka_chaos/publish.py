"""Publishing a run directory where a Spark cluster can read it (``kafka-chaos publish``,
``run --publish``), and fetching it back for the report (``kafka-chaos analyze URL``).

Executors on other hosts read the history's columnar copy (``history.parquet/``) by its path
or URL, so a history analysed on a cluster must sit on storage every executor reads: a
directory mounted at the same path everywhere (NFS, a CSI volume shared by driver and executor
pods, ...) or a Hadoop file system URL (``hdfs://``, ``s3a://``; ``analysis.remote``).
Publishing copies what the analysis and the report need there: ``history.jsonl``, its current
columnar copy (made first, validating the history, when missing or stale) and the run's own
files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kafka_chaos.analysis import remote
from kafka_chaos.errors import PublishError
from kafka_chaos.history import HistoryError, columnar

#: The run's files copied beside the history when present (``runner.run``, ``verdict``).
RUN_FILES = ("config.json", "scenario.json", "command.txt", "run.json", "results.json",
             "junit.xml", "report.html", "live.jsonl")


def publish(run_dir: Path, dest: Path | str) -> Path | str:
    """Copy ``run_dir`` (its history, columnar copy and ``RUN_FILES``) to
    ``dest/<run directory name>`` and return that path (or URL, when ``dest`` is one);
    ``dest`` is created if missing.

    The copy is made under a hidden temporary name and renamed once complete and checked
    (its columnar copy must be current for the copied ``history.jsonl``), so a reader never
    sees half of it. A URL is written through the Spark session's Hadoop file system (one is
    started when none runs: ``local[1]``).

    Raises:
        PublishError: no ``history.jsonl`` in ``run_dir``, or ``dest`` already holds the name.
        HistoryError: the history is malformed (named line), found while making its copy.
        OSError: a file cannot be read or written.
        RemoteError: the URL's file system cannot be reached or written.
    """
    run_dir = Path(run_dir).resolve()  # ``runs/latest`` publishes under the run's own name
    history = run_dir / "history.jsonl"
    if not history.is_file():
        raise PublishError(f"{run_dir}: no history.jsonl here")
    if remote.is_url(dest):
        return _publish_url(run_dir, dest)
    target = Path(dest) / run_dir.name
    if target.exists():
        raise PublishError(f"{target} exists already: nothing was overwritten")
    copy = columnar.ensure(history)  # beside the history, or in the cache
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        shutil.copy2(history, tmp / history.name)
        shutil.copytree(copy.dir, columnar.copy_dir(tmp / history.name))
        for name in RUN_FILES:
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, tmp / name)
        if columnar.current(tmp / history.name) is None:  # e.g. the run is still writing it
            raise PublishError(f"{history} changed while it was copied: publish it again")
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _publish_url(run_dir: Path, dest: str) -> str:
    """``publish`` to a Hadoop file system URL."""
    from kafka_chaos.analysis.spark import session

    fs = remote.Remote(session("local[1]", small=True), dest)
    target = remote.join(dest, run_dir.name)
    if fs.exists(target):
        raise PublishError(f"{target} exists already: nothing was overwritten")
    history = run_dir / "history.jsonl"
    copy = columnar.ensure(history)
    tmp = remote.temp_name(target)
    fs.mkdirs(dest)
    fs.delete(tmp)
    try:
        fs.mkdirs(tmp)
        fs.put(history, remote.join(tmp, history.name))
        fs.put(copy.dir, remote.copy_url(remote.join(tmp, history.name)))
        for name in RUN_FILES:
            if (run_dir / name).is_file():
                fs.put(run_dir / name, remote.join(tmp, name))
        try:
            remote.current_copy(fs.spark, remote.join(tmp, history.name))
        except HistoryError:  # e.g. the run is still writing it
            raise PublishError(f"{history} changed while it was copied: publish it "
                               "again") from None
        fs.rename(tmp, target)
    finally:
        fs.delete(tmp)
    return target


#: What ``fetch`` copies back: the history and the run's files, but not the reports that the
#: analysis writes again.
FETCHED = ("history.jsonl", *(n for n in RUN_FILES if n not in ("junit.xml", "report.html")))


def fetch(url: str, local: Path, spark_master: str) -> Path:
    """Copy the run directory at ``url`` (``FETCHED`` files present there; not its columnar
    copy, which the analysis reads where it is) into the new local directory ``local`` and
    return it: the driver-side report reads the whole ``history.jsonl`` in one pass.

    Raises:
        PublishError: no ``history.jsonl`` at ``url``.
        RemoteError: the URL's file system cannot be reached or read.
        OSError: ``local`` cannot be written.
    """
    from kafka_chaos.analysis.spark import session

    fs = remote.Remote(session(spark_master), url)
    if not fs.exists(remote.join(url, "history.jsonl")):
        raise PublishError(f"{url}: no history.jsonl here")
    local = Path(local)
    local.mkdir(parents=True)
    for name in FETCHED:
        if fs.exists(remote.join(url, name)):
            fs.get(remote.join(url, name), local / name)
    return local
