"""``report.html``: built from the stored fixture run and from hand-made ones; ``kafka-chaos
report`` and the reports ``analyze`` writes next to ``results.json``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from junitparser import JUnitXml
from typer.testing import CliRunner

from kafka_chaos import __version__, analysis, options
from kafka_chaos.verdict import RunVerdict
from kafka_chaos.report import html as html_report
from kafka_chaos.analysis.explain import explain
from kafka_chaos.cli import app
from kafka_chaos.config import RunConfig
from tests.markdown_rows import markdown_rows
from tests.queue_builder import STRICT, Q
from tests.verdicts import verdict

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run"


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A copy of the stored run (history.jsonl, results.json, config.json, command.txt)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "run"))


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def said(res) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(res.output.split())


def says(res, text: str) -> bool:
    """``text`` is in the command's output, whitespace aside: after a path longer than the
    terminal, rich folds at any character, not at a space."""
    return "".join(text.split()) in "".join(res.output.split())


def test_the_report_is_self_contained_and_shows_every_section(run_dir) -> None:
    results = json.loads((run_dir / "results.json").read_text())
    res = cli("report", run_dir)
    assert res.exit_code == 0, res.output
    page = (run_dir / "report.html").read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"?http", page)  # nothing fetched
    assert page.count(html_report.get_plotlyjs()[:200]) == 1  # plotly.js inlined once
    divs = re.findall(r'<div id="(fig-[a-z0-9-]+)"', page)
    lost = results["anomalies"]["lost-write"]
    assert lost["count"] and not lost["permitted"]  # the fixture's planted violation
    diagrams = len(html_report.example_windows(results["anomalies"]))
    assert divs[:3] == ["fig-timeline", "fig-throughput", "fig-latency"]
    assert len(divs) == 3 + diagrams and diagrams >= 2
    assert page.count("Plotly.newPlot") == len(divs)
    banner = re.search(r'<div id="verdict" class="banner (\w+)">\s*(.*?)\n', page)
    assert banner.group(1) == "violation"
    for name in results["violations"]:
        assert f"{name} ({results['anomalies'][name]['count']})" in banner.group(2)
    for ex in lost["examples"]:
        assert explain("lost-write", ex) in page
    command = (run_dir / "command.txt").read_text().strip()
    assert command in page
    for package in ("kill", "pause", "partition"):  # the fixture's faults, one of each
        assert f"<td>{package} " in page


def test_missing_or_malformed_inputs_exit_2_naming_the_file(run_dir) -> None:
    (run_dir / "results.json").rename(run_dir / "results.bak")
    res = cli("report", run_dir)
    assert res.exit_code == 254 and says(res, "results.json: missing")
    (run_dir / "results.json").write_text('{"valid": true,\n "anomalies": }')
    res = cli("report", run_dir)
    assert res.exit_code == 254 and says(res, "results.json line 2: not valid JSON")
    (run_dir / "results.bak").rename(run_dir / "results.json")
    lines = (run_dir / "history.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "history.jsonl").write_bytes(b"".join(lines[:5]) + b"{oops\n" + b"".join(lines[5:]))
    res = cli("report", run_dir)
    assert res.exit_code == 254 and says(res, "history.jsonl: line 6: not valid JSON")
    (run_dir / "history.jsonl").unlink()
    res = cli("report", run_dir)
    assert res.exit_code == 254 and says(res, "history.jsonl: missing")
    assert not (run_dir / "report.html").exists()


def verdict_of(valid, **more) -> dict:
    return {"valid": valid, "anomalies": {}, "anomaly_types": [], "violations": [],
            "permitted": [], "unknown_reasons": [], **more}


@pytest.mark.parametrize("results, kind, words", [
    (verdict_of(True), "valid", "VALID: no anomaly found"),
    (verdict_of(True, permitted=["duplicate"], anomaly_types=["duplicate"],
                anomalies={"duplicate": {"count": 4}}), "permitted", "duplicate (4)"),
    (verdict_of(False, violations=["unseen"], anomalies={"unseen": {"count": 2}}),
     "violation", "VIOLATIONS: unseen (2)"),
    (verdict_of("unknown", unknown_reasons=["no send was acknowledged"]), "unknown",
     "UNKNOWN"),
    (verdict_of(True, faults_not_run=["kill"]), "valid", "never ran: kill"),
])
def test_the_banner_says_the_verdict(tmp_path, results, kind, words) -> None:
    d = tmp_path / "run"
    d.mkdir()
    Q().send(0, [(0, 1)]).read_all(1).write(d / "history.jsonl")
    page = html_report.build(d, RunVerdict.model_validate(results))
    banner = page[page.index('<div id="verdict"'):]
    banner = banner[:banner.index('<div class="exit">')]
    assert f'class="banner {kind}"' in banner and words in banner
    for reason in results["unknown_reasons"]:
        assert f"<li>{reason}</li>" in banner
    assert "Rerun" in page and "rebuilt from the configuration" in page


def test_the_rebuilt_rerun_command_parses_back_to_the_configuration(tmp_path) -> None:
    config = RunConfig(acks="1", min_insync_replicas=1, nemesis=["kill", "unclean"],
                       nemesis_interval_s=3.5, txn=False, ops_per_txn=(2, 6), seed=42,
                       crash_clients=True, keys=4, time_limit_s=12.0).model_dump(mode="json")
    command = options.command_of(config)
    args = command.split()
    assert args[:2] == ["kafka-chaos", "run"] and "--acks" in args and "--brokers" not in args
    run = typer.main.get_command(app).commands["run"]
    params = run.make_context("run", args[2:]).params  # parsed, not run
    assert params["acks"] == "1" and params["min_insync_replicas"] == 1
    assert params["nemesis"] == "kill,unclean" and params["nemesis_interval_s"] == 3.5
    assert params["ops_per_txn"] == "2..6" and params["seed"] == 42
    assert params["crash_clients"] is True and params["time_limit_s"] == 12.0
    assert params["keys"] == 4
    # from a plan (a comparison cell's): the plan's settings cannot win over the config's
    plan = tmp_path / "p.yaml"
    plan.write_text("cluster: {broker_config: {num.io.threads: 4}}\nworkload: {acks: 1}\n"
                    "topics: {keys: 2}\n")
    cell = RunConfig(acks="all", keys=2, broker_properties={"num.io.threads": "4"})
    args = options.command_of(cell.model_dump(mode="json"), plan).split()
    params = run.make_context("run", args[2:]).params
    assert params["plan"] == plan and params["acks"] == "all" and params["keys"] == 2
    cfg, _ = options.configure(params, {"acks", "keys", "seed"})
    assert cfg == cell


def test_command_txt_gets_the_seed_it_ran_with(tmp_path) -> None:
    (tmp_path / "command.txt").write_text("kafka-chaos run --nemesis kill\n")
    assert html_report.rerun(tmp_path, {"seed": 0}, {"seed": 5})["command"] == \
        "kafka-chaos run --nemesis kill --seed 5"
    (tmp_path / "command.txt").write_text("kafka-chaos run --seed 9\n")
    assert html_report.rerun(tmp_path, None, {"seed": 9})["command"] == "kafka-chaos run --seed 9"


def analyzed(tmp_path, monkeypatch, result: dict) -> tuple[Path, object]:
    """``kafka-chaos analyze`` of a small history, the analysis replaced by ``result``."""
    d = tmp_path / "run"
    d.mkdir()
    Q().send(0, [(0, 1)]).read_all(1).write(d / "history.jsonl")
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    return d, cli("analyze", d)


def test_analyze_writes_junit_and_the_report_next_to_results(tmp_path, monkeypatch) -> None:
    lost = {"key": 0, "value": 1, "offset": 0, "op": 0, "covered_by": [0, 1], "final_end": 1}
    d, res = analyzed(tmp_path, monkeypatch, verdict(STRICT, {"lost-write": (1, [lost])}))
    assert res.exit_code == 1, res.output
    for name in ("results.json", "junit.xml", "report.html"):
        assert (d / name).is_file(), name
    saved = json.loads((d / "results.json").read_text())
    assert saved["verdict"] == "violation" and saved["kafka_chaos_version"] == __version__
    summary = (d / "summary.md").read_text()
    assert summary.startswith("## kafka-chaos: violation\n") and "VIOLATIONS: lost-write" in summary
    rows = markdown_rows(summary)
    assert rows[0] == ["anomaly", "count", "judged", "rule", "first example"]
    assert rows[1][:3] == ["lost-write", "1", "1 violation"] and rows[1][4].startswith(
        explain("lost-write", lost)[:40])
    suite = next(iter(JUnitXml.fromfile(str(d / "junit.xml"))))
    assert suite.failures == 1
    page = (d / "report.html").read_text()
    assert "VIOLATIONS: lost-write (1)" in page and explain("lost-write", lost) in page
    assert "report: " in said(res)


@pytest.mark.parametrize("found, code", [({}, 255), ({"unseen": (1, [])}, 1)])
def test_a_report_that_cannot_be_written_is_never_exit_0(tmp_path, monkeypatch, found,
                                                           code) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")
    monkeypatch.setattr(html_report, "write", broken)
    d, res = analyzed(tmp_path, monkeypatch, verdict(STRICT, found))
    assert res.exit_code == code, res.output
    assert "could not write junit.xml and report.html: RuntimeError: disk full" in said(res)
    assert (d / "results.json").is_file()
