"""The steady-state limits (``kafka_chaos.steady``): parsed, judged on the availability
figures, and shown with the exit code they decide in every view (``analyze`` on a
hand-built history; the real run is ``tests/integration/test_runs.py``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from junitparser import JUnitXml
from typer.testing import CliRunner

from kafka_chaos import analysis, steady
from kafka_chaos.cli import app
from kafka_chaos.verdict import RunVerdict
from tests.queue_builder import STRICT, Q
from tests.unit.test_run_verdict import outage
from tests.verdicts import verdict

pytestmark = pytest.mark.fast

FIGURES = {"no_ack_s": 2.2, "workload_s": 2.7, "no_ack_pct": 81.5, "slowest_recovery_s": 0.8,
           "unrecovered": 0}


@pytest.mark.parametrize("text, parsed", [("10%", ("%", 10.0)), (" 2.5 % ", ("%", 2.5)),
                                          ("30s", ("s", 30.0)), ("30", ("s", 30.0))])
def test_a_limit_is_a_share_or_seconds(text, parsed) -> None:
    assert steady.parse_unavailable(text) == parsed


@pytest.mark.parametrize("text", ["", "ten", "10m", "-5%", "150%", "10%%"])
def test_a_limit_that_is_neither_is_refused_naming_the_flag(text) -> None:
    with pytest.raises(ValueError, match="^--max-unavailable"):
        steady.parse_unavailable(text)


@given(st.floats(0, 100), st.floats(0, 100), st.booleans())
def test_a_limit_breaks_exactly_when_the_figure_exceeds_it(seen, limit, share) -> None:
    figures = {**FIGURES, "no_ack_pct": seen, "no_ack_s": seen}
    text = steady.canonical(f"{limit:.6f}{'%' if share else 's'}")
    limit = steady.parse_unavailable(text)[1]
    state = steady.judge(figures, text, None)
    assert state["held"] is (seen <= limit) and len(state["broken"]) == (seen > limit)


def test_recovery_breaks_on_a_slow_or_a_missing_recovery() -> None:
    assert steady.judge(FIGURES, None, 1.0)["held"] is True
    assert steady.judge(FIGURES, None, 0.5)["broken"] == [
        "slowest recovery after a heal 0.8 s, above --max-recovery 0.5"]
    never = steady.judge({**FIGURES, "unrecovered": 2}, None, 60.0)
    assert never["held"] is False and "2 healed fault(s) never followed" in never["broken"][0]


def test_no_limit_judges_nothing_and_no_figures_judge_no_limit() -> None:
    assert steady.judge(FIGURES, None, None) == {} and steady.line({}) is None
    state = steady.judge({}, "10%", None)
    assert state["held"] is None and "no availability figures" in state["unjudged"]


def _analyzed(tmp_path, monkeypatch, config: dict | None = None):
    d = tmp_path / "run"
    d.mkdir()
    outage(d / "history.jsonl")
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    result = verdict(STRICT, {}, facts={})
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    return d


def test_a_broken_limit_exits_1_and_every_view_says_which(tmp_path, monkeypatch) -> None:
    """The history is valid and had no acknowledged send for 81.5 % of its time: under
    --max-unavailable 10% the run exits 1, the word stays valid, and the terminal,
    summary.md, junit.xml, results.json and report.html name the limit broken."""
    d = _analyzed(tmp_path, monkeypatch)
    res = CliRunner().invoke(app, ["analyze", str(d), "--max-unavailable", "10%"])
    assert res.exit_code == 1, res.output
    why = ("no acknowledged send for 2.2 s of 2.7 s (81.5 %), above --max-unavailable 10%")
    decided = RunVerdict.load(d)
    assert decided.verdict == "valid" and decided.steady_state["broken"] == [why]
    assert decided.banner()["headline"] == (f"VALID: no anomaly found; STEADY STATE BROKEN: "
                                            f"{why} (exit 1: a steady-state limit broke)")
    said = " ".join(res.output.split())
    assert f"steady state: BROKEN: {why}" in said and "exit 1: a steady-state" in said
    assert f"Steady state: BROKEN: {why}" in (d / "summary.md").read_text()
    [suite] = list(JUnitXml.fromfile(str(d / "junit.xml")))
    [case] = [c for c in suite if c.name == "steady state"]
    assert case.result[0].type == "steady-state" and case.result[0].message == why
    assert {p.name: p.value for p in suite.properties()}["max_unavailable"] == "10%"
    assert why in (d / "report.html").read_text()


def test_the_runs_own_limit_holds_until_analyze_replaces_it(tmp_path, monkeypatch) -> None:
    d = _analyzed(tmp_path, monkeypatch, {"max_unavailable": "90%", "max_recovery_s": 1.0})
    res = CliRunner().invoke(app, ["analyze", str(d)])
    assert res.exit_code == 0, res.output
    assert "steady state: held (--max-unavailable 90%, --max-recovery 1)" in res.output
    [suite] = list(JUnitXml.fromfile(str(d / "junit.xml")))
    assert [c.result for c in suite if c.name == "steady state"] == [[]]
    res = CliRunner().invoke(app, ["analyze", str(d), "--max-recovery", "0.5"])
    assert res.exit_code == 1 and "above --max-recovery 0.5" in res.output
    res = CliRunner().invoke(app, ["analyze", str(d), "--max-unavailable", "none",
                                   "--max-recovery", "none"])
    assert res.exit_code == 0 and RunVerdict.load(d).steady_state == {}
    assert "steady state" not in res.output


def test_a_limit_without_figures_makes_the_verdict_unknown(tmp_path, monkeypatch) -> None:
    """A history with no send has no availability to judge: a limit asked for is never
    passed unseen."""
    d = tmp_path / "run"
    d.mkdir()
    Q().read_all(1, [0]).write(d / "history.jsonl")
    result = verdict(STRICT, {}, facts={})
    monkeypatch.setattr(analysis, "check", lambda *a, **k: json.loads(json.dumps(result)))
    res = CliRunner().invoke(app, ["analyze", str(d), "--max-unavailable", "10%"])
    assert res.exit_code == 2, res.output
    reasons = RunVerdict.load(d).unknown_reasons
    assert reasons == [f"{steady.UNJUDGED}: no availability figures (no send attempted, or "
                       "the history could not be read for them)"]
    [suite] = list(JUnitXml.fromfile(str(d / "junit.xml")))
    errored = [c.name for c in suite if c.result and c.result[0].type == "unknown"]
    assert errored == ["steady state"]


@pytest.mark.parametrize("flag, value", [("--max-unavailable", "ten"),
                                         ("--max-recovery", "-1"), ("--max-recovery", "x")])
def test_analyze_refuses_a_limit_naming_its_flag(tmp_path, flag, value) -> None:
    res = CliRunner().invoke(app, ["analyze", str(tmp_path), flag, value])
    assert res.exit_code == 254 and flag in res.output
