"""Streaming JSON Lines writer and validating reader for histories.

Written line by line while the run goes, because "if a test crashes during the run we lose
everything" (jepsen-io/history): each op is one ``write`` of one complete line followed by a flush,
so every complete line survives a SIGKILL of the runner.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from history.op import NEMESIS, Op, OpType

_FIELDS = ("index", "time", "process", "type", "f", "value", "error")


class HistoryError(ValueError):
    """A history file or op sequence is malformed; the message names the line or op index."""


class HistoryWriter:
    """Appends ops to ``path`` (JSON Lines), assigning ``index`` and ``time`` itself.

    Thread-safe: client workers and the nemesis share one writer. Refuses to overwrite an
    existing file (``FileExistsError``) so that no earlier history is lost.

    Args:
        path: the ``history.jsonl`` file to create.
        start_ns: ``time.monotonic_ns()`` at the start of the run; op times are relative to it.
    """

    def __init__(self, path: Path, start_ns: int | None = None) -> None:
        self.path = Path(path)
        self._file: IO[str] = open(self.path, "x", encoding="utf-8")
        self._lock = threading.Lock()
        self._next_index = 0
        self._start_ns = time.monotonic_ns() if start_ns is None else start_ns

    def append(self, process: int | str, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> Op:
        """Record one op now and return it. Raises ``ValueError`` after ``close()``."""
        with self._lock:
            op = Op(self._next_index, time.monotonic_ns() - self._start_ns, process,
                    OpType(type), f, value, error)
            self._file.write(json.dumps(op.to_json(), separators=(",", ":")) + "\n")
            self._file.flush()
            self._next_index += 1
            return op

    def close(self) -> None:
        """Flush and close the file; later appends raise ``ValueError``."""
        with self._lock:
            self._file.close()

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse(line: str, lineno: int, expected_index: int) -> Op:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise HistoryError(f"line {lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise HistoryError(f"line {lineno}: expected a JSON object")
    missing = [k for k in _FIELDS if k not in raw]
    if missing:
        raise HistoryError(f"line {lineno}: missing field(s) {', '.join(missing)}")
    if raw["index"] != expected_index:
        raise HistoryError(f"line {lineno}: field 'index' is {raw['index']!r}, expected {expected_index}")
    if type(raw["time"]) is not int or raw["time"] < 0:  # bool is an int subclass: refuse it
        raise HistoryError(f"line {lineno}: field 'time' must be a non-negative integer (ns)")
    proc = raw["process"]
    if not (proc == NEMESIS or (type(proc) is int and proc >= 0)):
        raise HistoryError(f"line {lineno}: field 'process' must be an int >= 0 or 'nemesis'")
    try:
        typ = OpType(raw["type"])
    except ValueError as exc:
        raise HistoryError(f"line {lineno}: field 'type' is {raw['type']!r}, "
                           "expected invoke|ok|fail|info") from exc
    if not isinstance(raw["f"], str) or not raw["f"]:
        raise HistoryError(f"line {lineno}: field 'f' must be a non-empty string")
    return Op(raw["index"], raw["time"], proc, typ, raw["f"], raw["value"], raw["error"])


def read_history(path: Path) -> list[Op]:
    """Read and validate a ``history.jsonl``.

    A last line without its newline (the runner was killed mid-write) is dropped; any other bad
    line raises ``HistoryError`` naming its 1-based line number and field.
    """
    return list(iter_history(path))


def iter_history(path: Path) -> Iterator[Op]:
    """Like ``read_history`` but lazily, one op at a time."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    expected = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.endswith("\n") and lineno == len(lines):
            try:
                json.loads(line)
            except json.JSONDecodeError:
                return  # torn final write
        if not line.strip():
            raise HistoryError(f"line {lineno}: empty line")
        yield _parse(line, lineno, expected)
        expected += 1


def pair_ops(ops: Iterable[Op]) -> list[tuple[Op, Op | None]]:
    """Pair each invoke with its completion, per process (Jepsen ``pair-index``).

    Returns ``[(invoke, completion_or_None), ...]`` in invoke order; ``None`` means the run ended
    before the op completed, which readers must treat like ``info``. Raises ``HistoryError`` when a
    process invokes twice without completing, or completes an op it never invoked.
    """
    open_by_proc: dict[int | str, int] = {}
    pairs: list[list[Any]] = []
    for op in ops:
        if op.type is OpType.INVOKE:
            if op.process in open_by_proc:
                prev = pairs[open_by_proc[op.process]][0]
                raise HistoryError(f"op {op.index}: process {op.process!r} invoked again while op "
                                   f"{prev.index} is still open")
            open_by_proc[op.process] = len(pairs)
            pairs.append([op, None])
        else:
            slot = open_by_proc.pop(op.process, None)
            if slot is None:
                raise HistoryError(f"op {op.index}: {op.type.value} from process {op.process!r} "
                                   "with no open invoke")
            inv = pairs[slot][0]
            if inv.f != op.f:
                raise HistoryError(f"op {op.index}: completes f={op.f!r} but invoke {inv.index} "
                                   f"was f={inv.f!r}")
            pairs[slot][1] = op
    return [(a, b) for a, b in pairs]
