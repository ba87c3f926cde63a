"""Loading histories into DataFrames, and rejecting malformed ones (line named) before Spark."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kafka_chaos import analysis
from kafka_chaos.analysis.checkers import cycles
from kafka_chaos.analysis.checkers.versions import key_partitions
from kafka_chaos.analysis.load import FS, TYPES, load_copy
from kafka_chaos.history import columnar
from kafka_chaos.history import HistoryError
from kafka_chaos.history.validate import validate
from tests.builder import H
from tests.queue_builder import Q


def rows(df, *cols):
    """Sorted tuples of ``cols``; the ``type``/``f`` codes of sends and reads as names."""
    names = {"type": TYPES, "f": FS}
    return sorted(tuple(names[c][r[c]] if c in names and isinstance(r[c], int) else r[c]
                        for c in cols) for r in df.collect())


@pytest.mark.spark
def test_load_builds_one_row_per_micro_op_record_range_and_event(spark, tmp_path: Path) -> None:
    q = (Q().subscribe(0, [0, 1])
         .send(1, [(0, 10), (1, 11)], type="info", acked=[True, False])          # ops 2, 3
         .poll(0, {0: [(0, 10)]}, events=[["assigned", [0, 1]]])                 # ops 4, 5
         .txn(2, [("poll", {1: [(0, 11)]}), ("send", 0, 12)], offsets=[1],       # ops 6, 7
              events=[["committed", {"1": 1}]])
         .send(3, [(1, 13)], type="pending")                                     # op 8
         .final(4, 0, [(0, 10), (1, 12)], eof=True))                             # ops 9, 10
    path = q.write(tmp_path / "history.jsonl")
    copy = columnar.current(path)
    assert copy is not None and copy.meta["source"] == "recorder"
    h = load_copy(spark, copy)
    assert rows(h.sends, "op", "pos", "type", "f", "key", "value", "offset") == [
        (2, 0, "info", "send", 0, 10, 0), (2, 1, "info", "send", 1, 11, None),
        (6, 1, "ok", "txn", 0, 12, 1), (8, 0, "pending", "send", 1, 13, None)]
    assert rows(h.reads, "op", "pos", "rec", "final", "key", "offset", "value") == [
        (4, 1, 0, False, 0, 0, 10), (6, 0, 0, False, 1, 0, 11),
        (9, 0, 0, True, 0, 0, 10), (9, 0, 1, True, 0, 1, 12)]
    assert rows(h.ranges, "op", "key", "start", "end", "eof") == [(9, 0, 0, 2, True)]
    assert rows(h.events, "op", "pos", "kind", "key", "offset") == [
        (4, 0, "assigned", 0, None), (4, 0, "assigned", 1, None), (6, 2, "committed", 1, 1)]
    assert rows(h.ops.where("final"), "op") == [(9,)]
    assert h.n_ops == 11 and h.format == 2 and h.config == q.config
    assert h.sends_by_key == {0: 2, 1: 2} and copy.meta["sends_by_key"] == {"0": 2, "1": 2}
    # the dependency graph's nodes: pyarrow's read of the local copy is Spark's query
    local = cycles.node_table(h).sort_by("op")
    assert local.equals(cycles.node_table(dataclasses.replace(h, tables={})).sort_by("op"))
    assert local.select(["op", "ok"]).to_pylist() == [
        {"op": 2, "ok": False}, {"op": 4, "ok": True}, {"op": 6, "ok": True},
        {"op": 8, "ok": False}]
    assert local.column("time").null_count == 1 and local.schema.field("op").type == "int32"


@pytest.mark.spark
def test_key_partitions_from_the_copys_counts_are_those_of_a_scan_of_the_sends(
        spark, tmp_path: Path) -> None:
    sizes = (40, 1, 17, 3, 25, 8, 0, 60, 2, 11, 33)  # sends per key: keys of uneven size
    q = Q()
    value = 0
    for key, n in enumerate(sizes):
        for _ in range(n):
            value += 1
            q.send(1, [(key, value)])
    copy = columnar.current(q.write(tmp_path / "history.jsonl"))
    h = load_copy(spark, copy)
    assert h.sends_by_key == {k: n for k, n in enumerate(sizes) if n}
    scanned = dataclasses.replace(h, sends_by_key=None)
    chosen = [key_partitions(h, cores) for cores in (1, 2, 3, 4, 6)]
    assert chosen == [key_partitions(scanned, cores) for cores in (1, 2, 3, 4, 6)]
    # the counts decide: all sends on one key leave every count a core idle but one, and the
    # same largest partition, so the tie goes to the fewest partitions
    assert key_partitions(dataclasses.replace(h, sends_by_key={7: 1000}), 3) == 3
    assert key_partitions(dataclasses.replace(h, sends_by_key={}), 2) == 2
    # 8 keys of one size on 2 cores: 7 partitions hold them 3, 3, 1, 1 (4 keys a core, as
    # even as can be), 23 one each: as even, and the largest partition smallest
    assert key_partitions(dataclasses.replace(h, sends_by_key=dict.fromkeys(range(8), 100)),
                          2) == 23


@pytest.mark.spark
def test_torn_final_line_and_glob_characters_in_the_path(spark, tmp_path: Path) -> None:
    d = tmp_path / "run [1] {a,b} *?"
    d.mkdir()
    path = Q().send(0, [(0, 1)]).read_all(1).write(d / "history.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"index":4,"time":99,"process":0,"type":"inv')
    result = analysis.check(path)
    assert result["valid"] is True
    assert result["stats"]["ops"] == 4


def with_line(tmp_path: Path, q: Q | H, line: int, edit) -> Path:
    """``q`` written, then its 1-based ``line`` (a JSON object) changed by ``edit(obj)``."""
    good = q.write(tmp_path / "good.jsonl")
    lines = good.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[line - 1])
    edit(obj)
    lines[line - 1] = json.dumps(obj)
    out = tmp_path / "history.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def v2(line: int, value: object, message: str) -> tuple:
    """A case replacing the value of ``line`` of a small good format-2 history."""
    return (Q().send(0, [(0, 1), (1, 2)]).poll(1, {0: [(0, 1)]}).read_all(2),
            line, lambda op: op.__setitem__("value", value), message)


def s2(line: int, value: object, message: str) -> tuple:
    """A case replacing the value of ``line`` of a small good share-group history."""
    return (Q(sub_via="share").send(0, [(0, 1)]).share(1, [(0, 0, 1, 1, "accept")]).read_all(2),
            line, lambda op: op.__setitem__("value", value), message)


@pytest.mark.parametrize("q, line, edit, message", [
    v2(2, [["send", 0, 1.0]], r"^line 2: send invoke mop 0 value must be a 64-bit integer"),
    v2(2, [["poll"]], r"^line 2: send invoke mop 0: a send op cannot hold a 'poll'"),
    v2(2, [], r"^line 2: send invoke value must be a non-empty list"),
    v2(3, [["send", 0, [0, 1]]], r"^line 3: send ok lists 1 of the invoke's 2 sends"),
    v2(3, [["send", 0, [0, 1]], ["send", 1, [1, 3]]],
       r"^line 3: send ok mop 1: send of key 1 value 3 differs from the invoke's send \[1, 2\]"),
    v2(3, [["send", 0, [-1, 1]], ["send", 1, [1, 2]]], r"^line 3: .*mop 0 offset must be"),
    v2(5, [["poll", {"00": [[0, 1]]}]], r"^line 5: poll ok mop 0 poll result: '00' is not a key"),
    v2(5, [["poll", {"0": [[0, "1"]]}]], r"^line 5: poll ok mop 0 records of key 0\[0\]"),
    v2(5, [["poll", {"0": [[0, 2**63]]}]], r"^line 5: poll ok mop 0 records of key 0\[0\]"),
    v2(5, [["poll", {}], ["poll", {}]], r"^line 5: poll ok mop 1: poll .* matches no poll"),
    v2(5, [["poll", {}, {"final": "yes"}]], r"^line 5: poll ok mop 0: third element"),
    v2(5, [["poll", {}, {"range": {"0": [5, 1]}}]], r"^line 5: .*ends before it starts"),
    v2(5, [["rebalanced", [0]]], r"^line 5: poll ok mop 0: unknown micro-op kind 'rebalanced'"),
    (H().send(0, 0, 1).poll(1, 0, [(0, 1)], final=True), 1,
     lambda op: op.__setitem__("value", {"key": "0", "value": 1}),
     r"^line 1: send invoke value field 'key'"),
    (H().send(0, 0, 1).poll(1, 0, [(0, 1)], final=True), 2,
     lambda op: op["value"].__setitem__("value", 9),
     r"^line 2: send ok value=9 differs from its invoke \(op 0\) value=1"),
    (H().send(0, 0, 1).poll(1, 0, [(0, 1)], final=True), 4,
     lambda op: op["value"].__setitem__("records", [[0, True]]),
     r"^line 4: poll ok value field 'records'\[0\]"),
    s2(5, {"group": "g", "records": [[0, 0, 1, 0, "accept"]], "acks": {}},
       r"^line 5: share ok record 0 delivery_count must be a 64-bit integer >= 1, got 0"),
    s2(5, {"group": "g", "records": [[0, 0, 1, 1, "maybe"]], "acks": {}},
       r"^line 5: share ok record 0 must be \[key, offset, value, delivery_count, ack\]"),
    s2(5, {"group": "g", "records": [], "acks": {"0": 1}},
       r"^line 5: share ok acknowledgement result of key 0 must be"),
    s2(4, {"group": 5}, r"^line 4: share invoke value must be an object with a string"),
    s2(5, {"group": "g", "records": [], "acks": {}, "drained": "yes"},
       r"^line 5: share ok value field 'drained' must be true or false"),
    (Q().send(0, [(0, 1)]), 2, lambda op: op.__setitem__("index", 0.0),
     r"^line 2: field 'index' is 0.0, expected 0 \(an integer\)"),
    (Q().send(0, [(0, 1)]), 3, lambda op: op.__setitem__("time", 5.0), r"^line 3: field 'time'"),
    (Q().send(0, [(0, 1)]), 1, lambda op: op.__setitem__("format", 3),
     r"^line 1: history format 3 is not supported"),
])
def test_malformed_values_are_rejected_before_spark(tmp_path: Path, q, line: int, edit,
                                                    message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        analysis.check(with_line(tmp_path, q, line, edit))


def test_exponent_floats_and_bad_bytes_are_rejected_with_the_line(tmp_path: Path) -> None:
    good = Q().send(0, [(0, 1)]).write(tmp_path / "good.jsonl").read_bytes().splitlines()
    bad = tmp_path / "exp.jsonl"
    bad.write_bytes(b"\n".join([good[0], good[1].replace(b'"index":0', b'"index":0e0'),
                                good[2]]) + b"\n")
    with pytest.raises(HistoryError, match=r"^line 2: field 'index'"):
        validate(bad)
    bad.write_bytes(b"\n".join([good[0], good[1][:-1] + b'\xff}', good[2]]) + b"\n")
    with pytest.raises(HistoryError, match=r"^line 2: not valid JSON or not UTF-8"):
        validate(bad)


def test_an_empty_history_is_refused(tmp_path: Path) -> None:
    empty = Q().write(tmp_path / "history.jsonl")  # the header alone
    with pytest.raises(HistoryError, match="holds no ops"):
        analysis.check(empty)
    (tmp_path / "zero.jsonl").write_bytes(b"")
    with pytest.raises(HistoryError, match="holds no ops"):
        analysis.check(tmp_path / "zero.jsonl")


def test_pairing_errors_name_the_line(tmp_path: Path) -> None:
    path = H().invoke(0, "send", {"key": 0, "value": 1}).invoke(0, "poll", {"key": 0}) \
        .write(tmp_path / "history.jsonl")
    with pytest.raises(HistoryError, match=r"^line 2 \(op 1\): process 0 invoked again while op 0"):
        analysis.check(path)
