"""Fixed cost of a small analysis as a user pays it: whole ``kafka-chaos analyze`` commands,
each a fresh process, with a Spark driver of their own (``local[2]``) and as clients of a warm
Spark Connect server (``kafka-chaos spark-server``).

    PYTHONPATH=. python bench/fixed_cost_bench.py [HISTORY] [--repeats 3]

HISTORY defaults to the report fixture (``tests/fixtures/report_run/history.jsonl``, 1,925
lines of a real run under leader kills); each command analyses a fresh copy of it (so each
also makes its columnar copy). The server is started on a free port in a temporary folder,
timed with its warm-up, and stopped at the end. Prints each command's wall seconds and the
``analysis_time_s`` it reported (``analysis.check``: the session start, when there is one,
included), then the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/report_run/history.jsonl"
KAFKA_CHAOS = str(ROOT / ".venv" / "bin" / "kafka-chaos")


def _analyze(history: Path, tmp: Path, master: str) -> tuple[float, float]:
    """(command wall s, its analysis_time_s) of one fresh ``kafka-chaos analyze``."""
    run = Path(tempfile.mkdtemp(dir=tmp))
    shutil.copy(history, run / "history.jsonl")
    t = time.perf_counter()
    proc = subprocess.run([KAFKA_CHAOS, "analyze", str(run), "--spark-master", master],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"analyze exited {proc.returncode}: {proc.stdout[-2000:]}")
    return wall, json.loads((run / "results.json").read_text())["analysis_time_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", nargs="?", type=Path, default=FIXTURE)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    lines = sum(1 for _ in args.history.open("rb"))
    print(f"history: {args.history} ({lines:,} lines)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="kc-fixed-"))
    rows = {}
    try:
        rows["local[2]"] = [_analyze(args.history, tmp, "local[2]") for _ in range(args.repeats)]
        t = time.perf_counter()
        started = subprocess.run([KAFKA_CHAOS, "spark-server", "start", "--port", str(port),
                                  "--dir", str(tmp / "server")], capture_output=True, text=True)
        if started.returncode != 0:
            raise SystemExit(f"spark-server start failed: {started.stdout[-2000:]}")
        warm = started.stdout.split("warmed up: ")[1].split("\n")[0]
        print(f"spark-server start: {time.perf_counter() - t:.1f} s (warm-up checks {warm})")
        url = f"sc://127.0.0.1:{port}"
        rows[url] = [_analyze(args.history, tmp, url) for _ in range(args.repeats)]
    finally:
        subprocess.run([KAFKA_CHAOS, "spark-server", "stop", "--dir", str(tmp / "server")],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    for master, runs in rows.items():
        for wall, check in runs:
            print(f"{master}: command {wall:.2f} s, analysis {check:.2f} s")
    for master, runs in rows.items():
        print(f"{master}: median command {statistics.median(w for w, _ in runs):.2f} s, "
              f"median analysis {statistics.median(c for _, c in runs):.2f} s")


if __name__ == "__main__":
    main()
