"""Analysis at 100 k, 1 M and 10 M ops: wall time, peak RSS of the whole process tree, ops/s,
exactness against the seeded anomalies, and the ratio to a DuckDB reference query.

    PYTHONPATH=. python bench/analysis_bench.py [--sizes 100000,1000000,10000000]
        [--data /var/tmp/kc-bench] [--anomalies 3] [--master local[2]] [--convert]
        [--python OTHER_CHECKOUT/.venv/bin/python] [--repeats 1]

For each size, ``bench/history_gen.py`` writes a history (kept in ``--data`` and reused by later
runs with the same size, anomalies and seed) with its columnar copy, as the recorder does. Then,
each in a fresh process (so start-up costs count and RSS is that job's alone):

- ``kafka-chaos analyze``'s work (``analysis.check``, Spark session start included) on it;
  ``--convert`` first removes the columnar copy, so the figure includes making it from the
  JSON Lines (what a history from a crashed run or from elsewhere costs);
- the DuckDB reference: one SQL query over the same ``history.jsonl`` counting lost writes
  (acknowledged, never read, a later offset of the key read) and duplicates (a value read at
  two offsets). It reads only what those two checks need: the practical single-node floor.

Peak RSS is sampled every 100 ms over the process and all its descendants (the Spark JVM), summed.
``--repeats N`` runs both jobs N times per size, alternating (analysis, DuckDB, analysis, ...),
so that a slow minute of a shared machine falls on both; the table then shows the median of
each job's wall times, their ratio, and the highest peak. Prints one line per size and job,
then a table; exits 1 when a seeded count was not found exactly in some run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import json, sys
from kafka_chaos import analysis
r = analysis.check(sys.argv[1], spark_master=sys.argv[2])
print(json.dumps({"counts": {n: a["count"] for n, a in r["anomalies"].items() if a["count"]},
                  "unknown": r["unknown_reasons"], "ops": r["stats"]["ops"],
                  "analysis_time_s": r["analysis_time_s"], "timings_s": r["timings_s"]}))
"""

# Format 2 (docs/history-format.md): a send micro-op is ["send", key, [offset, value]] in a
# completion, a poll micro-op ["poll", {key: [[offset, value], ...]}, ...]. Acknowledged: an
# offset in an ok or info send, or an ok txn.
DUCKDB = """
import duckdb, json, sys
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute('''
CREATE TEMP TABLE mops AS
SELECT type, f, unnest(CAST(value AS JSON[])) AS m
FROM read_ndjson(?, columns={'type': 'VARCHAR', 'f': 'VARCHAR', 'value': 'JSON'})
WHERE f IN ('send', 'txn', 'poll') AND type IN ('ok', 'info')
''', [sys.argv[1]])
lost, dup = con.execute('''
WITH sends AS (
  SELECT CAST(m->>'$[1]' AS BIGINT) AS key, CAST(m->>'$[2][0]' AS BIGINT) AS off,
         CAST(m->>'$[2][1]' AS BIGINT) AS val
  FROM mops WHERE m->>'$[0]' = 'send' AND (f = 'send' OR type = 'ok')
    AND m->>'$[2][0]' IS NOT NULL),
polls AS (SELECT m->'$[1]' AS r FROM mops WHERE m->>'$[0]' = 'poll' AND type = 'ok'),
keyed AS (SELECT r, unnest(json_keys(r)) AS k FROM polls),
reads AS (
  SELECT CAST(k AS BIGINT) AS key, CAST(rec->>'$[0]' AS BIGINT) AS off,
         CAST(rec->>'$[1]' AS BIGINT) AS val
  FROM (SELECT k, unnest(CAST(r->k AS JSON[])) AS rec FROM keyed)),
high AS (SELECT key, max(off) AS top FROM reads GROUP BY key),
seen AS (SELECT DISTINCT key, val FROM reads)
SELECT
  (SELECT count(*) FROM sends s JOIN high h USING (key)
   WHERE s.off < h.top AND NOT EXISTS (
     SELECT 1 FROM seen r WHERE r.key = s.key AND r.val = s.val)),
  (SELECT count(*) FROM (SELECT key, val FROM reads GROUP BY key, val
                         HAVING count(DISTINCT off) > 1))
''').fetchone()
print(json.dumps({"counts": {"lost-write": lost, "duplicate": dup}}))
"""


