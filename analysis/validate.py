"""Validation of a history file before Spark sees it.

Spark's JSON reader is permissive: a field of the wrong type silently becomes NULL, and a checker
fed NULLs would report "no anomaly" for data it never understood. So every line is first read by
``history.read_history`` (line format, index sequence), paired by ``history.pair_ops`` (one open op
per process) and its client value checked against ``docs/history-format.md`` here; any problem
raises ``HistoryError`` naming the 1-based line, and Spark only ever parses lines known to be good.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from history import NEMESIS, HistoryError, Op, OpType, pair_ops, read_history

#: Client ``f``s the checkers understand. Other client ``f``s are counted but not analysed.
CLIENT_FS = ("send", "poll")

_INT64 = (-(2**63), 2**63 - 1)


def validate(path: Path) -> int:
    """Check the history at ``path``; return how many ops (lines) it holds.

    A torn final line (a runner killed mid-write) is not counted: ``read_history`` drops it and
    the loader drops it likewise by keeping only indexes below the returned count.

    Raises:
        HistoryError: a malformed line (``"line N: ..."``), an invoke/completion pairing error,
            or a ``send``/``poll`` value not shaped as in ``docs/history-format.md``.
        OSError: the file cannot be read.
    """
    ops = read_history(Path(path))
    for invoke, done in _pairs(ops):
        if invoke.process == NEMESIS or invoke.f not in CLIENT_FS:
            continue
        _check_value(invoke)
        if done is not None:
            _check_value(done)
            _same_target(invoke, done)
    return len(ops)


def _pairs(ops: list[Op]) -> list[tuple[Op, Op | None]]:
    try:
        return pair_ops(ops)
    except HistoryError as exc:
        # pair_ops names op indexes; users open the file, so name the line too (index + 1).
        m = re.match(r"op (\d+): (.*)", str(exc), re.S)
        if not m:
            raise
        raise HistoryError(f"line {int(m[1]) + 1} (op {m[1]}): {m[2]}") from exc


def _line(op: Op) -> str:
    # read_history guarantees index == line number - 1 (no gaps, no blank lines).
    return f"line {op.index + 1}"


def _int(op: Op, value: dict[str, Any], field: str, *, nullable: bool = False) -> None:
    x = value.get(field)
    if x is None and nullable:
        return
    # bool is an int subclass in Python, but Spark would read true as NULL.
    if isinstance(x, bool) or not isinstance(x, int) or not _INT64[0] <= x <= _INT64[1]:
        raise HistoryError(f"{_line(op)}: {op.f} {op.type.value} value field {field!r} must be a "
                           f"64-bit integer, got {x!r}")


def _check_value(op: Op) -> None:
    v = op.value
    if not isinstance(v, dict):
        raise HistoryError(f"{_line(op)}: {op.f} {op.type.value} value must be an object, "
                           f"got {v!r}")
    _int(op, v, "key")
    if op.f == "send":
        _int(op, v, "value")
        if op.type is OpType.OK:
            _int(op, v, "partition")
            # librdkafka reports no offset (null here) when the broker returned none, e.g. acks=0.
            _int(op, v, "offset", nullable=True)
    elif op.type is OpType.OK:  # poll ok
        _int(op, v, "partition")
        _int(op, v, "end_offset", nullable=True)
        if not isinstance(v.get("final", False), bool):
            raise HistoryError(f"{_line(op)}: poll ok value field 'final' must be true or false")
        records = v.get("records")
        if not isinstance(records, list):
            raise HistoryError(f"{_line(op)}: poll ok value field 'records' must be a list")
        bad = _first_bad_record(records)
        if bad is not None:
            raise HistoryError(f"{_line(op)}: poll ok records[{bad}] must be [offset, value] "
                               f"64-bit integers, got {records[bad]!r}")


def _first_bad_record(records: list[Any]) -> int | None:
    # The hot loop of validation (final polls hold whole partitions): exact type() tests
    # (also excluding bool) and chained comparisons are the cheapest correct checks here.
    lo, hi = _INT64
    for i, rec in enumerate(records):
        if type(rec) is not list or len(rec) != 2:
            return i
        o, v = rec
        if type(o) is not int or type(v) is not int or not lo <= o <= hi or not lo <= v <= hi:
            return i
    return None


def _same_target(invoke: Op, done: Op) -> None:
    # The checkers take key and value from the invoke; a completion that disagrees means the
    # client recorded the result of some other op.
    fields = ("key", "value") if invoke.f == "send" else ("key",)
    for field in fields:
        if invoke.value.get(field) != done.value.get(field):
            raise HistoryError(f"{_line(done)}: {done.f} {done.type.value} {field}="
                               f"{done.value.get(field)!r} differs from its invoke (line "
                               f"{invoke.index + 1}) {field}={invoke.value.get(field)!r}")
