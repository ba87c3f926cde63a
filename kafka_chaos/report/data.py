"""What the HTML report shows, read from ``history.jsonl`` in one streaming pass.

``extract(history, anomalies)`` reads the history line by line (``history.iter_history``: every
line checked, errors name it) and keeps only compact data: per client op a few numbers in
``array`` columns (about 40 bytes an op, so a million-op history needs ~40 MB), the nemesis's
fault windows and the cluster-state monitor's changes (``kafka_chaos.report.cluster``), and
the offsets around the verdict's anomaly examples. Time series and availability
figures are computed from these columns afterwards (``kafka_chaos.report.stats``). No Spark:
the report must be fast.

Times are seconds since the start of the run (the history's ``time`` is ns).
"""

from __future__ import annotations

import dataclasses
import heapq
from array import array
from pathlib import Path
from typing import Any

from kafka_chaos.history import MONITOR, NEMESIS, HistoryError, Pairer, iter_history, read_header
from kafka_chaos.report.cluster import (ClusterEvent, FaultWindow, Monitor, NemesisOp,
                                        fault_windows)

#: Outcome codes of the ``outcome`` column, in the order of severity.
OK, FAIL, INFO = 0, 1, 2
OUTCOMES = ("ok", "fail", "info")
#: The ``f`` a final read is reported under (it is a ``poll`` in the history).
FINAL_READ = "final-read"
#: Offsets shown on each side of an anomaly example's offset.
OFFSET_SPAN = 6
#: Anomalies whose examples get an offset diagram.
OFFSET_ANOMALIES = ("lost-write", "unseen", "inconsistent-offsets")
_NS = 1e9


@dataclasses.dataclass
class ClientOps:
    """One entry per client op, in completion order (pending ops last). Columns:
    ``start_s``/``end_s`` (invoke and completion times; ``end_s`` is NaN for an op never
    completed, which counts as ``info``), ``lane`` (the timeline row: a worker, see
    ``extract``), ``outcome`` (``OK``/``FAIL``/``INFO``), ``f`` (index into ``fs``),
    ``sends`` (sends the op attempted), ``acked`` (sends acknowledged with an offset),
    ``read`` (records its polls returned) and ``index`` (the invoke's op index)."""

    start_s: array = dataclasses.field(default_factory=lambda: array("d"))
    end_s: array = dataclasses.field(default_factory=lambda: array("d"))
    lane: array = dataclasses.field(default_factory=lambda: array("i"))
    outcome: array = dataclasses.field(default_factory=lambda: array("b"))
    f: array = dataclasses.field(default_factory=lambda: array("b"))
    sends: array = dataclasses.field(default_factory=lambda: array("i"))
    acked: array = dataclasses.field(default_factory=lambda: array("i"))
    read: array = dataclasses.field(default_factory=lambda: array("i"))
    index: array = dataclasses.field(default_factory=lambda: array("q"))
    fs: list[str] = dataclasses.field(default_factory=list)
    _codes: dict[str, int] = dataclasses.field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.start_s)

    def add(self, start_s: float, end_s: float, lane: int, outcome: int, f: str, sends: int,
            acked: int, index: int, read: int = 0) -> None:
        """Append one op."""
        code = self._codes.get(f)
        if code is None:
            code = self._codes[f] = len(self.fs)
            self.fs.append(f)
        self.start_s.append(start_s)
        self.end_s.append(end_s)
        self.lane.append(lane)
        self.outcome.append(outcome)
        self.f.append(code)
        self.sends.append(sends)
        self.acked.append(acked)
        self.read.append(read)
        self.index.append(index)


@dataclasses.dataclass
class OffsetView:
    """A key's log between offsets ``lo`` and ``hi`` (exclusive): what acknowledged sends
    said was there (``acked``: ``(offset, value, op index)``), what non-final polls returned
    (``polled``) and what the final reads returned (``final``), as ``offset -> {values}``.
    ``final_range``: the offsets the final reads covered, ``(start, end)``, or None."""

    key: int
    lo: int
    hi: int
    acked: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    polled: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    final: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    final_range: tuple[int, int] | None = None


@dataclasses.dataclass
class ReportData:
    """Everything ``extract`` kept. ``lanes``: per timeline row, the process ids that ran in
    it; ``final_lane``: the row of the final reads (after the workers'; None without any);
    ``isr_full``: ``(time_s, every partition led and with its whole ISR)`` at each
    change; ``workload_s``: ``(first client invoke, last completion before the final reads)``;
    ``end_s``: the history's last time; ``lines``: op lines read."""

    header: dict[str, Any] | None
    ops: ClientOps
    nemesis: list[NemesisOp]
    windows: list[FaultWindow]
    events: list[ClusterEvent]
    events_dropped: int
    isr_full: list[tuple[float, bool]]
    lanes: list[list[int]]
    views: list[OffsetView]
    workload_s: tuple[float, float]
    end_s: float
    lines: int
    monitor_samples: int = 0
    final_lane: int | None = None

    @property
    def nodes(self) -> dict[str, str]:
        """Node id (as text) -> name, from the header (empty for format 1)."""
        return {k: v.get("name", k) for k, v in ((self.header or {}).get("nodes") or {}).items()}


