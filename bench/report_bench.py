"""Benchmark of the HTML report (``kafka_chaos.report.html``) on a synthetic run.

    PYTHONPATH=. python bench/report_bench.py [N_LINES] [--analyze] [--keep DIR]

Writes a run of about ``N_LINES`` history lines (default 1000000) with ``kafka_chaos.history.simulate.generate_run``
(4 workers at 200 client ops/s simulated, faults every 8 s, monitor samples every 500 ms, two
planted lost writes), then times ``report.html.write`` and prints the history and report sizes,
the time to read the lines alone, the extraction and the whole build, and the peak memory of
the process.

Without ``--analyze`` the verdict given to the report is made from what the generator planted
(its lost writes as ``lost-write`` examples, shaped as ``analysis.checkers.lost`` makes them),
so that the report's time is measured without Spark; ``--analyze`` runs the real analysis
first (minutes on 2 cores for a million lines).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from kafka_chaos.history import iter_history
from kafka_chaos.history.simulate import generate_run as generate
from kafka_chaos.report import data as report_data
from kafka_chaos.report import html as html_report


def planted_results(planted: dict) -> dict:
    """A ``results.json`` naming the planted lost writes as the only (violating) anomaly."""
    examples = [{"key": k, "value": v, "offset": o, "process": None, "op": None,
                 "index": None, "type": "ok", "covered_by": None, "final_end": None,
                 "read_before": False} for k, v, o in planted["lost"][:5]]
    lost = {"count": len(planted["lost"]), "examples": examples, "permitted": False,
            "rule": None, "because": "planted by the simulated run (kafka_chaos.history.simulate)", "source": None,
            "side": "log"}
    return {"valid": False, "anomalies": {"lost-write": lost}, "anomaly_types": ["lost-write"],
            "violations": ["lost-write"], "permitted": [], "unknown_reasons": [],
            "fail_on": "violation", "run": {"seed": 1}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n_lines", nargs="?", type=int, default=1_000_000)
    ap.add_argument("--analyze", action="store_true", help="run the real analysis (Spark)")
    ap.add_argument("--keep", type=Path, help="write the run here and keep it")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kc-report-bench-") as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        t = time.perf_counter()
        # ~2.02 lines per client op: invoke + completion, plus monitor and nemesis lines
        planted = generate(run_dir, client_ops=int(args.n_lines / 2.02), rate=200.0, seed=1)
        gen_s = time.perf_counter() - t
        history = run_dir / "history.jsonl"
        if args.analyze:
            from kafka_chaos import analysis
            results = analysis.check(history, spark_master="local[2]")
            results["fail_on"] = "violation"
        else:
            results = planted_results(planted)
        (run_dir / "results.json").write_text(json.dumps(results, default=str))

        t = time.perf_counter()
        lines = sum(1 for _ in iter_history(history))
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        data = report_data.extract(history, results["anomalies"])
        extract_s = time.perf_counter() - t
        del data
        t = time.perf_counter()
        path = html_report.write(run_dir)
        build_s = time.perf_counter() - t
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"history: {history.stat().st_size / 1e6:.1f} MB, {planted['duration_s']:.0f} s "
              f"simulated, {len(planted['faults'])} faults; generated in {gen_s:.1f} s")
        print(f"verdict: {'real analysis' if args.analyze else 'planted (no Spark)'}")
        print(f"reading and checking the {lines} lines alone (history.iter_history): "
              f"{read_s:.1f} s")
        print(f"extraction (one streaming pass, the reading included): {extract_s:.1f} s")
        print(f"report.html: {path.stat().st_size / 1e6:.2f} MB (plotly.js inlined: "
              f"{len(html_report.get_plotlyjs()) / 1e6:.2f} MB), built in {build_s:.1f} s "
              f"(extraction included)")
        print(f"peak memory of this process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
