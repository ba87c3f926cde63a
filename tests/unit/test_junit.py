"""``junit.xml``: built from hand-made verdicts and parsed back with junitparser."""

from __future__ import annotations

from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from kafka_chaos.analysis.explain import explain
from kafka_chaos.report import junit
from kafka_chaos.verdict import RunVerdict, exit_code
from tests.queue_builder import STRICT
from tests.verdicts import verdict

LOST = {"key": 0, "value": 17, "offset": 4, "process": 2, "op": 40, "index": 41, "type": "ok",
        "covered_by": [0, 9], "final_end": 9, "read_before": False}
LOST_2 = {**LOST, "value": 18, "offset": 5, "op": 44, "index": 45}
DUPLICATE = {"key": 1, "value": 3, "offsets": [2, 3], "op_indexes": [7, 9]}


def config(**overrides) -> dict:
    return {**STRICT, "backend": "local", "kafka_version": "4.4.0", "seed": 7,
            "nemesis": ["kill", "partition"], "scenario": None, **overrides}


PROPERTIES = ["lost writes", "duplicates", "log integrity", "ordering", "transactions",
              "cycles", "consumer delivery", "metadata", "liveness"]


def parsed(tmp_path: Path, results: dict, cfg: dict | None):
    """The one suite of ``junit.xml`` written for ``results``, its test cases by name and its
    properties."""
    tmp_path.mkdir(exist_ok=True)
    path = junit.write(tmp_path, RunVerdict.model_validate(results), cfg)
    assert path == tmp_path / "junit.xml"
    [suite] = list(JUnitXml.fromfile(str(path)))
    cases = {case.name: case for case in suite}
    assert [c for c in cases if c != "share delivery"][:9] == PROPERTIES
    assert {case.classname for case in suite} == {suite.name}
    props = {p.name: p.value for p in suite.properties()}
    return suite, cases, props


def test_a_valid_run_passes_every_property_with_the_run_facts(tmp_path) -> None:
    results = verdict(config(), {})
    suite, cases, props = parsed(tmp_path, results, config())
    # a hand-made verdict without op counts: nothing shows a check had nothing to check
    assert (suite.tests, suite.failures, suite.errors) == (10, 0, 0)
    assert all(case.is_passed for case in cases.values())
    assert suite.name.startswith("kafka-chaos queue nemesis=kill,partition config=")
    # one configuration is one suite whatever the seed (a nightly job's new seed each night)
    other = verdict(config(seed=8), {})
    assert parsed(tmp_path / "8", other, config(seed=8))[0].name == suite.name
    assert parsed(tmp_path / "acks", results, config(acks="1"))[0].name != suite.name
    assert suite.time == pytest.approx(42.5)
    assert props["seed"] == "7" and props["kafka_version"] == "3.9.1"  # the run's, not config's
    assert props["acks"] == "all" and props["min.insync.replicas"] == "2"
    assert props["enable.idempotence"] == "true" and props["transactional"] == "false"
    assert props["unclean.leader.election.enable"] == "false"
    assert props["backend"] == "local" and props["nemesis"] == "kill,partition"
    assert props["fail_on"] == "violation" and props["valid"] == "true"
    assert "scenario" not in props and "unclean_election_at_runtime" not in props


def test_share_delivery_is_a_property_of_share_group_runs_only(tmp_path) -> None:
    lost = {"key": 0, "value": 5, "offset": 2, "op": 3, "deliveries": 0,
            "max_delivery_count": None}
    results = verdict(config(sub_via="share"), {"share-lost": (1, [lost])})
    suite, cases, _ = parsed(tmp_path, results, config(sub_via="share"))
    assert (suite.tests, suite.failures) == (10, 1)
    [failure] = cases["share delivery"].result
    assert failure.message == "violations: share-lost (1)"
    assert "was never accepted, rejected or archived" in failure.text