def example_windows(anomalies: dict[str, Any] | None) -> list[tuple[str, int, int, int, list]]:
    """The offset diagrams the report draws: ``(anomaly, key, lo, hi, examples)`` for the
    examples of ``OFFSET_ANOMALIES`` in ``anomalies`` (``RunVerdict.anomalies``), grouped per
    key, the examples' offsets (``final_end`` when the acknowledgement had no offset) widened
    by ``OFFSET_SPAN`` each side; examples closer than twice that share one diagram."""
    out = []
    for name in OFFSET_ANOMALIES:
        found = (anomalies or {}).get(name) or {}
        at: dict[int, list[tuple[int, dict]]] = {}
        for ex in found.get("examples") or []:
            offset = ex.get("offset") if ex.get("offset") is not None else ex.get("final_end")
            if isinstance(ex.get("key"), int) and isinstance(offset, int):
                at.setdefault(ex["key"], []).append((offset, ex))
        for key, items in at.items():
            items.sort(key=lambda item: item[0])
            group = [items[0]]
            for item in items[1:] + [None]:
                if item is not None and item[0] - group[-1][0] <= 2 * OFFSET_SPAN:
                    group.append(item)
                    continue
                out.append((name, key, max(0, group[0][0] - OFFSET_SPAN),
                            group[-1][0] + OFFSET_SPAN + 1, [ex for _, ex in group]))
                if item is not None:
                    group = [item]
    return out


def offset_windows(anomalies: dict[str, Any] | None) -> list[tuple[int, int, int]]:
    """The distinct ``(key, lo, hi)`` of ``example_windows``, in order."""
    return list(dict.fromkeys((key, lo, hi) for _, key, lo, hi, _ in
                              example_windows(anomalies)))


def extract(history: Path, anomalies: dict[str, Any] | None = None) -> ReportData:
    """Read ``history`` (format 1 or 2) once and keep what the report shows.

    Client ops get a timeline row (lane) when their process first invokes: the lowest row
    freed by a retired process (one whose op ended ``info`` or who crashed), else a new one;
    so a row is one worker, as Jepsen's timeline has one row per thread. The final reads,
    which no worker runs, share one row of their own after the workers'.

    ``anomalies`` (``RunVerdict.anomalies``) names the offsets to keep for the examples'
    diagrams (``example_windows``).

    Raises ``HistoryError`` naming the line for a malformed line or pairing.
    """
    extractor = _Extractor(offset_windows(anomalies))
    return extractor.run(Path(history))


