"""Time series and availability figures of a run, from ``report.data.ReportData``.

Only workload ops count here: client ops other than the final reads. Times are seconds since
the start of the run; rates per second; latencies in milliseconds.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from kafka_chaos.report.cluster import FaultWindow
from kafka_chaos.report.data import FINAL_READ, OK, OUTCOMES, ReportData

#: An unavailability window: no send acknowledged for at least this long (s).
UNAVAILABLE_S = 1.0
#: Time series get at most this many bins (1 s each up to that, wider beyond).
MAX_BINS = 3600


def bin_width_s(span_s: float, max_bins: int = MAX_BINS) -> float:
    """1 s, or the smallest whole number of seconds that keeps ``span_s`` within
    ``max_bins`` bins."""
    return float(max(1, math.ceil(span_s / max_bins)))


def _workload(data: ReportData) -> list[int]:
    """Row numbers of the workload ops (client ops other than the final reads)."""
    final = data.ops.fs.index(FINAL_READ) if FINAL_READ in data.ops.fs else -1
    return [i for i, f in enumerate(data.ops.f) if f != final]


def throughput(data: ReportData, bin_s: float) -> dict[str, list[float]]:
    """Per bin of ``bin_s`` seconds from 0: ``t`` (bin start, s), completions per second by
    outcome (``ok``, ``fail``, ``info``; by completion time, ops never completed left out),
    ``sends`` (sends attempted, by invoke) and ``acked`` (sends acknowledged, by completion)
    per second."""
    n = int(data.workload_s[1] // bin_s) + 1
    out: dict[str, list[float]] = {k: [0.0] * n for k in (*OUTCOMES, "sends", "acked")}
    ops = data.ops
    for i in _workload(data):
        end = ops.end_s[i]
        out["sends"][min(n - 1, int(ops.start_s[i] // bin_s))] += ops.sends[i]
        if math.isnan(end):
            continue
        b = min(n - 1, int(end // bin_s))
        out[OUTCOMES[ops.outcome[i]]][b] += 1
        out["acked"][b] += ops.acked[i]
    for series in out.values():
        series[:] = [x / bin_s for x in series]
    out["t"] = [b * bin_s for b in range(n)]
    return out


def _rank(sorted_xs: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted, non-empty list."""
    return sorted_xs[max(0, math.ceil(q * len(sorted_xs)) - 1)]


