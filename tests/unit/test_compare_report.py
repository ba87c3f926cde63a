"""A comparison's table, CSVs, JUnit XML and page, from a stored comparison
(``tests/compare_builder.py``): every figure is what the runs' own ``results.json`` say."""

from __future__ import annotations

import csv
import json

from junitparser import Error, Failure, JUnitXml, Skipped
from typer.testing import CliRunner

from kafka_chaos.compare import core as compare
from kafka_chaos.compare import outputs
from kafka_chaos.compare import report as compare_report
from kafka_chaos.cli import app
from tests import compare_builder
from tests.markdown_rows import markdown_rows


def _results(comparison, cell, seed) -> dict:
    return json.loads((comparison.run_dir(cell, seed) / "results.json").read_text())


def test_cell_figures_are_pooled_from_the_runs_results(tmp_path):
    comparison = compare_builder.build(tmp_path, html=False)
    cells = compare_report.rows(comparison)
    first, skipped, third, fourth = cells
    assert skipped.skipped and "KIP-98" in skipped.skipped and skipped.runs == []
    assert [r.status for r in first.runs] == ["violation", "permitted"]
    assert [r.status for r in third.runs] == ["error", "pending"]
    assert [r.status for r in fourth.runs] == ["pending", "pending"]
    a, b = (_results(comparison, comparison.cells[0], s) for s in (3, 4))
    acked = a["stats"]["acked_sends"] + b["stats"]["acked_sends"]
    assert first.acked_sends == acked
    lost = a["anomalies"]["lost-write"]["count"]
    dups = a["anomalies"]["duplicate"]["count"] + 3
    assert first.rate("lost-write") == round(1e4 * lost / acked, 3) and lost > 0
    assert first.rate("duplicate") == round(1e4 * dups / acked, 3)
    assert first.rate("reorder") == 0.0
    sends = a["availability"]["sends"] + 2100
    assert first.availability_pct == round(100 * (a["availability"]["acked"] + 2000) / sends, 3)
    # time without an acknowledgement, pooled: the seed-4 run stood still half its 28 s
    span = a["availability"]["workload_s"] + 28.0
    assert span > 28.0 and first.unavailable_pct == round(
        100 * (a["availability"]["unavailable_s"] + 14.0) / span, 3)
    p99 = sorted([a["availability"]["send_latency_ms"]["p99"], 250.0])
    assert first.latency_ms("p99") == round(sum(p99) / 2, 3)
    assert third.rate("lost-write") is None and third.availability_pct is None
    assert third.unavailable_pct is None


def test_csvs_junit_and_page_match_the_runs(tmp_path):
    comparison = compare_builder.build(tmp_path)
    paths = outputs.write_all(comparison)
    a = _results(comparison, comparison.cells[0], 3)

    table = markdown_rows(paths["summary.md"].read_text())
    assert table[0][:2] == ["cell", "verdicts"] and len(table) == 1 + len(comparison.cells)
    assert [r[0] for r in table[1:]] == [c["label"] for c in comparison.cells]
    assert table[1][1] == "violation permitted" and table[2][1].startswith("skipped: ")
    rows = list(csv.DictReader(paths["compare.csv"].open()))
    assert [r["cell"] for r in rows] == [c["label"] for c in comparison.cells]
    assert rows[0]["acks"] == "1" and rows[0]["idempotence"] == "false"
    assert rows[0]["verdicts"] == "violation permitted" and rows[0]["runs"] == "2"
    assert rows[1]["skipped"].startswith("--acks 1 with --idempotence")
    runs = {(r["cell"], r["seed"]): r for r in csv.DictReader(paths["runs.csv"].open())}
    run = runs[("acks=1 idempotence=false", "3")]
    assert int(run["acked_sends"]) == a["stats"]["acked_sends"]
    assert int(run["lost-write"]) == a["anomalies"]["lost-write"]["count"]
    assert run["violations"].split() == a["violations"] and run["exit_code"] == "1"
    assert float(run["send_p50_ms"]) == a["availability"]["send_latency_ms"]["p50"]
    assert run["report"].endswith("seed-3/report.html")
    assert runs[("acks=all idempotence=false", "3")]["error"] == "the cluster did not start"

    xml = JUnitXml.fromfile(str(paths["junit.xml"]))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"kafka-chaos acks=1 idempotence=false",
                           "kafka-chaos acks=all idempotence=false",
                           "kafka-chaos acks=all idempotence=true"}  # the skipped cell: none
    first = suites["kafka-chaos acks=1 idempotence=false"]
    props = {p.name: p.value for p in first.properties()}
    assert props["matrix.acks"] == "1" and props["acks"] == "1" and "seed" not in props
    cases = {c.name: c for c in first}
    failed = cases["acks=1 idempotence=false seed=3"].result[0]
    assert isinstance(failed, Failure) and "lost-write (2)" in failed.message
    assert cases["acks=1 idempotence=false seed=4"].is_passed
    errored = {c.name: c for c in suites["kafka-chaos acks=all idempotence=false"]}
    assert isinstance(errored["acks=all idempotence=false seed=3"].result[0], Error)
    assert isinstance(errored["acks=all idempotence=false seed=4"].result[0], Skipped)

    page = paths["compare.html"].read_text()
    assert page.count('id="fig-') == 3 and "Plotly.newPlot" in page
    assert 'href="1_acks=1_idempotence=false/seed-3/report.html"' in page
    assert "3 run(s) not done yet" in page and "<script src=" not in page  # offline


def test_resume_of_a_finished_comparison_rewrites_its_outputs_and_exits_by_rank(tmp_path):
    comparison = compare_builder.build(tmp_path, html=False)
    done = comparison.manifest["done"]
    for cell, seed in comparison.pending():  # finish it: valid runs with no verdict file
        done[comparison.run_id(cell, seed)] = {"exit_code": 0, "error": None}
    comparison.save()
    out = CliRunner().invoke(app, ["compare", "--resume", str(comparison.dir)],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 1, out.output  # a violation ranks above unknown and valid
    assert "nothing left to run" in out.output and "acks=1 idempotence=false" in out.output
    assert "violation permitted" in out.output and "skipped: --acks 1" in out.output
    assert (comparison.dir / "compare.html").is_file()
    assert compare.exit_code(compare.load(comparison.dir)) == 1
    out = CliRunner().invoke(app, ["compare", "--resume", str(comparison.dir), "--repeats", "2"])
    assert out.exit_code == 254 and "takes no other option" in out.output


def test_a_cell_whose_loss_never_had_its_event_says_so():
    from kafka_chaos.compare.report import CellRow, RunRow

    def judged(seed: int, no_chance: list[str]) -> RunRow:
        return RunRow(seed, "valid", 0, {"lost-write": 0}, results={}, no_chance=no_chance)
    cell = CellRow("c", "acks=1", {}, [judged(1, ["acks-below-all"]), judged(2, [])])
    assert cell.no_chance() == "acks-below-all 1/2"
    assert CellRow("d", "acks=all", {}, [judged(1, [])]).no_chance() == ""
