"""The verdict built once (``verdict.RunVerdict``): ``analyze`` finishes it in one place, and
the terminal, ``results.json``, ``summary.md``, JUnit and the report say the same thing."""

from __future__ import annotations

import json
import re

import pytest
from junitparser import JUnitXml
from typer.testing import CliRunner

from kafka_chaos import analysis
from kafka_chaos.cli import app
from kafka_chaos.errors import ReportError
from kafka_chaos.report import data as report_data
from kafka_chaos.report import stats as report_stats
from kafka_chaos.verdict import RunVerdict, build
from tests.queue_builder import STRICT, Q
from tests.verdicts import verdict

pytestmark = pytest.mark.fast

DUPLICATE = {"key": 0, "value": 1, "offsets": [0, 1], "op_indexes": [1, 3]}
LOST = {"key": 0, "value": 1, "offset": 0, "op": 0, "covered_by": [0, 1], "final_end": 1}


@pytest.mark.parametrize("found, facts, fail_on, word, code", [
    ({}, {}, "violation", "valid", 0),
    ({"duplicate": (1, [DUPLICATE])}, {}, "violation", "valid", 0),
    ({"duplicate": (1, [DUPLICATE])}, {}, "any", "valid", 1),
    ({"lost-write": (1, [LOST])}, {}, "violation", "violation", 1),
    ({}, {"scenario": {"unmet": "step 2: the ISR never shrank"}}, "violation", "unknown", 2),
])
def test_every_renderer_shows_the_one_verdict(tmp_path, monkeypatch, found, facts, fail_on,
                                              word, code) -> None:
    d = tmp_path / "run"
    d.mkdir()
    Q().send(0, [(0, 1), (0, 2)]).send(1, [(0, 3)], type="fail").read_all(2).write(
        d / "history.jsonl")
    (d / "run.json").write_text(json.dumps({"seed": 3, **facts}))
    result = verdict({**STRICT, "idempotence": False}, found, facts={})
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    summaries = []
    real = report_stats.summary
    monkeypatch.setattr(report_stats, "summary", lambda data: summaries.append(1) or real(data))

    res = CliRunner().invoke(app, ["analyze", str(d), "--fail-on", fail_on])

    assert res.exit_code == code, res.output
    assert len(summaries) == 1  # the availability figures are the verdict's, computed once
    saved = json.loads((d / "results.json").read_text())
    assert (saved["verdict"], saved["exit_code"], saved["fail_on"]) == (word, code, fail_on)
    assert saved["run"]["seed"] == 3
    assert saved["availability"] == real(report_data.extract(d / "history.jsonl"))
    assert f"Verdict: {word}" in " ".join(res.output.split())
    assert (d / "summary.md").read_text().startswith(f"## kafka-chaos: {word}\n")
    [suite] = list(JUnitXml.fromfile(str(d / "junit.xml")))
    props = {p.name: p.value for p in suite.properties()}
    assert (props["verdict"], props["fail_on"]) == (word, fail_on)
    assert bool(suite.failures) == (code == 1) and bool(suite.errors) == (code == 2)
    page = (d / "report.html").read_text()
    kind = RunVerdict.load(d).banner()["kind"]
    assert f'class="banner {kind}"' in page
    assert f"exit code {code} under <code>--fail-on {fail_on}</code>" in page
    avail = saved["availability"]
    assert avail["sends"] == 3 and avail["acked"] == 2
    assert re.search(rf"{avail['acked']} of {avail['sends']} \(66\.67 %\)", page)


