"""The live verdict on a real cluster: a run whose plan forbids what its scenario causes stops
as soon as a live check finds it, and its verdict is the batch analysis of its history."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.conftest import ROOT, kafka_chaos, leftovers, results_of

pytestmark = pytest.mark.kafka

#: The built-in isr-shrink-unclean scenario, then 150 s of workload the stop must cut short
#: (90 s was too short in a CI run at about half the usual speed: its first live check took
#: 82.9 s, and the workload ended before the second).
TAIL = """
  - name: keep the workload going long after the loss
    after: 150
"""


@pytest.mark.long  # 327 s in a full run of 2026-12-01; tests/unit/test_live.py stays in it
def test_a_forbidden_loss_stops_the_run_early_and_the_verdict_is_the_batch_one(tmp_path):
    scenario = (ROOT / "nemesis" / "scenarios" / "isr-shrink-unclean.yaml").read_text()
    steps = scenario.rstrip().splitlines()
    assert steps[-1].strip() == "- after: 2.5"  # replaced by the long tail
    (tmp_path / "long.yaml").write_text("\n".join(steps[:-1]) + TAIL)
    (tmp_path / "plan.yaml").write_text(
        "topics: {min_insync_replicas: 1}\n"
        "nemesis: {scenario: long.yaml}\n"
        "checkers: {forbid: [inconsistent-offsets, lost-write]}\n")
    proc = kafka_chaos("run", "--plan", str(tmp_path / "plan.yaml"), "--stop-on-violation",
                       "--live-interval", "3", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    res = results_of(run_dir, proc)
    facts = res["run"]
    checks = [json.loads(x) for x in (run_dir / "live.jsonl").read_text().splitlines()]

    # the first check came before the first fault (5 s in) and found nothing forbidden;
    # the stopping check found a forbidden anomaly, once the scenario had caused it
    assert checks[0]["counted"] == [] and "error" not in checks[0], checks[0]
    stopping = checks[-1]
    assert stopping["counted"] and set(stopping["counted"]) <= {"inconsistent-offsets",
                                                               "lost-write"}, stopping
    assert [c["lines"] for c in checks] == sorted(c["lines"] for c in checks)
    assert facts["stopped_early"] == {"anomalies": stopping["counted"]}
    assert facts["live"]["checks"] == len(checks) and facts["live"]["errors"] == 0
    assert facts["live"]["counted"] == stopping["counted"]
    # early: the ISR shrank to the leader and the leader died (the steps whose conditions
    # held); the loss follows the unclean election of step 3, and the stop may come before
    # that step or the restart of step 4 have returned; the 150 s tail was cut short
    assert 2 <= facts["scenario"]["steps_done"] <= 4, facts["scenario"]
    assert "unmet" not in facts["scenario"], facts["scenario"]
    # the tail alone is 150 s after step 4 (itself 20-30 s in): under 160 s it was cut short
    # (79.8 s once beside a Spark test on the other worker, its first live check taking 38 s)
    assert facts["workload_s"] < 160, facts["workload_s"]
    assert facts["live"]["stopped_at_s"] < facts["workload_s"]
    # the console wraps log lines and puts the logging call's place on the first one
    said = " ".join(w for w in proc.stdout.split() if not re.fullmatch(r"\w+\.py:\d+", w))
    assert "stopping the run (heal, final reads, full analysis)" in said, said[-2000:]
    # then as after a time limit: healed, read to the end, analysed in full
    assert facts["heal_left"] == [] and facts["final_reads"] == {"0": "ok"}, facts
    assert proc.returncode == 1 and res["valid"] is False, proc.stdout
    assert set(stopping["counted"]) <= set(res["violations"]) <= {"inconsistent-offsets",
                                                                  "lost-write"}
    for name, count in stopping["anomalies"].items():  # a prefix shows no more than the whole
        assert count <= res["anomalies"][name]["count"], name
    assert not (run_dir / "live").exists()

    # the run's verdict is what a batch analysis of the same history says
    again = kafka_chaos("analyze", str(run_dir))
    batch = results_of(run_dir, again)
    assert again.returncode == proc.returncode
    for key in ("valid", "violations", "permitted", "anomaly_types", "stats"):
        assert batch[key] == res[key], key
    assert ({n: a["count"] for n, a in batch["anomalies"].items()}
            == {n: a["count"] for n, a in res["anomalies"].items()})
    assert batch["run"]["stopped_early"] == facts["stopped_early"]
    assert leftovers() == []
