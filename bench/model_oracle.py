"""The verdict against the reference model (issue 49, exploration): random cases of
``history.simulate.model_run``, one history per configuration, each analysed once; compares
the model's label with the verdict's outcome value by value (its loss, and its
``duplicate`` finding when the record shows it at two offsets), and prints every value
where they differ (its partition's steps, to turn into a hand-built test).

    .venv/bin/python bench/model_oracle.py [--cases 40] [--seed 1] [--histories 4] [--keep]
                                           [--producer plain|retries|idempotent]

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

from kafka_chaos.analysis import check, judge
from kafka_chaos.history.simulate.model_run import Config, Step, generate

KINDS = ("produce", "produce", "produce", "fetch", "fetch", "shrink", "fsync", "poll", "kill",
         "lose-power", "start", "blind", "txn", "txn", "end", "end")
#: How a kill or power loss ends (``model_run.Ends``): mostly ok.
ENDS = ("ok", "ok", "ok", "ok", "info", "info-none", "fail")


def case(rng: random.Random, steps: int) -> list[Step]:
    """One partition's steps over 20 s."""
    out = []
    for _ in range(steps):
        kind = rng.choice(KINDS)
        out.append(Step(rng.randrange(0, 20_000), kind, rng.randrange(3),
                        rng.randrange(1000, 9000) if kind == "blind" else 0, rng.choice(ENDS)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--histories", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="keep each history's directory")
    ap.add_argument("--producer", choices=["plain", "retries", "idempotent"],
                    help="every history's producer (acks=all; idempotent: transactions too)")
    args = ap.parse_args()
    judge.MAX_EXAMPLES = 10**6  # every finding's outcome, not five of each
    rng = random.Random(args.seed)
    tally: collections.Counter = collections.Counter()
    for h in range(args.histories):
        acks = "all" if args.producer else rng.choice(["0", "1", "all", "1", "all"])
        producer = args.producer or (rng.choice(["plain", "retries", "idempotent"])
                                     if acks == "all" else "plain")
        txn = producer == "idempotent"
        config = Config(acks=acks, min_isr=rng.choice([1, 2]), unclean=rng.random() < 0.4,
                        elr=rng.random() < 0.5, retries=producer != "plain",
                        idempotence=txn, transactions=txn,
                        read_committed=txn and rng.random() < 0.7)
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
        outcome = {(ex["key"], ex["value"]): ex["outcome"] for name in ("lost-write", "unseen")
                   for ex in res["anomalies"][name]["examples"]}
        twice = {(ex["key"], ex["value"]): ex["outcome"]
                 for ex in res["anomalies"]["duplicate"]["examples"]}
        dirty = {(ex["key"], ex["value"]): ex["outcome"]
                 for ex in res["anomalies"]["G1a"]["examples"]}
        pairs = collections.Counter()
        for t in truth:
            kv = (t.key, t.value)
            for what, expected, got in ((f"{t.mechanism}{' hidden' * t.hidden}", t.expected,
                                         outcome.get(kv)),
                                        ("duplicate", t.duplicate, twice.get(kv)),
                                        ("G1a", t.aborted_read, dirty.get(kv))):
                pairs[(what, expected, got)] += 1
                if expected != got:
                    tally["differ"] += 1
                    print(f"  history {h} partition {t.key} value {t.value}: {what}, "
                          f"expected {expected}, verdict {got}; steps {cases[t.key]}")
                elif got is not None:
                    tally["agree"] += 1
        print(f"history {h}: {config} {len(truth)} acknowledged, {took:.1f} s, valid="
              f"{res['valid']}; (mechanism, expected, verdict): "
              f"{ {k: n for k, n in sorted(pairs.items(), key=str) if k[1:] != (None, None)} }"
              + (f" {path}" if args.keep else ""))
    print(dict(tally))


if __name__ == "__main__":
    main()