def measure(argv: list[str]) -> tuple[float, float, dict, dict[str, int]]:
    """Run ``argv``; returns (wall s, peak RSS of the process tree in bytes, its JSON output,
    the peak RSS of each part: ``{"python": the process itself, "jvm": its descendants}``).
    Raises ``RuntimeError`` with its stderr when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    ps = psutil.Process(proc.pid)
    peak = 0
    parts = {"python": 0, "jvm": 0}
    while proc.poll() is None:
        now = {"python": 0, "jvm": 0}
        try:
            for p in [ps, *ps.children(recursive=True)]:
                try:
                    now["python" if p.pid == proc.pid else "jvm"] += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, sum(now.values()))
        parts = {k: max(parts[k], now[k]) for k in parts}
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}:\n{err[-3000:]}")
    return wall, peak, json.loads(out.strip().splitlines()[-1]), parts


def dataset(data: Path, n: int, anomalies: int, seed: int) -> tuple[Path, dict]:
    """The history of ``n`` ops (generated unless ``data`` holds it); its expected counts."""
    d = data / f"h{n}-a{anomalies}-s{seed}"
    expected = d / "expected.json"
    if not expected.exists():
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "bench" / "history_gen.py"), str(d),
                        "--ops", str(n), "--anomalies", str(anomalies), "--seed", str(seed)],
                       check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        print(f"generated {n:,} ops in {time.perf_counter() - t:.0f} s", flush=True)
    return d / "history.jsonl", json.loads(expected.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--data", type=Path, default=Path("/var/tmp/kc-bench"))
    ap.add_argument("--anomalies", type=int, default=3, help="instances of each vignette")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter whose installed kafka-chaos runs the analysis (another "
                         "checkout's virtualenv: a before/after comparison on the same files)")
    ap.add_argument("--convert", action="store_true",
                    help="remove the columnar copy first: time its conversion too")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each job per size, alternating; the table shows medians")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be 1 or more, got {args.repeats}")
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    exact = True
    for n in sizes:
        path, expected = dataset(args.data, n, args.anomalies, args.seed)
        size_mb = path.stat().st_size / 1e6
        walls, rsses, d_walls = [], [], []
        for _ in range(args.repeats):
            if args.convert:
                shutil.rmtree(path.with_name("history.parquet"), ignore_errors=True)
            wall, rss, r, parts = measure([args.python, "-P", "-c", CHECK, str(path),
                                           args.master])
            ok = r["counts"] == expected and not r["unknown"]
            exact &= ok
            print(f"{n:>10,} ops ({size_mb:,.0f} MB): analysis {wall:.1f} s wall "
                  f"(check {r['analysis_time_s']:.1f} s: {r['timings_s']}), peak RSS "
                  f"{rss / 2**30:.2f} GiB (peaks: Python {parts['python'] / 2**30:.2f}, JVM "
                  f"{parts['jvm'] / 2**30:.2f}), {'exact' if ok else 'NOT EXACT'}", flush=True)
            if not ok:
                print(f"  expected {expected}\n  found    {r['counts']}\n"
                      f"  unknown  {r['unknown']}")
            d_wall, d_rss, d, _ = measure([sys.executable, "-P", "-c", DUCKDB, str(path)])
            print(f"{'':>10} duckdb reference {d_wall:.1f} s, peak RSS {d_rss / 2**30:.2f} GiB, "
                  f"{d['counts']} (seeded: lost-write {expected.get('lost-write', 0)}, "
                  f"duplicate {expected.get('duplicate', 0)}), ratio {wall / d_wall:.2f}",
                  flush=True)
            walls.append(wall)
            rsses.append(rss)
            d_walls.append(d_wall)
        rows.append((n, statistics.median(walls), max(rsses), statistics.median(d_walls)))
    print(f"\n{'ops':>11} {'wall s':>8} {'ops/s':>9} {'peak GiB':>9} {'duckdb s':>9} {'ratio':>6}"
          f" {'vs linear':>9}" + (f"  (medians of {args.repeats} runs)"
                                   if args.repeats > 1 else ""))
    base = rows[0]
    for n, wall, rss, d_wall in rows:
        linear = (wall / base[1]) / (n / base[0])
        print(f"{n:>11,} {wall:>8.1f} {n / wall:>9,.0f} {rss / 2**30:>9.2f} {d_wall:>9.1f} "
              f"{wall / d_wall:>6.2f} {linear:>9.2f}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