def test_a_violation_fails_its_property_naming_counts_and_explaining_examples(
        tmp_path) -> None:
    results = verdict(config(), {"lost-write": (2, [LOST, LOST_2])})
    assert exit_code(results) == 1
    suite, cases, _ = parsed(tmp_path, results, config())
    assert (suite.tests, suite.failures, suite.errors) == (10, 1, 0)
    [failure] = cases["lost writes"].result
    assert isinstance(failure, Failure) and failure.type == "violation"
    assert failure.message == "violations: lost-write (2)"
    for example in (LOST, LOST_2):
        assert explain("lost-write", example) in failure.text
    assert results["anomalies"]["lost-write"]["because"] in failure.text
    assert all(cases[p].is_passed for p in PROPERTIES if p != "lost writes")


def test_permitted_anomalies_pass_under_violation_and_fail_under_any(tmp_path) -> None:
    cfg = config(idempotence=False)
    results = verdict(cfg, {"duplicate": (3, [DUPLICATE])})
    rule = results["anomalies"]["duplicate"]["rule"]
    assert results["valid"] is True and rule  # the configuration permits duplicates
    suite, cases, _ = parsed(tmp_path, results, cfg)
    assert cases["duplicates"].is_passed and suite.failures == 0
    assert explain("duplicate", DUPLICATE) in cases["duplicates"].system_out
    assert not cases["lost writes"].system_out

    results = verdict(cfg, {"duplicate": (3, [DUPLICATE])}, fail_on="any")
    suite, cases, props = parsed(tmp_path, results, cfg)
    [failure] = cases["duplicates"].result
    assert suite.failures == 1 and failure.type == "anomaly"
    assert failure.message == f"anomalies: duplicate (3, permitted by {rule})"
    assert props["fail_on"] == "any"


def test_an_unknown_verdict_errs_every_property_its_reasons_concern(tmp_path) -> None:
    reasons = ("no send was acknowledged: there was nothing to check",
               "scenario precondition not met: isr-shrink")
    cfg = config(scenario="isr-shrink-unclean", nemesis=[], txn=True)
    facts = {"seed": 3, "scenario": {"unmet": "isr-shrink"}, "faults_not_run": [],
             "heal_left": []}
    results = verdict(cfg, {}, reasons=reasons, facts=facts)
    suite, cases, props = parsed(tmp_path, results, cfg)
    assert (suite.failures, suite.errors) == (0, 11)
    for name in PROPERTIES:
        [error] = cases[name].result
        assert isinstance(error, Error) and error.type == "unknown"
        assert error.message == "; ".join(reasons)
    [unmet] = cases["scenario preconditions"].result
    assert unmet.message == "scenario precondition not met: isr-shrink"
    assert cases["final heal"].is_passed
    assert suite.name.startswith("kafka-chaos queue-txn scenario=isr-shrink-unclean config=")
    assert props["scenario"] == "isr-shrink-unclean" and "nemesis" not in props
    assert props["kafka_version"] == "4.4.0"  # not in the run facts: the configuration's
    # a reason that names an anomaly concerns its property alone
    results = verdict(config(), {}, reasons=("3 lost-write finding(s) unexplained: ...",))
    suite, cases, _ = parsed(tmp_path / "named", results, config())
    assert (suite.failures, suite.errors) == (0, 1) and not cases["lost writes"].is_passed


def test_a_violation_outranks_unknown_and_no_config_still_renders(tmp_path) -> None:
    results = verdict(config(), {"lost-write": (1, [LOST])}, reasons=("checker x raised",))
    results["anomalies"]["unseen"].update(count=None, error="boom")
    suite, cases, props = parsed(tmp_path, results, None)
    # the checker that raised names no anomaly: no property but the failed one is decided
    assert (suite.failures, suite.errors) == (1, 9)
    assert isinstance(cases["lost writes"].result[0], Failure)
    assert suite.name == "kafka-chaos queue nemesis=none config=unknown"
    assert props == {"seed": "7", "kafka_version": "3.9.1", "fail_on": "violation",
                     "valid": "false", "verdict": "violation"}


