"""A simulated history of N ops with a chosen number of seeded anomalies of each type
(``kafka_chaos.history.simulate.vignettes``), for the analysis benchmarks.

    .venv/bin/python bench/history_gen.py OUT_DIR --ops 1000000 --anomalies 3 [--seed 1]

Writes ``OUT_DIR/history.jsonl``, its columnar copy and ``OUT_DIR/expected.json`` (the
anomaly counts the analysis must find, exactly); prints the size and the time it took.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kafka_chaos.history.simulate import generate_vignettes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--anomalies", type=int, default=3, help="instances of each vignette")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keys", type=int, default=8, help="background keys")
    args = ap.parse_args()
    t = time.perf_counter()
    expected = generate_vignettes(args.out, args.ops, args.anomalies, args.seed, args.keys)
    size = (args.out / "history.jsonl").stat().st_size
    print(f"{args.out / 'history.jsonl'}: {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s;"
          f" expected {expected}")


if __name__ == "__main__":
    main()
