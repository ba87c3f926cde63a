"""How often a plan, a scenario or the defaults show the anomaly expected, and after how long.

A configuration Kafka documents as lossy proves nothing by a run that never gave the loss a
chance: "0 lost writes" under acks=1 reads as safe. This runs one plan or scenario ``--runs``
times on the embedded cluster, seeds ``--seed``, ``--seed + 1``, ..., and prints per run the
exit code, the anomaly's count and outcomes, and when its first shown finding happened (the
acknowledgement of the earliest example, seconds since the history began), then the share of
runs that showed it and the median of those times.

    PYTHONPATH=. .venv/bin/python bench/detection_bench.py \
        --scenario acks1-lagging-follower --runs 5
    PYTHONPATH=. .venv/bin/python bench/detection_bench.py \
        --plan plans/acks1-leader-kills.yaml --runs 5

Arguments after ``--`` go to ``kafka-chaos run`` as they are (``-- --acks all``); with neither
``--plan`` nor ``--scenario`` they are the whole run (``-- --acks 1 --nemesis kill``: what the
default fault targets give). One run at a time: each is a whole Kafka cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _first_s(run_dir: Path, anomaly: dict) -> float | None:
    """Seconds since the history began at which the earliest example's op completed (a
    lost write's acknowledgement), or None when no example names an op."""
    ops = [ex.get("index", ex.get("op")) for ex in anomaly.get("examples") or []]
    ops = [o for o in ops if isinstance(o, int)]
    if not ops:
        return None
    want = min(ops)
    with open(run_dir / "history.jsonl", "rb") as f:
        for line in f:
            if line.startswith(b'{"index":%d,' % want):
                return round(json.loads(line)["time"] / 1e9, 2)
    return None


def one_run(target: list[str], seed: int, extra: list[str], anomaly: str,
            keep: Path | None = None) -> dict:
    """One ``kafka-chaos run`` of ``target`` with ``seed``: its exit code, wall seconds, what
    it found of ``anomaly`` and its violations. The run directory goes under ``keep`` when
    given, else it is removed."""
    with tempfile.TemporaryDirectory(prefix="detection-") as tmp:
        out = str(keep / f"seed-{seed}") if keep is not None else tmp
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kafka_chaos", "run", *target, "--seed",
                               str(seed), *extra, "--out", out], cwd=ROOT,
                              capture_output=True, text=True)
        took = time.monotonic() - start
        run_dir = (Path(out) / "latest").resolve()
        try:
            res = json.loads((run_dir / "results.json").read_text())
        except (OSError, ValueError):
            return {"seed": seed, "exit": proc.returncode, "s": round(took), "count": None,
                    "error": (proc.stdout + proc.stderr)[-300:]}
        a = res["anomalies"][anomaly]
        return {"seed": seed, "exit": proc.returncode, "s": round(took), "count": a["count"],
                "outcomes": a.get("outcomes"), "rules": a.get("rules"),
                "valid": res["valid"], "first_s": _first_s(run_dir, a) if a["count"] else None,
                "violations": {n: res["anomalies"][n]["outcomes"]["violation"]
                               for n in res.get("violations") or []},
                "unknown": res.get("unknown_reasons") or []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()  # neither: the defaults, with the options after --
    which.add_argument("--plan", help="a plan file")
    which.add_argument("--scenario", help="a built-in scenario or a schedule file")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed")
    ap.add_argument("--anomaly", default="lost-write", help="the anomaly expected")
    ap.add_argument("--keep", type=Path, help="keep each run's directory under KEEP/seed-N")
    ap.add_argument("extra", nargs="*", help="after --: more `kafka-chaos run` options")
    args = ap.parse_args()
    target = (["--plan", args.plan] if args.plan else
              ["--scenario", args.scenario] if args.scenario else [])
    rows = []
    for i in range(args.runs):
        row = one_run(target, args.seed + i, args.extra, args.anomaly, args.keep)
        rows.append(row)
        print(json.dumps(row), flush=True)
    shown = [r for r in rows if r.get("count")]
    times = [r["first_s"] for r in shown if r.get("first_s") is not None]
    print(f"{' '.join(target + args.extra)}: {args.anomaly} shown in {len(shown)}/{len(rows)} "
          f"runs ({100 * len(shown) / max(1, len(rows)):.0f} %); counts "
          f"{[r.get('count') for r in rows]}; first shown at median "
          f"{round(statistics.median(times), 2) if times else '-'} s (of {times}); runs took "
          f"{[r['s'] for r in rows]} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
