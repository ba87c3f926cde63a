"""Streaming reader of histories (``docs/history-format.md``), and the pairing of invokes
with completions; the writer is ``history.writer``. Reading streams: memory stays flat whatever
the file's size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from kafka_chaos.errors import HistoryError
from kafka_chaos.history.op import SYSTEM_PROCESSES, Op, OpType

#: The format this version writes (line 1 of the file says so); format 1 has no header.
FORMAT = 2
_FIELDS = ("index", "time", "process", "type", "f", "value", "error")


def _is_int(x: object) -> bool:
    # exact ints only: bool is an int subclass, and Spark reads 3.0 as NULL (a dropped line)
    return type(x) is int


def _parse(raw: Any, lineno: int, expected_index: int) -> Op:
    if not isinstance(raw, dict):
        raise HistoryError(f"line {lineno}: expected a JSON object")
    missing = [k for k in _FIELDS if k not in raw]
    if missing:
        raise HistoryError(f"line {lineno}: missing field(s) {', '.join(missing)}")
    if not _is_int(raw["index"]) or raw["index"] != expected_index:
        raise HistoryError(f"line {lineno}: field 'index' is {raw['index']!r}, expected "
                           f"{expected_index} (an integer)")
    if not _is_int(raw["time"]) or raw["time"] < 0:
        raise HistoryError(f"line {lineno}: field 'time' must be a non-negative integer (ns)")
    proc = raw["process"]
    if not (proc in SYSTEM_PROCESSES or (_is_int(proc) and 0 <= proc < 2**63)):
        raise HistoryError(f"line {lineno}: field 'process' must be an int >= 0, 'nemesis' "
                           "or 'monitor'")
    try:
        typ = OpType(raw["type"])
    except ValueError as exc:
        raise HistoryError(f"line {lineno}: field 'type' is {raw['type']!r}, "
                           "expected invoke|ok|fail|info") from exc
    if not isinstance(raw["f"], str) or not raw["f"]:
        raise HistoryError(f"line {lineno}: field 'f' must be a non-empty string")
    if raw["error"] is not None and not isinstance(raw["error"], str):
        raise HistoryError(f"line {lineno}: field 'error' must be a string or null")
    return Op(raw["index"], raw["time"], proc, typ, raw["f"], raw["value"], raw["error"])


def _lines(path: Path) -> Iterator[tuple[int, Any, int]]:
    """``(line number, parsed JSON, byte offset after the line)`` per line; a torn last line
    (no newline, bad JSON) ends it."""
    end = 0
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            end += len(line)
            torn = not line.endswith(b"\n")
            if not line.strip():
                if torn:
                    return
                raise HistoryError(f"line {lineno}: empty line")
            try:
                yield lineno, orjson.loads(line), end
            except orjson.JSONDecodeError as exc:
                if torn:
                    return  # the runner was killed mid-write
                raise HistoryError(f"line {lineno}: not valid JSON or not UTF-8 ({exc})") from exc


def _header(raw: Any, lineno: int) -> dict | None:
    if not (isinstance(raw, dict) and "format" in raw and "index" not in raw):
        return None
    if raw["format"] != FORMAT or not _is_int(raw["format"]):
        raise HistoryError(f"line {lineno}: history format {raw['format']!r} is not "
                           f"supported (this version reads formats 1 and {FORMAT})")
    return raw


def read_header(path: Path) -> dict[str, Any] | None:
    """The format-2 header of the history at ``path``, or None for a format-1 (or empty) file.

    Raises ``HistoryError`` for a header of an unknown format (the line is named).
    """
    for lineno, raw, _ in _lines(Path(path)):
        return _header(raw, lineno)
    return None


def iter_history(path: Path) -> Iterator[tuple[int, Op]]:
    """``(line number, op)`` for every op of the history at ``path``, streamed.

    Skips the header; drops a torn last line; any other bad line raises ``HistoryError`` naming
    its 1-based line number and field.
    """
    for lineno, op, _ in scan_history(path):
        yield lineno, op


def scan_history(path: Path) -> Iterator[tuple[int, Op, int]]:
    """``iter_history`` with the byte offset just past each op's line: what a reader of a
    growing file has consumed."""
    expected = 0
    for lineno, raw, end in _lines(Path(path)):
        if lineno == 1 and _header(raw, lineno) is not None:
            continue
        yield lineno, _parse(raw, lineno, expected), end
        expected += 1


def read_history(path: Path) -> list[Op]:
    """Every op of the history at ``path`` (see ``iter_history``), as a list."""
    return [op for _, op in iter_history(path)]


def pair_ops(ops: Iterable[Op]) -> list[tuple[Op, Op | None]]:
    """Pair each invoke with its completion, per process (Jepsen ``pair-index``).

    Returns ``[(invoke, completion_or_None), ...]`` in invoke order; ``None`` means the run ended
    before the op completed, which readers must treat like ``info``. Raises ``HistoryError`` when a
    process invokes twice without completing, or completes an op it never invoked.
    """
    pairer = Pairer()
    pairs: list[list[Any]] = []
    slots: dict[int, int] = {}
    for op in ops:
        inv = pairer.add(op)
        if inv is None:
            slots[op.index] = len(pairs)
            pairs.append([op, None])
        else:
            pairs[slots.pop(inv.index)][1] = op
    return [(a, b) for a, b in pairs]


class Pairer:
    """Streaming invoke/completion pairing: memory grows with open ops, not with the history."""

    def __init__(self) -> None:
        self.open: dict[int | str, Op] = {}

    def add(self, op: Op) -> Op | None:
        """Feed the next op; returns the invoke it completes, or None for an invoke.

        Raises ``HistoryError`` ("op N: ...") for a second invoke while one is open, a
        completion without an invoke, or a completion of another ``f``.
        """
        if op.type is OpType.INVOKE:
            prev = self.open.get(op.process)
            if prev is not None:
                raise HistoryError(f"op {op.index}: process {op.process!r} invoked again while op "
                                   f"{prev.index} is still open")
            self.open[op.process] = op
            return None
        inv = self.open.pop(op.process, None)
        if inv is None:
            raise HistoryError(f"op {op.index}: {op.type.value} from process {op.process!r} "
                               "with no open invoke")
        if inv.f != op.f:
            raise HistoryError(f"op {op.index}: completes f={op.f!r} but invoke {inv.index} "
                               f"was f={inv.f!r}")
        return inv
