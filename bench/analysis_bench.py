"""Benchmark of ``analysis.check`` on a synthetic format-2 history.

    PYTHONPATH=. python bench/analysis_bench.py [N_OPS] [--master local[2]] [--keys 8]

Writes a clean history of about ``N_OPS`` lines (default 200000) into a temp dir, shaped like a
real run: ``send`` ops of 1-4 sends (~5 % ``fail``, ~5 % ``info`` with part of their sends
acknowledged), ``assign`` consumers polling in order (re-assigning to the beginning now and
then), a few nemesis ops, then final reads of every key in chunks. Prints the Spark start-up
time, the analysis time (``analysis_time_s``: validation + Spark + cycle search, session
already running), ops/s and the cycle search's figures.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_chaos import analysis  # noqa: E402
from kafka_chaos.analysis.spark import session  # noqa: E402
from kafka_chaos.history import NEMESIS, HistoryWriter  # noqa: E402

CONFIG = {"acks": "all", "idempotence": True, "txn": False, "retries": 2147483647,
          "max_in_flight": 5, "min_insync_replicas": 2, "unclean_leader_election": False,
          "isolation_level": "read_committed", "sub_via": "assign", "auto_offset_reset": "earliest"}


def generate(path: Path, n_ops: int, keys: int, processes: int, consumers: int, seed: int,
             chunk: int = 10_000) -> None:
    """Write a valid, violation-free format-2 history of about ``n_ops`` lines to ``path``."""
    rng = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(keys)]
    value = 0
    procs = list(range(processes))
    next_proc = processes + consumers
    position = {c: [0] * keys for c in range(processes, processes + consumers)}
    with HistoryWriter(path, header={"config": CONFIG}) as w:
        for c in position:
            w.append(c, "invoke", "assign", {"keys": list(range(keys)), "seek": "beginning"})
            w.append(c, "ok", "assign", {"keys": list(range(keys)), "seek": "beginning"})
        budget = n_ops - 2 * keys * 2 - 2 * consumers
        while budget >= 2:
            budget -= 2
            r = rng.random()
            if r < 0.0005:
                w.append(NEMESIS, "invoke", "kill", {"target": "one"})
                w.append(NEMESIS, "ok", "kill", {"killed": ["n2"]})
            elif r < 0.3:  # a consumer polls from its position
                c = rng.choice(list(position))
                if rng.random() < 0.01:
                    position[c] = [0] * keys
                    w.append(c, "invoke", "assign", {"keys": list(range(keys)), "seek": "beginning"})
                    w.append(c, "ok", "assign", {"keys": list(range(keys)), "seek": "beginning"})
                    continue
                read = {}
                for k in range(keys):
                    start = position[c][k]
                    recs = [[o, logs[k][o]] for o in range(start, min(start + 5, len(logs[k])))]
                    if recs:
                        read[str(k)] = recs
                        position[c][k] = recs[-1][0] + 1
                w.append(c, "invoke", "poll", [["poll"]])
                w.append(c, "ok", "poll", [["poll", read]])
            else:
                slot = rng.randrange(len(procs))
                p = procs[slot]
                sends = [["send", rng.randrange(keys), value + i] for i in range(rng.randint(1, 4))]
                value += len(sends)
                w.append(p, "invoke", "send", sends)
                outcome = rng.random()
                done = []
                for _, k, v in sends:
                    appended = outcome >= 0.10 or (outcome >= 0.05 and rng.random() < 0.5)
                    if appended:
                        logs[k].append(v)
                    acked = appended and (outcome >= 0.10 or rng.random() < 0.5)
                    done.append(["send", k, [len(logs[k]) - 1 if acked else None, v]])
                if outcome < 0.05:
                    w.append(p, "fail", "send", done, "NOT_ENOUGH_REPLICAS")
                elif outcome < 0.10:
                    w.append(p, "info", "send", done, "_MSG_TIMED_OUT")
                    procs[slot], next_proc = next_proc, next_proc + 1
                else:
                    w.append(p, "ok", "send", done)
        for k in range(keys):
            for start in range(0, max(len(logs[k]), 1), chunk):
                end = min(start + chunk, len(logs[k]))
                w.append(next_proc, "invoke", "poll", [["poll"]])
                w.append(next_proc, "ok", "poll", [[
                    "poll", {str(k): [[o, logs[k][o]] for o in range(start, end)]},
                    {"final": True, "range": {str(k): [start, end]}, "eof": end == len(logs[k])}]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n_ops", nargs="?", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1,
                    help="check the same file this many times (the first run warms the JVM)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kc-bench-") as tmp:
        path = Path(tmp) / "history.jsonl"
        t = time.perf_counter()
        generate(path, args.n_ops, args.keys, args.processes, args.consumers, args.seed)
        gen_s = time.perf_counter() - t
        size_mb = path.stat().st_size / 1e6
        t = time.perf_counter()
        session(args.master)
        startup_s = time.perf_counter() - t
        results = [analysis.check(path, spark_master=args.master) for _ in range(args.repeat)]
    result = results[-1]
    ops = result["stats"]["ops"]
    print(f"history: {ops} ops, {size_mb:.1f} MB, {result['stats']['acked_sends']} acknowledged "
          f"sends, {result['stats']['records_read']} records read; generated in {gen_s:.1f} s")
    print(f"spark start-up: {startup_s:.1f} s (not included below)")
    for i, r in enumerate(results, 1):
        secs = r["analysis_time_s"]
        print(f"analysis run {i}: {secs:.2f} s, {ops / secs:,.0f} ops/s")
    print(f"cycle search: {result['cycle_search']}")
    print(f"valid: {result['valid']}  violations: {result['violations']}  permitted: "
          f"{result['permitted']}  unknown: {result['unknown_reasons']}")


if __name__ == "__main__":
    main()
