"""Benchmark of ``analysis.check`` on a synthetic history.

    PYTHONPATH=. python bench/analysis_bench.py [N_OPS] [--master local[2]] [--keys 8]

Writes a clean history of about ``N_OPS`` lines (default 200000) into a temp dir: client sends
(~5% fail, ~5% info) and polls of the latest records of a key, a few nemesis ops, then one
final poll per key reading the whole partition. Prints the Spark start-up time, the analysis
time (``analysis_time_s``: validation + Spark, session already running) and ops/s.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import analysis  # noqa: E402
from analysis.spark import session  # noqa: E402
from history import NEMESIS, HistoryWriter  # noqa: E402


def generate(path: Path, n_ops: int, keys: int, processes: int, seed: int) -> None:
    """Write a valid, anomaly-free history of about ``n_ops`` lines to ``path``."""
    rng = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(keys)]  # partition -> values by offset
    next_value = 0
    next_process = processes
    procs = list(range(processes))
    with HistoryWriter(path) as w:
        budget = n_ops - 2 * keys  # lines left for the workload before the final reads
        while budget >= 2:
            if rng.random() < 0.001:
                w.append(NEMESIS, "invoke", "kill", {"nodes": [rng.randint(1, 3)]})
                w.append(NEMESIS, "info", "kill", {"killed": [1]})
                budget -= 2
                continue
            slot = rng.randrange(len(procs))
            p, k = procs[slot], rng.randrange(keys)
            if rng.random() < 0.6:
                v, next_value = next_value, next_value + 1
                w.append(p, "invoke", "send", {"key": k, "value": v})
                outcome = rng.random()
                if outcome < 0.05:
                    w.append(p, "fail", "send", {"key": k, "value": v}, "NOT_ENOUGH_REPLICAS")
                elif outcome < 0.10:
                    # An info send may or may not have happened; here it did, half the time.
                    if rng.random() < 0.5:
                        logs[k].append(v)
                    w.append(p, "info", "send", {"key": k, "value": v}, "_MSG_TIMED_OUT")
                    procs[slot], next_process = next_process, next_process + 1
                else:
                    logs[k].append(v)
                    w.append(p, "ok", "send", {"key": k, "value": v, "partition": k,
                                               "offset": len(logs[k]) - 1})
            else:
                w.append(p, "invoke", "poll", {"key": k})
                start = max(0, len(logs[k]) - rng.randint(1, 20))
                records = [[o, logs[k][o]] for o in range(start, len(logs[k]))]
                w.append(p, "ok", "poll", {"key": k, "partition": k, "records": records,
                                           "final": False, "end_offset": len(logs[k])})
            budget -= 2
        for k in range(keys):
            w.append(procs[0], "invoke", "poll", {"key": k})
            w.append(procs[0], "ok", "poll", {
                "key": k, "partition": k, "records": [[o, v] for o, v in enumerate(logs[k])],
                "final": True, "end_offset": len(logs[k])})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n_ops", nargs="?", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1,
                    help="check the same file this many times (the first run warms the JVM)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kc-bench-") as tmp:
        path = Path(tmp) / "history.jsonl"
        t = time.perf_counter()
        generate(path, args.n_ops, args.keys, args.processes, args.seed)
        gen_s = time.perf_counter() - t
        size_mb = path.stat().st_size / 1e6
        t = time.perf_counter()
        session(args.master)
        startup_s = time.perf_counter() - t
        results = [analysis.check(path, spark_master=args.master) for _ in range(args.repeat)]
    result = results[-1]
    ops = result["stats"]["ops"]
    print(f"history: {ops} ops, {size_mb:.1f} MB, generated in {gen_s:.1f} s")
    print(f"spark start-up: {startup_s:.1f} s (not included below)")
    for i, r in enumerate(results, 1):
        secs = r["analysis_time_s"]
        print(f"analysis run {i}: {secs:.2f} s, {ops / secs:,.0f} ops/s")
    print(f"valid: {result['valid']}  anomalies: {result['anomaly_types']}  "
          f"unknown: {result['unknown_reasons']}")


if __name__ == "__main__":
    main()
