"""Publishing a run directory where a Spark cluster can read it (``kafka-chaos publish``,
``run --publish``).

Executors on other hosts read the history's columnar copy (``history.parquet/``) by its path,
so a history analysed on a cluster must sit on storage every executor mounts at the same path
(NFS, a CSI volume shared by driver and executor pods, ...). Publishing copies what the
analysis and the report need there: ``history.jsonl``, its current columnar copy (made first,
validating the history, when missing or stale) and the run's own files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kafka_chaos.history import columnar

#: The run's files copied beside the history when present (``runner.run``, ``verdict``).
RUN_FILES = ("config.json", "scenario.json", "command.txt", "run.json", "results.json",
             "junit.xml", "report.html", "live.jsonl")


class PublishError(RuntimeError):
    """The run directory cannot be published: no history, or the destination holds one of
    that name already (nothing is overwritten)."""


def publish(run_dir: Path, dest: Path) -> Path:
    """Copy ``run_dir`` (its history, columnar copy and ``RUN_FILES``) to
    ``dest/<run directory name>`` and return that path; ``dest`` is created if missing.

    The copy is made under a hidden temporary name and renamed once complete and checked
    (its columnar copy must be current for the copied ``history.jsonl``), so a reader never
    sees half of it.

    Raises:
        PublishError: no ``history.jsonl`` in ``run_dir``, or ``dest`` already holds the name.
        HistoryError: the history is malformed (named line), found while making its copy.
        OSError: a file cannot be read or written.
    """
    run_dir = Path(run_dir).resolve()  # ``runs/latest`` publishes under the run's own name
    history = run_dir / "history.jsonl"
    if not history.is_file():
        raise PublishError(f"{run_dir}: no history.jsonl here")
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