def test_the_json_form_round_trips_and_keeps_what_it_does_not_know(tmp_path) -> None:
    made = build(verdict(STRICT, {"lost-write": (1, [LOST])}), {"seed": 1, "client": {
        "name": "librdkafka", "version": "2.6.1"}}, "any", {"sends": 1, "acked": 1})
    made.write(tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["client"] == {"name": "librdkafka", "version": "2.6.1"}
    again = RunVerdict.load(tmp_path)
    assert again == made and again.to_json() == saved
    saved["added_by_a_later_version"] = {"x": 1}
    (tmp_path / "results.json").write_text(json.dumps(saved))
    assert RunVerdict.load(tmp_path).to_json()["added_by_a_later_version"] == {"x": 1}


def test_an_earlier_results_json_loads_with_its_exit_code_derived(tmp_path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({
        "valid": None, "verdict": "unknown", "anomalies": {}, "anomaly_types": [],
        "violations": [], "permitted": [], "unknown_reasons": ["no verdict"],
        "run": None, "fail_on": "violation"}))
    loaded = RunVerdict.load(tmp_path)
    assert (loaded.verdict, loaded.exit_code, loaded.run) == ("unknown", 2, {})


@pytest.mark.parametrize("text, says", [
    (None, "missing"),
    ('{"valid": true,\n "anomalies": ', "line 2: not valid JSON"),
    ("[1, 2]", "not a verdict"),
    ('{"anomalies": {}}', "not a verdict"),
    ('{"valid": true, "violations": 3}', "field violations"),
    ('{"valid": true, "fail_on": "sometimes"}', "field fail_on"),
])
def test_a_malformed_results_json_is_one_error_naming_the_file(tmp_path, text, says) -> None:
    if text is not None:
        (tmp_path / "results.json").write_text(text)
    with pytest.raises(ReportError, match=re.escape(says)) as caught:
        RunVerdict.load(tmp_path)
    assert str(tmp_path / "results.json") in str(caught.value)
    Q().send(0, [(0, 1)]).read_all(1).write(tmp_path / "history.jsonl")
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 254 and says in " ".join(res.output.split())


def test_the_report_shows_the_verdicts_availability_figures(tmp_path) -> None:
    """The page renders the verdict's figures (the history only draws the plots): figures no
    history of this run could give appear as they are."""
    from kafka_chaos.report import html as html_report

    Q().send(0, [(0, 1)]).read_all(1).write(tmp_path / "history.jsonl")
    made = build(verdict(STRICT, {}), {}, "violation", {
        "sends": 7777, "acked": 5555, "ack_share": 5555 / 7777, "unavailable_s": 12.5,
        "workload_s": 50.0, "ops": {"ok": 11, "fail": 22, "info": 33}})
    page = " ".join(html_report.build(tmp_path, made).split())
    assert "5555 of 7777 (71.43 %)" in page
    assert "11 ok · 22 fail · 33 info" in page and "12.50 s in all" in page


def outage(path):
    """A history whose workload had no acknowledgement for 2.2 of its 2.7 s, around a kill
    of the leader healed at 2.0 s and followed by an acknowledgement 0.8 s later."""
    from tests.unit.test_report_data import ALL_UP, sample, write_timed

    q = (Q().send(0, [(0, 1)])
         .nemesis("kill", {"target": "leader"}, {"killed": ["n1"]})
         .monitor(sample(-1, [2, 3], {1: False, 2: True, 3: True}))
         .send(0, [(0, 2)], type="info", acked=[False])
         .nemesis("start", None, {"started": ["n1"]})
         .send(1, [(0, 3)])
         .send(1, [(0, 4), (0, 5)])
         .monitor(sample(2, [1, 2, 3], ALL_UP, epoch=2)))
    times = [0.1, 0.2, 0.3, 0.35, 0.36, 0.37, 0.4, 1.4, 1.9, 2.0, 1.5, 2.4, 2.5, 2.8, 3.0, 3.01]
    order = sorted(range(len(times)), key=times.__getitem__)
    q.lines = [q.lines[i] for i in order]
    return write_timed(q, path, sorted(times))


def test_the_availability_figures_are_equal_in_every_view(tmp_path, monkeypatch) -> None:
    runs = tmp_path / "runs"
    d = runs / "20261130T000000-1"
    d.mkdir(parents=True)
    outage(d / "history.jsonl")
    result = verdict(STRICT, {}, facts={})
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    res = CliRunner().invoke(app, ["analyze", str(d)])
    assert res.exit_code == 0, res.output

    figures = RunVerdict.load(d).availability_figures()
    assert figures["no_ack_pct"] == 81.5 and figures["longest_no_ack_s"] == 2.2
    assert figures["slowest_recovery_s"] == 0.8 and figures["unrecovered"] == 0
    said = " ".join(res.output.split())
    assert (f"availability: {figures['acked_pct']:.2f} % of "
            f"{RunVerdict.load(d).availability['sends']:,} sends acknowledged; no acknowledged "
            "send for 2.2 s of 2.7 s (81.5 %), longest 2.2 s; slowest recovery after a heal "
            "0.8 s") in said
    summary = (d / "summary.md").read_text()
    assert (f"| {figures['acked_pct']:.2f} | 81.5 | 2.2 | 0.8 |  | 0 |") in summary
    [suite] = list(JUnitXml.fromfile(str(d / "junit.xml")))
    props = {p.name: p.value for p in suite.properties()}
    assert (props["acked_pct"], props["no_ack_pct"], props["longest_no_ack_s"],
            props["slowest_recovery_s"]) == (f"{figures['acked_pct']:.2f}", "81.5", "2.2", "0.8")
    history = CliRunner().invoke(app, ["history", str(runs), "--format", "json"])
    [run] = json.loads(history.output)[0]["runs"]
    assert (run["availability_pct"], run["no_ack_pct"]) == (figures["acked_pct"], 81.5)
    table = CliRunner().invoke(app, ["history", str(runs), "--format", "markdown"]).output
    assert f"| {figures['acked_pct']:.2f} | 81.5 |" in table


def test_the_headline_says_why_a_valid_run_exits_1(tmp_path, monkeypatch) -> None:
    d = tmp_path / "run"
    d.mkdir()
    Q().send(0, [(0, 1), (0, 2)]).read_all(1).write(d / "history.jsonl")
    result = verdict({**STRICT, "idempotence": False},
                     {"duplicate": (3, [DUPLICATE] * 3)}, facts={})
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    res = CliRunner().invoke(app, ["analyze", str(d), "--fail-on", "any"])
    assert res.exit_code == 1, res.output
    why = "(exit 1: --fail-on any counts 3 permitted findings)"
    assert RunVerdict.load(d).banner()["headline"] == (
        f"VALID, with permitted anomalies: duplicate (3) {why}")
    assert why in " ".join(res.output.split())
    assert why in (d / "summary.md").read_text() and why in (d / "report.html").read_text()
    again = CliRunner().invoke(app, ["analyze", str(d)])  # --fail-on violation: exit 0
    assert again.exit_code == 0 and "exit 1" not in RunVerdict.load(d).banner()["headline"]


def test_checks_with_nothing_to_check_are_not_applicable_in_every_view(tmp_path,
                                                                       monkeypatch) -> None:
    d = tmp_path / "run"
    d.mkdir()
    Q().send(0, [(0, 1)]).read_all(1).write(d / "history.jsonl")
    result = verdict(STRICT, {}, facts={})  # assign consumers, no transactions
    result["stats"] = {"ops": 3, "by_f": {"send": {"ok": 1}, "poll": {"ok": 2}},
                       "acked_sends": 1, "records_read": 1}
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    res = CliRunner().invoke(app, ["analyze", str(d)])
    assert res.exit_code == 0, res.output
    saved = json.loads((d / "results.json").read_text())
    na = saved["not_applicable"]
    assert na["group-skip"] == ["no consumer group ran (--sub-via subscribe)"]
    assert na["eos-duplicate"] == ["no transaction ran (--txn)",
                                   "no consumer group ran (--sub-via subscribe)"]
    assert na["hanging-transaction"] == ["no transaction ran (--txn)"]
    assert "G1a" not in na and "lost-write" not in na and "share-lost" in na
    said = " ".join(res.output.split())
    assert ("not applicable, no consumer group ran (--sub-via subscribe): group-skip, "
            "group-redelivery, group-rewind, group-overlap") in said
    assert "group-skip" not in said.split("none found")[1].split("not applicable")[0]
    assert "VIOLATION" not in said and "Verdict: valid VALID: no anomaly found" in said
    summary = (d / "summary.md").read_text()
    assert "Not applicable, no share group ran (--sub-via share): share-lost" in summary
    page = " ".join((d / "report.html").read_text().split())
    assert "Not applicable (nothing to check in this run):" in page
    assert "no transaction ran (--txn): precommitted-read, hanging-transaction" in page