class _Extractor:
    def __init__(self, windows: list[tuple[int, int, int]]) -> None:
        self.ops = ClientOps()
        self.views = [OffsetView(k, lo, hi) for k, lo, hi in windows]
        self.by_key: dict[int, list[OffsetView]] = {}
        for view in self.views:
            self.by_key.setdefault(view.key, []).append(view)
        self.lane_of: dict[int, int] = {}
        self.free: list[int] = []
        self.lanes: list[list[int]] = []
        self.final_lane: int | None = None
        self.nemesis: list[NemesisOp] = []
        self.monitor = Monitor()
        self.first_s: float | None = None
        self.last_s = 0.0
        self.end_s = 0.0

    def run(self, path: Path) -> ReportData:
        header = read_header(path)
        fmt1 = header is None
        pairer = Pairer()
        lines = 0
        for lineno, op in iter_history(path):
            lines += 1
            self.end_s = op.time / _NS
            try:
                inv = pairer.add(op)
            except HistoryError as exc:
                raise HistoryError(f"line {lineno}: {exc}") from exc
            try:
                self._op(op, inv, fmt1)
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
                raise HistoryError(f"line {lineno}: a {op.f} value not shaped as in "
                                   f"docs/history-format.md ({type(exc).__name__}: {exc})") from exc
        for inv in sorted(pairer.open.values(), key=lambda o: o.index):  # never completed
            if inv.process == NEMESIS:
                self.nemesis.append(NemesisOp(inv.time / _NS, None, inv.f, "info", inv.value,
                                              None, "never completed"))
            elif inv.process != MONITOR:
                self.ops.add(inv.time / _NS, float("nan"), self.lane_of[inv.process], INFO,
                             inv.f, 0, 0, inv.index)
        first = self.first_s if self.first_s is not None else 0.0
        self._drop_empty_lanes()
        return ReportData(
            header=header, ops=self.ops, nemesis=self.nemesis,
            windows=fault_windows(self.nemesis, self.end_s), events=self.monitor.events,
            events_dropped=self.monitor.dropped, isr_full=self.monitor.isr_full,
            lanes=self.lanes, views=self.views, workload_s=(first, max(first, self.last_s)),
            end_s=self.end_s, lines=lines, monitor_samples=self.monitor.samples,
            final_lane=self.final_lane)

    def _op(self, op, inv, fmt1: bool) -> None:
        """Keep what the report needs of one op (``inv``: the invoke it completes, or None)."""
        if op.process == NEMESIS:
            if inv is not None:
                self.nemesis.append(NemesisOp(inv.time / _NS, op.time / _NS, op.f,
                                              op.type.value, inv.value, op.value, op.error))
        elif op.process == MONITOR:
            if inv is not None and op.type.value == "ok" and isinstance(op.value, dict):
                self.monitor.sample(op.time / _NS, op.value)
        elif inv is None:
            self._lane(op.process)
        else:
            self._client(inv, op, fmt1)

    def _lane(self, process: int) -> int:
        lane = self.lane_of.get(process)
        if lane is None:
            lane = heapq.heappop(self.free) if self.free else len(self.lanes)
            if lane == len(self.lanes):
                self.lanes.append([])
            self.lanes[lane].append(process)
            self.lane_of[process] = lane
        return lane

    def _to_final_lane(self, process: int) -> int:
        """Move ``process`` (a final reader, known once its first read completed) from the
        row its invoke took to the final reads' row."""
        if self.final_lane is None:
            self.final_lane = len(self.lanes)
            self.lanes.append([])
        lane = self.lane_of.get(process)
        if lane != self.final_lane:
            if lane is not None:
                self.lanes[lane].remove(process)
                heapq.heappush(self.free, lane)
            self.lane_of[process] = self.final_lane
            self.lanes[self.final_lane].append(process)
        return self.final_lane

    def _drop_empty_lanes(self) -> None:
        """Rows left without a process (a final reader's invoke took one) go; ops and the
        final row are renumbered."""
        keep = [i for i, procs in enumerate(self.lanes) if procs]
        if len(keep) == len(self.lanes):
            return
        new = {old: n for n, old in enumerate(keep)}
        self.ops.lane = array("i", (new[lane] for lane in self.ops.lane))
        self.lanes = [self.lanes[i] for i in keep]
        self.lane_of = {p: new[lane] for p, lane in self.lane_of.items() if lane in new}
        if self.final_lane is not None:
            self.final_lane = new.get(self.final_lane)

    def _client(self, inv, op, fmt1: bool) -> None:
        mops = _v1_mops(op.f, op.value) if fmt1 else op.value
        outcome = {"ok": OK, "fail": FAIL}.get(op.type.value, INFO)
        sends = acked = read = 0
        final = False
        if isinstance(mops, list):
            for mop in mops:
                if not (isinstance(mop, list) and mop):
                    continue
                if mop[0] == "send" and len(mop) == 3:
                    sends += 1
                    offset, value = mop[2][:2] if isinstance(mop[2], list) else (None, None)
                    # a txn's offsets are acknowledged by its commit only
                    if offset is not None and (op.f != "txn" or outcome == OK):
                        acked += 1
                        self._acked(mop[1], offset, value, inv.index)
                elif mop[0] == "poll" and len(mop) >= 2 and isinstance(mop[1], dict):
                    meta = mop[2] if len(mop) > 2 and isinstance(mop[2], dict) else {}
                    final = final or bool(meta.get("final"))
                    read += sum(len(r) for r in mop[1].values() if isinstance(r, list))
                    if self.by_key:
                        self._read(mop[1], meta)
        lane = self._to_final_lane(op.process) if final else self.lane_of[op.process]
        start, end = inv.time / _NS, op.time / _NS
        f = FINAL_READ if final else op.f
        self.ops.add(start, end, lane, outcome, f, sends, acked, inv.index, read)
        if not final:
            self.first_s = start if self.first_s is None else min(self.first_s, start)
            self.last_s = max(self.last_s, end)
        if (outcome == INFO or op.f == "crash") and lane != self.final_lane:
            heapq.heappush(self.free, lane)  # the process is retired: its row is free

    def _acked(self, key: Any, offset: int, value: Any, index: int) -> None:
        for view in self.by_key.get(key, ()):
            if view.lo <= offset < view.hi:
                view.acked.append((offset, value, index))

    def _read(self, read: dict, meta: dict) -> None:
        final = bool(meta.get("final"))
        for key_text, records in read.items():
            views = self.by_key.get(int(key_text)) if key_text.isdigit() else None
            if not views:
                continue
            for view in views:
                into = view.final if final else view.polled
                for offset, value in records:
                    if view.lo <= offset < view.hi:
                        into.setdefault(offset, set()).add(value)
        if final:
            for key_text, (start, end) in (meta.get("range") or {}).items():
                for view in self.by_key.get(int(key_text), ()):
                    lo, hi = view.final_range or (start, end)
                    view.final_range = (min(lo, start), max(hi, end))


def _v1_mops(f: str, value: Any) -> list | None:
    """A format-1 send or poll value as format-2 micro-ops (as ``analysis.load`` reads them)."""
    if not isinstance(value, dict) or "key" not in value:
        return None
    key = value["key"]
    if f == "send":
        return [["send", key, [value.get("offset"), value.get("value")]]]
    if f == "poll":
        meta = ({"final": True, "range": {str(key): [0, value.get("end_offset") or 0]}}
                if value.get("final") else {})
        return [["poll", {str(key): value.get("records") or []}, meta]]
    return None
