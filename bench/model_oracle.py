"""The verdict against the reference model (issue 49, exploration): random cases of
``history.simulate.model_run``, one history per configuration, each analysed once; prints the
model's label and the verdict's outcome for every lost value where they differ.

    .venv/bin/python bench/model_oracle.py [--cases 40] [--seed 1] [--histories 4] [--keep]

Each history is written to a temporary directory, removed afterwards unless ``--keep`` (then
its path is printed, to trace a disagreement).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import random
import tempfile
import time
from pathlib import Path

from kafka_chaos.analysis import check
from kafka_chaos.history.simulate.model_run import Config, Step, generate

KINDS = ("produce", "produce", "produce", "fetch", "fetch", "shrink", "fsync", "kill",
         "lose-power", "start", "blind")


def case(rng: random.Random, steps: int) -> list[Step]:
    """One partition's steps over 20 s."""
    out = []
    for _ in range(steps):
        kind = rng.choice(KINDS)
        out.append(Step(rng.randrange(0, 20_000), kind, rng.randrange(3),
                        rng.randrange(1000, 9000) if kind == "blind" else 0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--histories", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="keep each history's directory")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tally: collections.Counter = collections.Counter()
    for h in range(args.histories):
        config = Config(acks=rng.choice(["1", "all"]), min_isr=rng.choice([1, 2]),
                        unclean=rng.random() < 0.4, elr=rng.random() < 0.5)
        cases = [case(rng, rng.randrange(4, 16)) for _ in range(args.cases)]
        # TemporaryDirectory's delete= is Python 3.12's; this runs on 3.11
        folder = (contextlib.nullcontext(tempfile.mkdtemp(prefix="kc-oracle-")) if args.keep
                  else tempfile.TemporaryDirectory(prefix="kc-oracle-"))
        with folder as tmp:
            path = Path(tmp) / "history.jsonl"
            truth = generate(path, cases, config)
            start = time.monotonic()
            res = check(path)
            took = time.monotonic() - start
        expected = collections.Counter(t.expected for t in truth if t.expected)
        got = collections.Counter()
        for name in ("lost-write", "unseen"):
            for outcome, n in res["anomalies"][name]["outcomes"].items():
                got[outcome] += n
        same = +expected == +got
        tally["agree" if same else "differ"] += 1
        print(f"history {h}: {config} {len(truth)} acknowledged, expected {dict(expected)}, "
              f"verdict {dict(+got)} {'ok' if same else 'DIFFERS'} ({took:.1f} s, "
              f"valid={res['valid']}, unknown={res['unknown_reasons'][:2]})"
              + (f" {path}" if args.keep else ""))
    print(dict(tally))


if __name__ == "__main__":
    main()
