"""Fixed cost of analysing a small history: what every short run and every test pays.

    PYTHONPATH=. python bench/small_check_bench.py [HISTORY] [--repeats 3] [--master local[2]]

HISTORY defaults to the report fixture (``tests/fixtures/report_run/history.jsonl``, 1,925
lines of a real run under leader kills). Prints, in one process: the SparkSession start, the
first (cold) ``analysis.check`` and ``--repeats`` warm ones, each with the number of Spark jobs
it ran and its phases (columnar copy, shared table, op counts, checkers, cycle search) as
``analysis.check`` reports them in ``timings_s``. The history is copied to a temporary
directory first; the cold check includes converting it into its columnar copy.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_chaos import analysis  # noqa: E402
from kafka_chaos.analysis.spark import session  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/report_run/history.jsonl"


def _jobs(spark) -> int:
    """Jobs started so far (ids are sequential; the tracker keeps only the latest ones)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1) + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", nargs="?", type=Path, default=FIXTURE)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    lines = sum(1 for _ in args.history.open("rb"))
    print(f"history: {args.history} ({lines:,} lines)")
    # a copy: the first check writes the columnar copy beside the history, not in the fixture
    tmp = Path(tempfile.mkdtemp(prefix="kc-small-"))
    history = Path(shutil.copy(args.history, tmp / "history.jsonl"))
    t = time.perf_counter()
    spark = session(args.master, small=True)
    spark.range(1).count()
    print(f"session start: {time.perf_counter() - t:.2f} s")
    walls = []
    for i in range(args.repeats + 1):
        before = _jobs(spark)
        t = time.perf_counter()
        res = analysis.check(history, spark_master=args.master)
        wall = time.perf_counter() - t
        phases = " ".join(f"{k} {v:.2f}" for k, v in res.get("timings_s", {}).items())
        print(f"{'cold' if i == 0 else 'warm'} check: {wall:.2f} s, "
              f"{_jobs(spark) - before} Spark jobs, valid={res['valid']}; {phases}")
        if i:
            walls.append(wall)
    if walls:
        print(f"warm median: {statistics.median(walls):.2f} s")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
