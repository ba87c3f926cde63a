"""Histories of format 1 (kafka-chaos 0.1) still load and give the same findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_chaos import analysis
from tests.builder import H
from tests.queue_builder import Q

OLD = ["lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-send"]


def scenario_v1() -> H:
    """The anomalies 0.1 knew, one per key, in the 0.1 format (one send or poll per op)."""
    h = H()
    h.send(0, 0, 1, offset=0).send(0, 0, 2, offset=1).send(1, 0, 3, offset=2)      # key 0: lost
    h.send(0, 1, 10, offset=0).send(0, 1, 11, offset=1).send(1, 1, 12, no_offset=True)  # unseen
    h.send(2, 2, 20, offset=0).send(2, 2, 21, offset=2)                            # key 2: dup
    h.send(3, 3, 30, offset=0).poll(4, 3, [(0, 30)]).send(5, 3, 31, offset=0)      # key 3: rewrite
    h.send(6, 4, 40, offset=5).send(6, 4, 41, offset=3)                            # key 4: back
    h.send(7, 5, 50, type="fail").send(7, 5, 51, type="info").send(8, 5, 52, type="pending")
    h.poll(9, 0, [(0, 1), (2, 3)], final=True).poll(9, 1, [(0, 10)], final=True, end_offset=1)
    h.poll(9, 2, [(0, 20), (1, 20), (2, 21)], final=True).poll(9, 3, [(0, 31)], final=True)
    h.poll(9, 4, [(3, 41), (5, 40)], final=True, end_offset=6).poll(9, 5, [], final=True)
    return h


def scenario_v2() -> Q:
    """The same operations, written as format-2 ops."""
    q = Q(config=None)  # 0.1 histories carry no configuration
    q.config = None
    q.send(0, [(0, 1)], offsets=[0]).send(0, [(0, 2)], offsets=[1]).send(1, [(0, 3)], offsets=[2])
    q.send(0, [(1, 10)], offsets=[0]).send(0, [(1, 11)], offsets=[1])
    q.send(1, [(1, 12)], offsets=[None])
    q.send(2, [(2, 20)], offsets=[0]).send(2, [(2, 21)], offsets=[2])
    q.send(3, [(3, 30)], offsets=[0]).poll(4, {3: [(0, 30)]}).send(5, [(3, 31)], offsets=[0])
    q.send(6, [(4, 40)], offsets=[5]).send(6, [(4, 41)], offsets=[3])
    q.send(7, [(5, 50)], type="fail").send(7, [(5, 51)], type="info", acked=[False])
    q.send(8, [(5, 52)], type="pending")
    q.final(9, 0, [(0, 1), (2, 3)]).final(9, 1, [(0, 10)], end=1)
    q.final(9, 2, [(0, 20), (1, 20), (2, 21)]).final(9, 3, [(0, 31)])
    q.final(9, 4, [(3, 41), (5, 40)], end=6).final(9, 5, [])
    return q


def counts(result: dict) -> dict[str, int]:
    return {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}


@pytest.mark.spark
def test_format1_findings_are_those_of_0_1_and_of_the_same_ops_in_format2(
        spark, tmp_path: Path) -> None:
    v1 = analysis.check(scenario_v1().write(tmp_path / "v1.jsonl"))
    # the counts 0.1 reported for these ops: key 0 offset 1 lost; key 1's 11 (offset 1) and 12
    # (no offset) unseen; key 2's 20 twice; key 3 offset 0 rewritten (30 is read, 31 acked
    # there too); key 4 sent backwards. 0.2 also counts 30 as lost: read once, then gone from
    # the final read (0.1's workload never polled before the final reads, so its own histories
    # never hold such a case)
    old = {k: n for k, n in counts(v1).items() if k in OLD}
    assert old == {"lost-write": 2, "unseen": 2, "duplicate": 1, "inconsistent-offsets": 1,
                   "nonmonotonic-send": 1}
    # new in 0.2: the backwards send of key 4 also closes a process/realtime cycle
    assert set(counts(v1)) - set(OLD) == {"G0-process", "G0-realtime"}
    assert v1["format"] == 1 and v1["config_known"] is False
    assert v1["valid"] is False and v1["permitted"] == []  # nothing is permitted
    lost = v1["anomalies"]["lost-write"]["examples"][0]
    assert (lost["key"], lost["value"], lost["offset"], lost["covered_by"]) == (0, 2, 1, [0, 3])
    v2 = analysis.check(scenario_v2().write(tmp_path / "v2.jsonl"))
    assert counts(v2) == counts(v1)
    assert v2["format"] == 2 and v2["stats"]["acked_sends"] == v1["stats"]["acked_sends"] == 12


@pytest.mark.spark
def test_format1_clean_history_is_valid_and_a_missing_final_read_unknown(
        spark, tmp_path: Path) -> None:
    h = (H().nemesis("kill", {"nodes": [2]}, {"killed": [2]})
         .send(0, 0, 1).send(0, 1, 2).send(1, 0, 3).send(1, 2, 4)
         .send(2, 0, 5, type="fail").send(3, 1, 6, type="info")
         .poll(4, 0, [(0, 1)])                 # a poller behind the log is fine
         .send(5, 1, 8, type="pending")
         .read_all(6))
    result = analysis.check(h.write(tmp_path / "clean.jsonl"), config={"acks": "all"})
    assert result["valid"] is True and counts(result) == {}
    assert result["config_known"] is True  # config.json of the run directory, passed in
    assert result["stats"]["by_f"]["send"] == {"ok": 4, "fail": 1, "info": 1, "pending": 1}
    h = (H().send(0, 0, 1).send(0, 1, 2).send(0, 1, 3)
         .poll(1, 0, [(0, 1)], final=True)
         .poll(1, 1, [(0, 2)])                   # not final: offset 1 may just be unread yet
         .poll(1, 1, type="fail", final=True))   # the final read of key 1 failed
    result = analysis.check(h.write(tmp_path / "no-final.jsonl"))
    assert result["valid"] == "unknown" and counts(result) == {}
    assert any("key(s) 1:" in r for r in result["unknown_reasons"])
