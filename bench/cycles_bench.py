"""Benchmark of ``analysis.elle.find_cycles`` on a synthetic, history-shaped dependency graph.

    PYTHONPATH=. python bench/cycles_bench.py [--edges 1000000] [--limit 60] [--seed 1]

Builds about ``--edges`` edges (ops ~ edges / 5): ops invoked in order by ``--processes``
processes (process chains), realtime order through timeline nodes (op -> timeline node at its
completion, timeline chain, timeline node -> ops invoked later), ww chains per key over its
writers, wr edges from a write to the reads of its value. All of that goes forward in time,
so it is acyclic; then it plants ``--plant`` G0 cycles (a ww edge back to an earlier write of
the key) and as many G1c cycles (a write that read a later write of its key), a few ops
apart, plus one G1c spanning ``--gap`` ops, which makes one large realtime component to
search. Prints the graph size, build and search times, components and cycle counts per type.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_chaos.analysis.elle import (CYCLE_ANOMALIES, PROCESS, REALTIME, WR, WW,  # noqa: E402
                           find_cycles)


def generate(n_edges: int, processes: int, keys: int, plant: int, gap: int,
             seed: int) -> tuple[list[int], list[int], list[int]]:
    """``(src, dst, kind)`` rows of a history-shaped graph of about ``n_edges`` edges."""
    rng = random.Random(seed)
    n_ops = n_edges // 5
    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []

    def edge(a: int, b: int, k: int) -> None:
        src.append(a)
        dst.append(b)
        kind.append(k)

    # Op i is invoked at time 2i and completes at 2i + 1 + 2d: up to ``processes`` overlap.
    completes = [2 * i + 1 + 2 * rng.randrange(processes) for i in range(n_ops)]
    last_of_process: dict[int, int] = {}
    writes: list[list[int]] = [[] for _ in range(keys)]  # key -> its writers, in order
    # Timeline node -(j+1) marks the j-th completion in time order.
    order = sorted(range(n_ops), key=lambda i: completes[i])
    for j, i in enumerate(order):
        edge(i, -(j + 1), REALTIME)
        if j:
            edge(-j, -(j + 1), REALTIME)
    j = 0
    for i in range(n_ops):
        while j < n_ops and completes[order[j]] < 2 * i:
            j += 1
        if j:  # the latest completion before op i was invoked
            edge(-j, i, REALTIME)
        p = i % processes
        if p in last_of_process:
            edge(last_of_process[p], i, PROCESS)
        last_of_process[p] = i
        k = rng.randrange(keys)
        if rng.random() < 0.5:
            if writes[k]:
                edge(writes[k][-1], i, WW)
            writes[k].append(i)
        elif writes[k]:
            edge(writes[k][-1], i, WR)

    # Planted anomalies, spread out in time after the long one, each its own component.
    for n in range(2 * plant):
        chain = writes[n % keys]
        first = next(x for x in range(len(chain)) if chain[x] > gap + 200)
        a = first + n * (len(chain) - first - 4) // (2 * plant)
        a_op, b_op = chain[a], chain[a + 3]
        edge(b_op, a_op, WW if n % 2 == 0 else WR)
    chain = writes[0]
    b = next(x for x in range(len(chain)) if chain[x] - chain[1] >= gap)
    edge(chain[b], chain[1], WR)
    return src, dst, kind


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--limit", type=float, default=60.0, help="time bound, seconds")
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--plant", type=int, default=8, help="planted G0 (and G1c) cycles")
    ap.add_argument("--gap", type=int, default=20_000, help="ops spanned by the long G1c")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t0 = time.monotonic()
    src, dst, kind = generate(args.edges, args.processes, args.keys, args.plant, args.gap,
                              args.seed)
    built = time.monotonic() - t0
    report = find_cycles(src, dst, kind, time_limit_s=args.limit)
    print(f"rows (input edges):  {len(src):,}")
    print(f"distinct edges:      {report.edges:,}")
    print(f"build time:          {built:.2f} s")
    print(f"search time:         {report.time_s:.2f} s (bound {args.limit:g} s)")
    print(f"components:          {report.components}")
    print(f"largest component:   {report.largest_component} ops")
    print(f"complete:            {report.complete}")
    for name in CYCLE_ANOMALIES:
        print(f"  {name:<14} {len(report.cycles[name])}")


if __name__ == "__main__":
    main()
