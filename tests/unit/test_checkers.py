"""Each anomaly on a hand-made history with an exact expected count, and the validity rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import analysis
from analysis.checkers import CHECKERS
from tests.builder import H

NAMES = ["lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-send"]


@pytest.fixture
def run(spark, tmp_path: Path):
    """``run(h)`` writes the history and returns ``analysis.check``'s result."""
    def _run(h: H) -> dict[str, Any]:
        result = analysis.check(h.write(tmp_path / "history.jsonl"))
        json.dumps(result)  # the result must be plain JSON-able data
        return result
    return _run


def counts(result: dict[str, Any]) -> dict[str, int]:
    return {name: a["count"] for name, a in result["anomalies"].items()}


def only(name: str, n: int) -> dict[str, int]:
    return {k: (n if k == name else 0) for k in NAMES}


def test_clean_history_is_valid(run) -> None:
    h = (H().nemesis("kill", {"nodes": [2]}, {"killed": [2]})
         .send(0, 0, 1).send(0, 1, 2).send(1, 0, 3).send(1, 2, 4)
         .send(2, 0, 5, type="fail")
         .send(3, 1, 6, type="info")
         .poll(4, 0, [(0, 1)])                 # a poller behind the log is fine
         .send(0, 2, 7)
         .nemesis("start", {"nodes": [2]}, {"started": [2]})
         .send(5, 1, 8, type="pending")
         .read_all(6))
    result = run(h)
    assert result["valid"] is True
    assert counts(result) == only("lost-write", 0)
    assert result["anomaly_types"] == [] and result["unknown_reasons"] == []
    assert all(a["examples"] == [] for a in result["anomalies"].values())
    assert result["stats"] == {
        "ops": len(h.lines),
        "send": {"ok": 5, "fail": 1, "info": 1, "pending": 1},
        "poll": {"ok": 4, "fail": 0, "info": 0, "pending": 0},
        "nemesis": 2, "keys": 3}
    assert isinstance(result["analysis_time_s"], float) and result["analysis_time_s"] > 0


def test_lost_writes(run) -> None:
    h = (H().send(0, 0, 1, offset=0).send(0, 0, 2, offset=1).send(1, 0, 3, offset=2)
         .send(1, 0, 4, offset=3)
         .send(0, 1, 10, offset=0).send(0, 1, 11, offset=1)
         .poll(2, 0, [(0, 1), (2, 3), (3, 4)], final=True)  # offset 1 (value 2) skipped
         .poll(2, 1, [(1, 11)], final=True))                 # offset 0 (value 10) skipped
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("lost-write", 2)
    assert result["anomaly_types"] == ["lost-write"]
    first, second = result["anomalies"]["lost-write"]["examples"]
    assert first == {"key": 0, "value": 2, "partition": 0, "offset": 1, "process": 0,
                     "invoke_index": 2, "send_index": 3, "max_read_offset": 3,
                     "max_read_poll_index": 13}
    assert (second["key"], second["value"], second["offset"]) == (1, 10, 0)


def test_write_at_the_highest_read_offset_is_lost_when_another_value_sits_there(run) -> None:
    h = (H().send(0, 0, 1, offset=0).send(0, 0, 2, offset=1)
         .poll(1, 0, [(0, 1), (1, 9)], final=True))
    result = run(h)
    # Jepsen: offset <= highest read offset and never read -> lost; and offset 1 holds 2 and 9.
    assert counts(result) == {**only("lost-write", 1), "inconsistent-offsets": 1}
    assert result["anomalies"]["inconsistent-offsets"]["examples"][0]["values"] == [2, 9]


def test_unseen_writes(run) -> None:
    h = (H().send(0, 0, 1, offset=0).send(0, 0, 2, offset=1).send(0, 0, 3, offset=2)
         .send(0, 0, 4, offset=3)
         .send(1, 1, 10, no_offset=True)
         .send(1, 3, 30, offset=0)
         .poll(2, 0, [(0, 1), (1, 2)], final=True)  # log truncated below offsets 2 and 3
         .poll(2, 1, [], final=True)                # acked without offset, never read
         .poll(2, 3, [(0, 30)], final=True))
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("unseen", 3)
    examples = result["anomalies"]["unseen"]["examples"]
    assert [(e["key"], e["value"], e["offset"], e["max_read_offset"]) for e in examples] == [
        (0, 3, 2, 1), (0, 4, 3, 1), (1, 10, None, None)]


def test_missing_final_reads_make_the_result_unknown(run) -> None:
    h = (H().send(0, 0, 1).send(0, 1, 2).send(0, 1, 3)
         .poll(1, 0, [(0, 1)], final=True)
         .poll(1, 1, [(0, 2)])                   # not final: offset 1 may just be unread yet
         .poll(1, 1, type="fail", final=True))   # the final read of key 1 failed
    result = run(h)
    assert result["valid"] == "unknown"
    assert counts(result) == only("unseen", 0)
    assert result["anomaly_types"] == []
    assert any("key(s) 1:" in r for r in result["unknown_reasons"])


def test_lost_write_beats_missing_final_reads(run) -> None:
    h = (H().send(0, 0, 1).send(0, 0, 2).send(0, 0, 3)
         .poll(1, 0, [(0, 1), (2, 3)]))          # no final poll at all
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("lost-write", 1)
    assert result["unknown_reasons"] != []