def latency(data: ReportData, bin_s: float) -> dict[str, dict[str, list[Any]]]:
    """Per outcome, per bin (by invoke time): ``t`` (bin start, s) and the ``p50``, ``p99``
    and ``max`` latency (ms) of the workload ops invoked in it; None where a bin holds no op
    of that outcome (so lines break there)."""
    buckets: dict[tuple[int, int], list[float]] = {}
    ops = data.ops
    for i in _workload(data):
        end = ops.end_s[i]
        if not math.isnan(end):
            key = (ops.outcome[i], int(ops.start_s[i] // bin_s))
            buckets.setdefault(key, []).append((end - ops.start_s[i]) * 1e3)
    n = int(data.workload_s[1] // bin_s) + 1
    out: dict[str, dict[str, list[Any]]] = {
        name: {"t": [b * bin_s for b in range(n)], "p50": [None] * n, "p99": [None] * n,
               "max": [None] * n} for name in OUTCOMES}
    for (outcome, b), xs in buckets.items():
        xs.sort()
        series = out[OUTCOMES[outcome]]
        b = min(b, n - 1)
        series["p50"][b], series["p99"][b] = _rank(xs, 0.5), _rank(xs, 0.99)
        series["max"][b] = xs[-1]
    return out


def ack_share(data: ReportData) -> tuple[int, int]:
    """``(acknowledged sends, attempted sends)`` of the workload."""
    idx = _workload(data)
    return sum(data.ops.acked[i] for i in idx), sum(data.ops.sends[i] for i in idx)


def _ack_times(data: ReportData) -> list[float]:
    ops = data.ops
    return sorted(ops.end_s[i] for i in _workload(data) if ops.acked[i])


def unavailability(data: ReportData, min_s: float = UNAVAILABLE_S) -> list[tuple[float, float]]:
    """Windows ``(start_s, end_s)`` of at least ``min_s`` seconds in which no send was
    acknowledged, within the workload (from its first invoke to its last completion); empty
    when the workload sent nothing."""
    acks = _ack_times(data)
    if not any(data.ops.sends[i] for i in _workload(data)):
        return []
    start, end = data.workload_s
    edges = [start, *acks, end]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b - a >= min_s]


def _first_after(ops_times: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """``(starts, suffix_min)`` of ``(invoke, completion)`` pairs sorted by invoke: the
    earliest completion among the ops invoked at or after ``starts[j]`` is ``suffix_min[j]``
    (``inf`` past the end)."""
    starts = [s for s, _ in ops_times]
    suffix_min = [math.inf] * (len(ops_times) + 1)
    for j in range(len(ops_times) - 1, -1, -1):
        suffix_min[j] = min(ops_times[j][1], suffix_min[j + 1])
    return starts, suffix_min


def recovery(data: ReportData) -> list[dict[str, Any]]:
    """Per fault window that ended: ``window`` (``FaultWindow``), ``first_ack_s`` (seconds from
    its end to the first acknowledgement of a send invoked after it; None: none came),
    ``first_read_s`` (seconds from its end to the completion of the first poll invoked after
    it that returned records; None: none did), ``sent_after`` (a send was invoked after it:
    False for the final heal after the workload stopped, whose recovery nothing could show)
    and ``isr_full_s`` (seconds from its end until the monitor saw every partition led and
    with its whole ISR; None: never, or no monitor)."""
    ops = data.ops
    work = _workload(data)
    acked = _first_after(sorted((ops.start_s[i], ops.end_s[i]) for i in work if ops.acked[i]))
    read = _first_after(sorted((ops.start_s[i], ops.end_s[i]) for i in work
                               if ops.read[i] and ops.outcome[i] == OK))
    last_send = max((ops.start_s[i] for i in work if ops.sends[i]), default=-math.inf)
    out = []
    for w in data.windows:
        if w.end_s is None:
            continue
        first_ack, first_read = (suffix[bisect.bisect_left(starts, w.end_s)]
                                 for starts, suffix in (acked, read))
        out.append({"window": w,
                    "first_ack_s": None if math.isinf(first_ack) else first_ack - w.end_s,
                    "first_read_s": None if math.isinf(first_read) else first_read - w.end_s,
                    "sent_after": last_send >= w.end_s,
                    "isr_full_s": _isr_full_after(data.isr_full, w.end_s)})
    return out


def _isr_full_after(changes: list[tuple[float, bool]], t: float) -> float | None:
    """Seconds from ``t`` until the ISR-full state holds (0 if it already held at ``t``)."""
    before = [full for at, full in changes if at <= t]
    if before and before[-1]:
        return 0.0
    later = next((at for at, full in changes if at > t and full), None)
    return None if later is None else later - t


def open_at_end(windows: list[FaultWindow]) -> list[FaultWindow]:
    """The windows never undone in the history."""
    return [w for w in windows if w.end_s is None]


def outcome_counts(data: ReportData) -> dict[str, int]:
    """Workload ops by outcome (``ok``, ``fail``, ``info``; never completed counts as info)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for i in _workload(data):
        counts[OUTCOMES[data.ops.outcome[i]]] += 1
    return counts



def summary(data: ReportData) -> dict[str, Any]:
    """The availability figures ``results.json`` keeps (its ``availability`` section), so a
    comparison or a trend reads them without the history:

    ``sends`` and ``acked`` (attempted and acknowledged sends of the workload), ``ack_share``
    (``acked / sends``, None without sends), ``send_latency_ms`` (nearest-rank ``p50``,
    ``p99`` and ``max`` of the ops that sent and completed ok, invoke to completion; None
    without any), ``unavailable_windows`` and ``unavailable_s`` (windows of at least
    ``UNAVAILABLE_S`` without an acknowledgement, their count and summed seconds),
    ``workload_s`` (first invoke to last completion of the workload, s) and
    ``unavailable_share`` (``unavailable_s / workload_s``: the share of the run's time with no
    acknowledgement, which the share of sends acknowledged hides), ``longest_unavailable_s``
    (the longest of those windows, 0 without any), ``ops`` (workload ops by outcome), and
    ``recovery``: per fault window that was undone, ``{"fault": package, "label",
    "healed_s": when it was undone (s since the run's start), "first_ack_s": seconds from
    there to the first acknowledgement of a send invoked after it (None: none came),
    "first_read_s", "sent_after", "isr_full_s"}`` (``recovery``; OpenChaos's recovery time
    per fault)."""
    acked, attempted = ack_share(data)
    ops = data.ops
    latencies = sorted((ops.end_s[i] - ops.start_s[i]) * 1e3 for i in _workload(data)
                       if ops.sends[i] and ops.outcome[i] == OK and not math.isnan(ops.end_s[i]))
    windows = unavailability(data)
    start, end = data.workload_s
    span = end - start if attempted else 0.0
    down = sum(b - a for a, b in windows)
    return {
        "sends": attempted, "acked": acked,
        "ack_share": round(acked / attempted, 6) if attempted else None,
        "send_latency_ms": {"p50": round(_rank(latencies, 0.5), 3),
                            "p99": round(_rank(latencies, 0.99), 3),
                            "max": round(latencies[-1], 3)} if latencies else None,
        "unavailable_windows": len(windows),
        "unavailable_s": round(down, 3),
        "workload_s": round(span, 3),
        "unavailable_share": round(down / span, 6) if span > 0 else None,
        "longest_unavailable_s": round(max((b - a for a, b in windows), default=0.0), 3),
        "ops": outcome_counts(data),
        "recovery": [{"fault": r["window"].package, "label": r["window"].label,
                      "healed_s": round(r["window"].end_s, 3),
                      "first_ack_s": _round(r["first_ack_s"]),
                      "first_read_s": _round(r["first_read_s"]),
                      "sent_after": r["sent_after"],
                      "isr_full_s": _round(r["isr_full_s"])} for r in recovery(data)]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
