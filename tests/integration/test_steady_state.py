"""The steady-state limits on a real cluster: an outage the run really had breaks
``--max-unavailable``, and its figures are one in every view (issue 51's acceptance)."""

from __future__ import annotations

import json

import pytest
from junitparser import JUnitXml

from kafka_chaos.verdict import RunVerdict
from tests.integration.conftest import kafka_chaos, leftovers, results_of, steps_done

pytestmark = pytest.mark.kafka

#: Replication from the leader of the one partition is cut until its ISR is the leader
#: alone (min.insync.replicas=2: no acks=all write can succeed), then kept cut for 20 s in
#: all before the heal; 10 s of workload after it show the recovery.
OUTAGE = """\
name: leader-replication-outage
about: 20 s without replication from the leader of partition 0, then healed.
settings: {keys: 1, topics: 1, replica_lag_time_max_ms: 3000}
steps:
  - name: cut replication between the leader and its followers
    after: 5
    mark: L
    do: partition
    target: leader-replication
    until: {isr: [L]}
    timeout: 30
  - name: heal
    after: 14
    do: heal
  - after: 10                        # the recovery: sends after the heal (the run ends here)
"""


def test_an_outage_breaks_max_unavailable_and_its_figures_agree_everywhere(tmp_path):
    schedule = tmp_path.with_name(tmp_path.name + "-outage.yaml")
    schedule.write_text(OUTAGE)
    runs = tmp_path / "runs"
    proc = kafka_chaos("run", "--scenario", str(schedule), "--max-unavailable", "10%",
                       "--seed", "5", "--out", str(runs))
    run = runs / "latest"
    res = results_of(run, proc)
    said = " ".join(proc.stdout.split())
    # the outage really happened: the ISR shrank to the leader, the heal came
    scenario = res["run"]["scenario"]
    steps_done(scenario, 3)
    figures = RunVerdict.load(run).availability_figures()
    assert figures["no_ack_s"] >= 12, figures  # the ISR shrank within ~5 s of the 20 s cut
    # sends invoked after the heal were acknowledged, the first within the 10 s left
    [healed] = [r for r in res["availability"]["recovery"] if r["sent_after"]]
    assert healed["fault"] == "partition" and healed["first_ack_s"] is not None, healed
    assert figures["slowest_recovery_s"] is not None and figures["unrecovered"] == 0
    assert proc.returncode == 1 and res["verdict"] == "valid", said
    why = (f"no acknowledged send for {figures['no_ack_s']:.1f} s of "
           f"{figures['workload_s']:.1f} s ({figures['no_ack_pct']:.1f} %), above "
           "--max-unavailable 10%")
    assert res["steady_state"]["broken"] == [why] and f"STEADY STATE BROKEN: {why}" in said
    [case] = [c for c in next(iter(JUnitXml.fromfile(str(run / "junit.xml"))))
              if c.name == "steady state"]
    assert case.result[0].message == why

    # the same run without the limit: valid, exit 0, and the same figures in every view
    again = kafka_chaos("analyze", str(run), "--max-unavailable", "none")
    assert again.returncode == 0, again.stdout + again.stderr
    decided = RunVerdict.load(run)
    assert decided.steady_state == {} and decided.availability_figures() == figures
    shown = decided.availability_shown()
    assert f"availability: {decided.availability_line()}" in " ".join(again.stdout.split())
    summary = (run / "summary.md").read_text()
    assert "| " + " | ".join(shown[k] for k in ("acked_pct", "no_ack_pct",
                                                 "longest_no_ack_s")) in summary
    [suite] = list(JUnitXml.fromfile(str(run / "junit.xml")))
    props = {p.name: p.value for p in suite.properties()}
    assert all(props[k] == shown[k] for k in ("acked_pct", "no_ack_pct", "longest_no_ack_s"))
    history = kafka_chaos("history", str(runs), "--format", "json")
    [entry] = json.loads(history.stdout)[0]["runs"]
    assert (entry["availability_pct"], entry["no_ack_pct"]) == (figures["acked_pct"],
                                                               figures["no_ack_pct"])
    assert leftovers() == []
