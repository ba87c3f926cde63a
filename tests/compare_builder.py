"""A stored comparison for tests of what renders it, made with the project's own code: the
manifest by ``compare.prepare`` from real ``run`` options, one run directory copied from the
fixture run (``tests/fixtures/report_run``, its availability read by the real extraction), one
hand-made verdict (``tests.verdicts``), one run that failed, and runs still pending."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from kafka_chaos.compare import core as compare
from kafka_chaos.report import html as html_report
from kafka_chaos import matrix
from kafka_chaos.report import stats as report_stats
from kafka_chaos.verdict import RunVerdict
from kafka_chaos.cli import app
from tests.verdicts import verdict

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report_run"


def build(tmp_path: Path, html: bool = True) -> compare.Comparison:
    """A 2 × 2 comparison (acks × idempotence, seeds 3 and 4; acks=1 with idempotence is
    skipped). ``acks=1 idempotence=false``: seed 3 is the fixture run (violations), seed 4 a
    valid verdict with 3 permitted duplicates; ``acks=all idempotence=false``: seed 3 failed
    with no verdict; the rest is pending. ``html``: write the fixture run's report.html."""
    run = typer.main.get_command(app).commands["run"]
    ctx = run.make_context("run", ["--nemesis", "kill", "--seed", "3"])
    dims = [matrix.parse_option("acks=1,all"), matrix.parse_option("idempotence=false,true")]
    comparison = compare.create(tmp_path, compare.prepare(dict(ctx.params), {"nemesis", "seed"},
                                                          dims, repeats=2))
    first, _, third, _ = comparison.cells
    done = comparison.manifest["done"]

    fixture = Path(shutil.copytree(FIXTURE, comparison.run_dir(first, 3)))
    results = json.loads((fixture / "results.json").read_text())
    data = html_report.read(fixture / "history.jsonl", results["anomalies"])
    results["availability"] = report_stats.summary(data)
    (fixture / "results.json").write_text(json.dumps(results))
    if html:
        html_report.write(fixture, RunVerdict.model_validate(results), data)
    done[comparison.run_id(first, 3)] = {"exit_code": 1, "error": None}

    second = comparison.run_dir(first, 4)
    second.mkdir(parents=True)
    made = verdict(first["config"], {"duplicate": (3, [])},
                   facts={"seed": 4, "kafka_version": "4.4.0", "total_s": 30.0})
    made["stats"] = {"acked_sends": 2000}
    made["availability"] = {"sends": 2100, "acked": 2000, "ack_share": 0.952381,
                            "unavailable_s": 14.0, "workload_s": 28.0,
                            "send_latency_ms": {"p50": 12.0, "p99": 250.0, "max": 900.0}}
    (second / "results.json").write_text(json.dumps(made))
    (second / "config.json").write_text(json.dumps({**first["config"], "seed": 4}))
    done[comparison.run_id(first, 4)] = {"exit_code": 0, "error": None}

    done[comparison.run_id(third, 3)] = {"exit_code": 2, "error": "the cluster did not start"}
    comparison.save()
    return comparison