def test_no_ok_sends_is_unknown(run) -> None:
    h = H().send(0, 0, 1, type="fail").send(1, 0, 2, type="info").poll(2, 0, [], final=True)
    result = run(h)
    assert result["valid"] == "unknown"
    assert any("no send completed ok" in r for r in result["unknown_reasons"])


def test_info_fail_and_pending_sends_are_never_lost_or_unseen(run) -> None:
    h = (H().send(0, 0, 1, offset=0)
         .send(0, 0, 2, type="fail")
         .send(1, 0, 3, type="info")              # it did happen: read at offset 2
         .send(2, 0, 4, type="info")              # it did not: never read
         .send(3, 0, 5, type="pending")
         .send(0, 0, 6, offset=1)
         .send(0, 1, 7, type="info")              # key 1: only an unknown send
         .poll(4, 0, [(0, 1), (1, 6), (2, 3)], final=True))
    result = run(h)
    assert result["valid"] is True
    assert counts(result) == only("lost-write", 0)


def test_duplicates(run) -> None:
    h = (H().send(0, 0, 5, offset=0).send(0, 0, 6, offset=2)
         .poll(1, 0, [(0, 5), (1, 5), (3, 6)], final=True))
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("duplicate", 2)
    first, second = result["anomalies"]["duplicate"]["examples"]
    assert first == {"key": 0, "partition": 0, "value": 5, "offsets": [0, 1],
                     "op_indexes": [1, 5]}
    assert (second["value"], second["offsets"]) == (6, [2, 3])


def test_inconsistent_offsets(run) -> None:
    h = (H().send(0, 0, 1, offset=0).send(0, 0, 2, offset=1)
         .send(0, 1, 10, offset=0).send(0, 1, 11, offset=1)
         .poll(1, 0, [(0, 1), (1, 2)]).poll(1, 1, [(0, 10), (1, 11)])
         .poll(2, 0, [(0, 1), (1, 3)], final=True)       # rewritten after truncation
         .poll(2, 1, [(0, 12), (1, 11)], final=True))
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("inconsistent-offsets", 2)
    examples = result["anomalies"]["inconsistent-offsets"]["examples"]
    assert [(e["key"], e["offset"], e["values"]) for e in examples] == [
        (0, 1, [2, 3]), (1, 0, [10, 12])]
    assert examples[0]["op_indexes"] == [3, 9, 13]


def test_nonmonotonic_sends(run) -> None:
    h = (H().send(0, 0, 1, offset=5)
         .send(1, 0, 4, offset=4)                # another process: not compared with process 0
         .send(0, 0, 7, type="fail")
         .send(0, 0, 2, offset=3)                # 5 -> 3: backwards
         .send(0, 1, 10, offset=2)
         .send(0, 0, 3, offset=6)                # 3 -> 6: fine
         .send(0, 1, 11, offset=1)               # 2 -> 1: backwards
         .read_all(2))
    result = run(h)
    assert result["valid"] is False
    assert counts(result) == only("nonmonotonic-send", 2)
    first, second = result["anomalies"]["nonmonotonic-send"]["examples"]
    assert first == {"process": 0, "key": 0, "partition": 0, "values": [1, 2],
                     "offsets": [5, 3], "op_indexes": [1, 7]}
    assert (second["key"], second["offsets"]) == (1, [2, 1])


def test_equal_offsets_are_nonmonotonic(run) -> None:
    h = H().send(0, 0, 1, offset=0).send(0, 0, 2, offset=0).read_all(1)
    result = run(h)
    assert result["anomalies"]["nonmonotonic-send"]["count"] == 1
    assert result["anomalies"]["inconsistent-offsets"]["count"] == 1


def test_a_raising_checker_makes_clean_unknown(run, monkeypatch) -> None:
    def broken(h):
        raise RuntimeError("boom\njava stack trace")
    monkeypatch.setitem(CHECKERS, "duplicate", broken)
    result = run(H().send(0, 0, 1).read_all(1))
    assert result["valid"] == "unknown"
    assert result["unknown_reasons"] == ["checker duplicate raised: RuntimeError: boom"]
    assert result["anomalies"]["duplicate"] == {"count": None, "examples": [],
                                                "error": "RuntimeError: boom"}


def test_a_raising_checker_does_not_hide_anomalies(run, monkeypatch) -> None:
    monkeypatch.setitem(CHECKERS, "nonmonotonic-send", lambda h: 1 / 0)
    h = H().send(0, 0, 1).send(0, 0, 2).poll(1, 0, [(1, 2)], final=True)
    result = run(h)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["lost-write"]
    assert result["anomalies"]["nonmonotonic-send"]["count"] is None


def test_a_shared_checker_raising_marks_all_its_anomalies(run, monkeypatch) -> None:
    monkeypatch.setitem(CHECKERS, "lost-write+unseen", lambda h: 1 / 0)
    result = run(H().send(0, 0, 1).read_all(1))
    assert result["valid"] == "unknown"
    assert result["anomalies"]["lost-write"]["count"] is None
    assert result["anomalies"]["unseen"]["count"] is None
    assert result["unknown_reasons"] == [
        "checker lost-write+unseen raised: ZeroDivisionError: division by zero"]


def test_an_anomaly_no_checker_reports_is_unknown(run, monkeypatch) -> None:
    monkeypatch.setitem(CHECKERS, "duplicate", lambda h: {})
    result = run(H().send(0, 0, 1).read_all(1))
    assert result["valid"] == "unknown"
    assert result["unknown_reasons"] == ["no checker reported duplicate"]
