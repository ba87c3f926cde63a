"""Loading histories into DataFrames, and rejecting malformed ones with the line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import analysis
from analysis.checkers import lost_writes
from analysis.load import load
from history import HistoryError
from tests.builder import H


def test_load_pairs_invokes_with_completions(spark, tmp_path: Path) -> None:
    path = (H().send(0, 0, 1, offset=0)
            .invoke(1, "send", {"key": 0, "value": 2})
            .nemesis("kill", {"nodes": [1]}, {"killed": [1]})
            .poll(2, 0, [(0, 1)], final=True)
            .complete(1, "info", "send", {"key": 0, "value": 2})
            .send(3, 1, 3, type="pending")
            .write(tmp_path / "history.jsonl"))
    h = load(spark, path)
    try:
        sends = {r["value"]: r.asDict() for r in h.sends.collect()}
        assert sends[1] == {"process": 0, "invoke_index": 0, "index": 1, "type": "ok",
                            "error": None, "key": 0, "value": 1, "partition": 0, "offset": 0}
        assert (sends[2]["invoke_index"], sends[2]["index"], sends[2]["type"]) == (2, 7, "info")
        assert sends[2]["error"] == "_MSG_TIMED_OUT" and sends[2]["offset"] is None
        assert (sends[3]["index"], sends[3]["type"]) == (None, "pending")
        [read] = h.reads.collect()
        assert read.asDict() == {"poll_index": 6, "process": 2, "key": 0, "partition": 0,
                                 "final": True, "offset": 0, "value": 1}
        assert h.n_ops == 9 and h.ops.count() == 9
        assert lost_writes(h.sends, h.reads, h.polls) == {"count": 0, "examples": []}
    finally:
        h.unpersist()


def test_torn_final_line_is_ignored(spark, tmp_path: Path) -> None:
    path = H().send(0, 0, 1).read_all(1).write(tmp_path / "history.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"index":4,"time":99,"process":0,"type":"inv')
    result = analysis.check(path)
    assert result["valid"] is True
    assert result["stats"]["ops"] == 4


def test_path_with_glob_characters_and_spaces(spark, tmp_path: Path) -> None:
    d = tmp_path / "run [1] {a,b} *?"
    d.mkdir()
    path = H().send(0, 0, 1).read_all(1).write(d / "history.jsonl")
    assert analysis.check(path)["valid"] is True


def bad_history(tmp_path: Path, line: int, value: object) -> Path:
    """A good history of 4 ops with the value of 1-based ``line`` replaced."""
    path = H().send(0, 0, 1).poll(1, 0, [(0, 1)], final=True).write(tmp_path / "good.jsonl")
    ops = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    ops[line - 1]["value"] = value
    out = tmp_path / "history.jsonl"
    out.write_text("".join(json.dumps(op) + "\n" for op in ops), encoding="utf-8")
    return out


@pytest.mark.parametrize("line, value, message", [
    (1, [0, 1], r"^line 1: send invoke value must be an object"),
    (1, {"key": 0}, r"^line 1: send invoke value field 'value' must be a 64-bit integer"),
    (1, {"key": "0", "value": 1}, r"^line 1: send invoke value field 'key'"),
    (2, {"key": 0, "value": 1, "offset": 0}, r"^line 2: send ok value field 'partition'"),
    (2, {"key": 0, "value": 1, "partition": 0, "offset": 1.5}, r"^line 2: .* 'offset'"),
    (2, {"key": 0, "value": 2**64, "partition": 0, "offset": 0}, r"^line 2: .* 'value'"),
    (2, {"key": 0, "value": 9, "partition": 0, "offset": 0},
     r"^line 2: send ok value=9 differs from its invoke \(line 1\) value=1"),
    (4, {"key": 0, "partition": 0}, r"^line 4: poll ok value field 'records' must be a list"),
    (4, {"key": 0, "partition": 0, "records": [[0, "1"]]}, r"^line 4: poll ok records\[0\]"),
    (4, {"key": 0, "partition": 0, "records": [[0, True]]}, r"^line 4: poll ok records\[0\]"),
    (4, {"key": 0, "partition": 0, "records": [[0, 1], [1, 2**63]]}, r"^line 4: .*records\[1\]"),
    (4, {"key": 0, "partition": 0, "records": [[0, 1], [1]]}, r"^line 4: .*records\[1\]"),
    (4, {"key": 0, "partition": 0, "records": [], "final": "yes"}, r"^line 4: .* 'final'"),
])
def test_malformed_values_are_rejected_before_spark(tmp_path: Path, line: int, value: object,
                                                    message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        analysis.check(bad_history(tmp_path, line, value))


def test_malformed_line_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index": 0}\n', encoding="utf-8")
    with pytest.raises(HistoryError, match=r"^line 1: missing field"):
        analysis.check(path)


def test_pairing_errors_are_history_errors(tmp_path: Path) -> None:
    path = H().invoke(0, "send", {"key": 0, "value": 1}).invoke(0, "poll", {"key": 0}) \
        .write(tmp_path / "history.jsonl")
    with pytest.raises(HistoryError, match=r"^line 2 \(op 1\): process 0 invoked again while op 0"):
        analysis.check(path)


def test_null_offset_in_ack_is_accepted(spark, tmp_path: Path) -> None:
    path = H().send(0, 0, 1, no_offset=True).poll(1, 0, [(0, 1)], final=True) \
        .write(tmp_path / "history.jsonl")
    assert analysis.check(path)["valid"] is True
