"""The history format: writer/reader round trip, reader errors, pairing errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_chaos.history import NEMESIS, HistoryError, HistoryWriter, Op, OpType, pair_ops, read_history

GOOD = [
    {"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "send",
     "value": {"key": 1, "value": 7}, "error": None},
    {"index": 1, "time": 20, "process": 0, "type": "ok", "f": "send",
     "value": {"key": 1, "value": 7, "partition": 1, "offset": 0}, "error": None},
    {"index": 2, "time": 30, "process": "nemesis", "type": "invoke", "f": "kill",
     "value": {"nodes": [2]}, "error": None},
]


def write_lines(path: Path, lines: list[str], *, final_newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def good_lines() -> list[str]:
    return [json.dumps(op) for op in GOOD]


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        written = [
            w.append(0, OpType.INVOKE, "send", {"key": 1, "value": 7}),
            w.append(NEMESIS, OpType.INVOKE, "partition", {"isolated": [[1], [2, 3]]}),
            w.append(0, OpType.INFO, "send", {"key": 1, "value": 7}, "_MSG_TIMED_OUT"),
            w.append(1, "invoke", "poll", {"key": 1}),
        ]
    ops = read_history(path)
    assert ops == written
    assert [op.index for op in ops] == [0, 1, 2, 3]
    assert all(a.time <= b.time for a, b in zip(ops, ops[1:]))
    assert ops[2].type is OpType.INFO and ops[2].error == "_MSG_TIMED_OUT"
    assert not ops[1].is_client and ops[3].is_client


def test_writer_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("earlier run\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        HistoryWriter(path)
    assert path.read_text(encoding="utf-8") == "earlier run\n"


def test_append_after_close_raises(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "history.jsonl")
    w.close()
    with pytest.raises(ValueError):
        w.append(0, OpType.INVOKE, "poll", {"key": 0})


def test_bad_json_names_line(tmp_path: Path) -> None:
    lines = good_lines()
    lines[1] = '{"index": 1, "time": 20,'
    with pytest.raises(HistoryError, match=r"^line 2: not valid JSON"):
        read_history(write_lines(tmp_path / "h.jsonl", lines))


def test_missing_field_names_line_and_field(tmp_path: Path) -> None:
    op = dict(GOOD[2])
    del op["error"]
    lines = good_lines()[:2] + [json.dumps(op)]
    with pytest.raises(HistoryError, match=r"^line 3: missing field\(s\) error"):
        read_history(write_lines(tmp_path / "h.jsonl", lines))


@pytest.mark.parametrize("field, bad, message", [
    ("type", "done", r"^line 2: field 'type'"),
    ("time", "soon", r"^line 2: field 'time'"),
    ("time", -1, r"^line 2: field 'time'"),
    ("process", -3, r"^line 2: field 'process'"),
    ("process", "client-1", r"^line 2: field 'process'"),
    ("process", True, r"^line 2: field 'process'"),  # bool is not a process id
    ("f", "", r"^line 2: field 'f'"),
])
def test_wrong_type_names_line_and_field(tmp_path: Path, field: str, bad: object,
                                         message: str) -> None:
    ops = [dict(op) for op in GOOD]
    ops[1][field] = bad
    with pytest.raises(HistoryError, match=message):
        read_history(write_lines(tmp_path / "h.jsonl", [json.dumps(op) for op in ops]))


def test_not_an_object_names_line(tmp_path: Path) -> None:
    lines = good_lines() + ["[1, 2]"]
    with pytest.raises(HistoryError, match=r"^line 4: expected a JSON object"):
        read_history(write_lines(tmp_path / "h.jsonl", lines))


def test_index_gap_names_line(tmp_path: Path) -> None:
    ops = [dict(op) for op in GOOD]
    ops[2]["index"] = 5
    with pytest.raises(HistoryError, match=r"^line 3: field 'index' is 5, expected 2"):
        read_history(write_lines(tmp_path / "h.jsonl", [json.dumps(op) for op in ops]))


def test_empty_line_names_line(tmp_path: Path) -> None:
    lines = good_lines()
    lines.insert(1, "")
    with pytest.raises(HistoryError, match=r"^line 2: empty line"):
        read_history(write_lines(tmp_path / "h.jsonl", lines))


def test_torn_final_line_is_dropped(tmp_path: Path) -> None:
    lines = good_lines() + ['{"index": 3, "time": 40, "proc']
    ops = read_history(write_lines(tmp_path / "h.jsonl", lines, final_newline=False))
    assert [op.index for op in ops] == [0, 1, 2]


def test_torn_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    lines = good_lines()
    lines.insert(2, '{"index": 2, "time": 40, "proc')
    with pytest.raises(HistoryError, match=r"^line 3: not valid JSON"):
        read_history(write_lines(tmp_path / "h.jsonl", lines))


def test_complete_final_line_without_newline_is_kept(tmp_path: Path) -> None:
    ops = read_history(write_lines(tmp_path / "h.jsonl", good_lines(), final_newline=False))
    assert len(ops) == 3


def op(index: int, process: int | str, type: str, f: str = "send") -> Op:
    return Op(index, index * 10, process, OpType(type), f, None, None)


def test_pair_ops_pairs_per_process() -> None:
    ops = [op(0, 0, "invoke"), op(1, 1, "invoke", "poll"), op(2, 0, "ok"),
           op(3, NEMESIS, "invoke", "kill"), op(4, 1, "fail", "poll"), op(5, 0, "invoke")]
    pairs = pair_ops(ops)
    assert [(a.index, b.index if b else None) for a, b in pairs] == [
        (0, 2), (1, 4), (3, None), (5, None)]


def test_pair_ops_rejects_double_invoke() -> None:
    with pytest.raises(HistoryError, match=r"^op 2: process 0 invoked again while op 0"):
        pair_ops([op(0, 0, "invoke"), op(1, 1, "invoke"), op(2, 0, "invoke")])


def test_pair_ops_rejects_orphan_completion() -> None:
    with pytest.raises(HistoryError, match=r"^op 1: ok from process 3 with no open invoke"):
        pair_ops([op(0, 0, "invoke"), op(1, 3, "ok")])


def test_pair_ops_rejects_completion_of_another_f() -> None:
    with pytest.raises(HistoryError, match=r"^op 1: completes f='poll'"):
        pair_ops([op(0, 0, "invoke", "send"), op(1, 0, "ok", "poll")])


def test_a_transaction_that_never_began_completes_with_no_micro_op(tmp_path: Path) -> None:
    """``init_transactions`` failing (COORDINATOR_LOAD_IN_PROGRESS after a kill): the client
    completes the op ``fail`` with ``[]``; the invoke's unexecuted ``["poll"]`` would be no
    completion's poll (found by a CI run)."""
    from kafka_chaos.history.validate import validate

    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, header={"config": {}}) as w:
        w.append(0, "invoke", "txn", [["send", 2, 4], ["poll"], ["send", 3, 5]])
        w.append(0, "fail", "txn", [], "COORDINATOR_LOAD_IN_PROGRESS")
    assert validate(path).ops == 2
    bad = tmp_path / "bad.jsonl"
    with HistoryWriter(bad, header={"config": {}}) as w:
        w.append(0, "invoke", "txn", [["send", 2, 4], ["poll"]])
        w.append(0, "fail", "txn", [["send", 2, 4], ["poll"]], "COORDINATOR_LOAD_IN_PROGRESS")
    with pytest.raises(HistoryError, match="line 3: txn fail mop 1: poll .* matches no poll"):
        validate(bad)