def test_each_fault_asked_for_is_a_case_skipped_when_it_never_ran(tmp_path) -> None:
    facts = {"seed": 7, "faults_not_run": ["partition"], "heal_left": ["n2 is not running"]}
    suite, cases, _ = parsed(tmp_path, verdict(config(), {}, facts=facts), config())
    assert cases["fault kill"].is_passed
    [skipped] = cases["fault partition"].result
    assert isinstance(skipped, Skipped) and "never ran" in skipped.message
    [error] = cases["final heal"].result
    assert isinstance(error, Error) and error.message == "n2 is not running"
    assert (suite.tests, suite.skipped, suite.errors) == (13, 1, 1)


def test_unclean_at_runtime_is_a_property(tmp_path) -> None:
    cfg = config(nemesis=["unclean", "kill"])
    _, _, props = parsed(tmp_path, verdict(cfg, {}), cfg)
    assert props["unclean_election_at_runtime"] == "true"


def test_a_run_without_a_verdict_still_leaves_results_and_junit(tmp_path) -> None:
    """A crash, an interrupt or a cluster that never came up: CI still finds a test case, an
    error naming why, and ``results.json`` says unknown; one holding a verdict is kept."""
    import json

    from kafka_chaos.check import write_no_verdict

    (tmp_path / "config.json").write_text(json.dumps(config()))
    (tmp_path / "run.json").write_text(json.dumps({"seed": 7, "kafka_version": "4.4.0"}))
    write_no_verdict(tmp_path, "the run failed: broker n2 did not start")
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["valid"] is None and res["verdict"] == "unknown"
    assert res["unknown_reasons"] == ["the run failed: broker n2 did not start"]
    assert res["run"]["seed"] == 7
    [suite] = list(JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    assert suite.name.startswith("kafka-chaos queue nemesis=kill,partition config=")
    assert [case.name for case in suite] == [*PROPERTIES[:7], "share delivery", "metadata",
                                             "liveness"]
    for case in suite:  # a crash decides no property
        assert isinstance(case.result[0], Error) and "broker n2" in case.result[0].message
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## kafka-chaos: unknown\n") and "broker n2 did not start" in summary
    (tmp_path / "results.json").write_text('{"valid": true}')
    write_no_verdict(tmp_path, "interrupted during the analysis")
    assert json.loads((tmp_path / "results.json").read_text()) == {"valid": True}


def by_f(*fs: str) -> dict:
    """``stats`` whose ops of each ``f`` completed ok."""
    return {"by_f": {f: {"ok": 5, "fail": 0, "info": 0, "pending": 0} for f in fs}}


def test_a_property_with_nothing_to_check_is_skipped_with_why(tmp_path) -> None:
    results = verdict(config(), {})  # assign consumers, no transactions
    results["stats"] = by_f("send", "poll", "assign")
    suite, cases, _ = parsed(tmp_path, results, config())
    skipped = {c.name: c.result[0].message for c in suite if c.is_skipped}
    assert skipped == {
        "consumer delivery": "not applicable: no consumer group ran (--sub-via subscribe)",
        "share delivery": "not applicable: no share group ran (--sub-via share)",
        "liveness": "not applicable: no transaction ran (--txn)"}
    # G1a is a failed send read back, transactions or not: the property was checked
    assert cases["transactions"].is_passed and cases["lost writes"].is_passed
    # a group run with transactions checks them all but the share group's
    results["stats"] = by_f("send", "poll", "txn", "subscribe")
    suite, cases, _ = parsed(tmp_path / "txn", results, config(txn=True, sub_via="subscribe"))
    assert [c.name for c in suite if c.is_skipped] == ["share delivery"]
    # what was found is never "not applicable", whatever ran
    results = verdict(config(), {"group-skip": (1, [{"key": 0, "value": 3}])})
    results["stats"] = by_f("send", "poll", "assign")
    suite, cases, _ = parsed(tmp_path / "found", results, config())
    assert isinstance(cases["consumer delivery"].result[0], Failure)
