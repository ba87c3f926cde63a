"""The streaming JSON Lines writer of histories (``docs/history-format.md``).

Written line by line while the run goes, because "if a test crashes during the run we lose
everything" (jepsen-io/history): each op is one ``write`` of one complete line followed by a flush,
so every complete line survives a SIGKILL of the runner.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import IO, Any, Callable

import orjson

from kafka_chaos.history.op import Op, OpType
from kafka_chaos.history.store import FORMAT


class HistoryWriter:
    """Appends ops to ``path`` (JSON Lines), assigning ``index`` and ``time`` itself.

    Thread-safe: client workers and the nemesis share one writer. Refuses to overwrite an
    existing file (``FileExistsError``) so that no earlier history is lost.

    Args:
        path: the ``history.jsonl`` file to create.
        start_ns: ``time.monotonic_ns()`` at the start of the run; op times are relative to it.
        header: written as line 1 with ``"format": 2`` added (``config``, ``keys``, ...); None
            writes a header-less format-1 file (only tests of old histories need that).
        columnar: also write the columnar copy (``history.columnar``) as ops come:
            ``"background"`` on a thread of its own (the recorder's callers do not wait for
            it), ``"inline"`` in the appending thread, or None for none. The copy is skipped
            when its directory already exists; a copy that could not be completed (an op that
            does not validate) is dropped at ``close`` and its error kept in
            ``columnar_error``: the analysis then converts the file, naming the bad line.
        clock: ns since the start of the run for each op's ``time`` (default: the monotonic
            clock minus ``start_ns``); synthetic histories pass simulated time.
        flush_each: flush after every line (the crash-safe default); synthetic histories
            written in one go need not.
    """

    def __init__(self, path: Path, start_ns: int | None = None,
                 header: dict[str, Any] | None = None,
                 columnar: str | None = "background",
                 clock: Callable[[], int] | None = None, flush_each: bool = True) -> None:
        from kafka_chaos.history import columnar as col

        self.path = Path(path)
        self._file: IO[bytes] = open(self.path, "xb")
        self._lock = threading.Lock()
        self._next_index = 0
        start = time.monotonic_ns() if start_ns is None else start_ns
        self._clock = clock or (lambda: time.monotonic_ns() - start)
        #: ``time.monotonic_ns()`` minus ``now_ns()``, exactly: what another OS process adds to
        #: its own monotonic clock to write this history's times (None with ``clock``)
        self.start_ns: int | None = None if clock else start
        self._flush_each = flush_each
        self.columnar_error: BaseException | None = None
        self._columnar = None
        if header is not None:
            header = {"format": FORMAT, **header}
            self._file.write(orjson.dumps(header) + b"\n")
            self._file.flush()
        if columnar is not None and not col.copy_dir(self.path).exists():
            self._columnar = col.ColumnarWriter(col.copy_dir(self.path), header,
                                                background=columnar == "background")

    def now_ns(self) -> int:
        """The time (ns since the start of the run) an op appended now would get: the clock
        of a send's acknowledgement (``["send", k, [offset, value, ack_ns]]``)."""
        return self._clock()

    def append(self, process: int | str, type: OpType | str, f: str, value: Any = None,
               error: str | None = None) -> Op:
        """Record one op now and return it. Raises ``ValueError`` after ``close()``."""
        type = OpType(type)
        # serialise outside the lock (an op may hold thousands of micro-ops); only the index and
        # time, which order the file, are taken under it
        tail = orjson.dumps({"process": process, "type": type.value, "f": f, "value": value,
                             "error": error})
        with self._lock:
            index, now = self._next_index, self._clock()
            self._file.write(b'{"index":%d,"time":%d,%s\n' % (index, now, tail[1:]))
            if self._flush_each:
                self._file.flush()
            self._next_index += 1
            op = Op(index, now, process, type, f, value, error)
            if self._columnar is not None:
                self._add_columnar(op)
        return op

    def _add_columnar(self, op: Op) -> None:
        try:
            self._columnar.add(op)
        except Exception as exc:  # inline mode: the JSONL goes on, the copy is dropped
            self.columnar_error = exc
            self._columnar.abandon()
            self._columnar = None

    def close(self) -> None:
        """Flush and close the file, then finish the columnar copy; later appends raise
        ``ValueError``. Never raises for the copy (see ``columnar_error``)."""
        with self._lock:
            if self._file.closed:
                return
            self._file.close()
            writer, self._columnar = self._columnar, None
        if writer is not None:
            try:
                writer.close(self.path)
            except Exception as exc:
                self.columnar_error = exc

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