def test_a_sends_acknowledgement_time_lies_within_its_op(tmp_path: Path) -> None:
    """``["send", k, [offset, value, ack_ns]]``: the delivery report's time, kept in the
    columnar copy; one outside its op's invoke and completion, or without an offset, is
    refused with its line named."""
    from kafka_chaos.history import columnar
    from kafka_chaos.history.validate import validate

    def write(name: str, result: list) -> Path:
        path = tmp_path / name
        with HistoryWriter(path, header={"config": {}}, clock=iter([5, 9, 20]).__next__) as w:
            w.append(0, "invoke", "send", [["send", 1, 7], ["send", 2, 8]])
            w.append(0, "ok", "send", [["send", 1, result[0]], ["send", 2, result[1]]])
        return path

    good = write("good.jsonl", [[0, 7, 6], [3, 8]])
    assert validate(good).ops == 2
    rows = list(columnar.iter_table_rows(columnar.ensure(good), "sends"))
    assert [(r["offset"], r["ack_ns"]) for r in rows] == [(0, 6), (3, None)]
    with pytest.raises(HistoryError, match=r"^line 3: .*mop 0 ack_ns 4 lies outside its op "
                                           r"\(invoke at 5 ns, completion at 9 ns\)"):
        validate(write("early.jsonl", [[0, 7, 4], [3, 8]]))
    with pytest.raises(HistoryError, match=r"^line 3: .*mop 1 must be \[\"send\", key, "
                                           r"\[offset, value\]\] or"):
        validate(write("no-offset.jsonl", [[0, 7, 6], [None, 8, 6]]))
