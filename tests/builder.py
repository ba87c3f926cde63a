"""A tiny builder of hand-made histories for tests.

    path = (H().send(0, key=1, value=10, offset=0)
               .send(1, key=1, value=11, type="info")
               .poll(2, key=1, records=[(0, 10)], final=True)
               .write(tmp_path / "history.jsonl"))

Each ``send``/``poll`` records an invoke and, unless ``type="pending"``, its completion right
after it. ``invoke``/``complete`` add single lines for interleavings. ``write`` goes through
``history.HistoryWriter``, so index and time are assigned exactly as in a real run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from kafka_chaos.history import MONITOR, NEMESIS, HistoryWriter

_DEFAULT_ERROR = {"fail": "NOT_ENOUGH_REPLICAS", "info": "_MSG_TIMED_OUT"}


class Lines:
    """Op lines in order, ``(process, type, f, value, error)``; shared by both builders.

    ``header``: the history's header line (None: format 1, which has none); ``nemesis_type``:
    how nemesis ops complete (``info`` in format 1, ``ok`` in format 2).
    """

    nemesis_type = "info"

    def __init__(self, header: dict | None = None) -> None:
        self.lines: list[tuple[int | str, str, str, Any, str | None]] = []
        self.header = header
        self.pauses: dict[int, float] = {}  # line number -> seconds before it

    def pause(self, seconds: float):
        """Let ``seconds`` pass before the next line. A history with pauses is written on a
        simulated clock: 1 ms per line, plus the pauses."""
        n = len(self.lines)
        self.pauses[n] = self.pauses.get(n, 0.0) + seconds
        return self

    def invoke(self, process: int | str, f: str, value: Any):
        """Add one invoke line."""
        self.lines.append((process, "invoke", f, value, None))
        return self

    def complete(self, process: int | str, type: str, f: str, value: Any,
                 error: str | None = None):
        """Add one completion line (``type`` ok|fail|info); ``error`` defaults per type."""
        if type != "ok" and error is None:
            error = _DEFAULT_ERROR.get(type, "ERR")
        self.lines.append((process, type, f, value, error))
        return self

    def nemesis(self, f: str, value: Any = None, result: Any = None):
        """A nemesis op: invoke with ``value``, completion with ``result``."""
        self.invoke(NEMESIS, f, value)
        self.lines.append((NEMESIS, self.nemesis_type, f, result, None))
        return self

    def monitor(self, state: dict, trigger: str = "period"):
        """A cluster-state sample of the monitor (``nemesis.monitor``)."""
        self.invoke(MONITOR, "cluster-state", {"trigger": trigger})
        return self.complete(MONITOR, "ok", "cluster-state", state)

    def write(self, path: Path) -> Path:
        """Write the history to ``path`` (which must not exist) and return ``path``."""
        now = [0]
        clock = (lambda: now[0]) if self.pauses else None
        with HistoryWriter(Path(path), header=self.header, clock=clock) as w:
            for n, (process, type, f, value, error) in enumerate(self.lines):
                now[0] += 1_000_000 + int(self.pauses.get(n, 0.0) * 1e9)
                w.append(process, type, f, value, error)
        return Path(path)


class H(Lines):
    """An in-memory history; every method but ``write`` returns ``self`` for chaining."""

    def __init__(self) -> None:
        super().__init__()
        self._next_offset: dict[int, int] = {}
        self._acked: dict[int, list[tuple[int, int]]] = {}

    def send(self, process: int, key: int, value: int, *, offset: int | None = None,
             type: str = "ok", partition: int | None = None, no_offset: bool = False,
             error: str | None = None) -> "H":
        """A send of ``value`` to ``key``. For ``ok``: ``offset`` defaults to one past the
        highest offset acked so far on the partition, ``partition`` to ``key``; ``no_offset``
        records an ack without offset (``null``). ``type="pending"`` leaves it uncompleted."""
        self.invoke(process, "send", {"key": key, "value": value})
        if type == "pending":
            return self
        if type != "ok":
            return self.complete(process, type, "send", {"key": key, "value": value}, error)
        partition = key if partition is None else partition
        if offset is None and not no_offset:
            offset = self._next_offset.get(partition, 0)
        if offset is not None:
            self._next_offset[partition] = max(self._next_offset.get(partition, 0), offset + 1)
            self._acked.setdefault(partition, []).append((offset, value))
        return self.complete(process, "ok", "send", {"key": key, "value": value,
                                                     "partition": partition, "offset": offset})

    def poll(self, process: int, key: int, records: Iterable[tuple[int, int]] = (), *,
             final: bool = False, type: str = "ok", end_offset: int | None = None,
             partition: int | None = None, error: str | None = None) -> "H":
        """A poll of ``key`` returning ``records`` (``(offset, value)`` pairs) when ``ok``.
        ``end_offset`` defaults to one past the last record (0 when empty)."""
        self.invoke(process, "poll", {"key": key})
        if type == "pending":
            return self
        if type != "ok":
            return self.complete(process, type, "poll", {"key": key}, error)
        recs = [[o, v] for o, v in records]
        if end_offset is None:
            end_offset = max((o for o, _ in recs), default=-1) + 1
        return self.complete(process, "ok", "poll", {
            "key": key, "partition": key if partition is None else partition,
            "records": recs, "final": final, "end_offset": end_offset})

    def read_all(self, process: int, *, final: bool = True) -> "H":
        """One ok poll per partition returning every send acked (with an offset) so far."""
        for partition in sorted(self._acked):
            self.poll(process, partition, sorted(self._acked[partition]), final=final)
        return self
