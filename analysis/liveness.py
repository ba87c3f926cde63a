"""Liveness the faults must not break: a partition whose last stable offset stops advancing
while a transaction is open on it (``hanging-transaction``), from the monitor's samples of
each partition's high watermark and LSO (``evidence.Record.offsets``).

Kafka's promise: the transaction coordinator aborts a transaction that has been open longer
than its ``transaction.timeout.ms``, checking every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (Kafka broker configs), and
the abort's markers advance the LSO of every partition the transaction wrote. A partition
whose LSO stays below its HW at one offset for longer than both, plus ``SLACK_S`` for the
markers, holds a *hanging transaction* (KIP-664: "the LSO is unable to advance", so
``read_committed`` consumers stop there). Only time with no fault active counts: a fault
can keep the coordinator or the partition's leader from writing the markers, and the bound
starts again once it is healed, so a finding needs one stretch with no fault active longer
than the bound. A runtime setting (``unclean-on``) is no fault: it stops no broker. Pure
Python: the samples are few (two a second).

A gap in the samples longer than ``evidence.MAX_BLIND_NS`` does not end a stuck stretch when
the LSO is the same offset on both sides and the record shows nothing on the partition in
between that could truncate its log (a leader change, an unseen election, a power loss, a
forced election): an LSO only moves forward until a truncation, so it stayed there.
"""

from __future__ import annotations

import math
from typing import Any

from kafka_chaos.analysis import evidence as ev
from kafka_chaos.catalogue.faults import PACKAGES, STOP_OF

#: The anomaly's name in results (``names.HANGING_TXN``).
NAME = "hanging-transaction"
#: Kafka's default ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (ms).
CLEANUP_INTERVAL_MS = 10_000
#: The workload's ``transaction.timeout.ms`` when the run's config does not say (ms).
TXN_TIMEOUT_MS = 10_000
#: Seconds allowed on top for the coordinator to write the abort and its markers.
SLACK_S = 10.0
#: The backends that attach to a cluster they did not configure (``clusters.backends``'
#: ``ATTACHING``; analysis does not import clusters).
_ATTACHED = ("external", "docker-attach", "ssh-attach")
#: The ``f``s that end a fault (``catalogue.faults.STOP_OF``; ``heal-all`` ends any).
_STOPS = set(STOP_OF.values()) | {"heal-all"}
#: Nemesis ops that change a setting at runtime and stop nothing (``unclean-on`` and
#: ``unclean-off``): no fault, so they excuse no stuck LSO.
_SETTINGS = frozenset(f for kind in PACKAGES.values() if kind.setting
                      for f in (*kind.start, kind.stop))
#: Events after which a partition's LSO may have gone back (its log truncated).
_TRUNCATING = (ev.LEADER_CHANGE, ev.UNSEEN, ev.POWER_LOSS, ev.FORCED_UNCLEAN)


def _interval_ms(config: dict[str, Any]) -> str | int | None:
    """The coordinator's abort check interval as the run set it on its brokers (the run
    config's ``broker_properties``, a plan's ``cluster.broker_config``), or None."""
    return (config.get("broker_properties") or {}).get(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")


def bound_s(config: dict[str, Any] | None) -> float:
    """Seconds an LSO may stay stuck with no fault active: the run's transaction timeout
    plus the coordinator's abort check interval (as the run set it, else Kafka's default)
    plus ``SLACK_S``."""
    config = config or {}
    interval = _interval_ms(config) or CLEANUP_INTERVAL_MS
    timeout = config.get("txn_timeout_ms") or TXN_TIMEOUT_MS
    return (int(timeout) + int(interval)) / 1000 + SLACK_S


def doubt(config: dict[str, Any] | None) -> str | None:
    """Why findings cannot be held to ``bound_s``, or None: a cluster the run attached to
    keeps its own abort check interval, which the run did not set and does not know."""
    config = config or {}
    if config.get("backend") in _ATTACHED and _interval_ms(config) is None:
        return ("the attached cluster's transaction.abort.timed.out.transaction.cleanup."
                f"interval.ms is unknown; the bound assumed Kafka's default "
                f"{CLEANUP_INTERVAL_MS} ms")
    return None


def disturbed(nemesis: list[tuple[int, str, int, int | None]]) -> list[tuple[float, float]]:
    """The time stretches (ns; ``inf`` for one never ended) in which some fault was active:
    from each fault's start invoke to the completion of the next op that ends it (its
    package's stop, or ``heal-all``); an op of no known package counts from its invoke to
    its completion. A start whose stop never completed is active to the end. A setting's
    toggle (``_SETTINGS``) is none."""
    out = []
    ops = sorted(nemesis)
    for i, (_, f, invoked, done) in enumerate(ops):
        if f in _STOPS or f in _SETTINGS:
            continue
        if f in STOP_OF:
            stops = (STOP_OF[f], "heal-all")
            end = next((d for _, g, _, d in ops[i + 1:] if g in stops and d is not None),
                       math.inf)
        else:
            end = math.inf if done is None else done
        out.append((invoked, end))
    return out


def _quiet_ns(lo: int, hi: int, spans: list[tuple[float, float]]) -> float:
    """Nanoseconds of the longest stretch of ``[lo, hi]`` outside every span of ``spans``
    (the bound starts again after each fault)."""
    best, at = 0.0, float(lo)
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in spans if a < hi and b > lo):
        best = max(best, a - at)
        at = max(at, b)
    return max(best, hi - at)


def _unbroken(rec: ev.Record, tp: ev.TP, lo: int, hi: int) -> bool:
    """Nothing the record holds on ``tp`` between history indexes ``lo`` and ``hi`` could
    have truncated its log (``_TRUNCATING``)."""
    return not any(e.kind in _TRUNCATING and e.meets(lo, hi) for e in rec.events.get(tp, ()))


def _written(samples: list[tuple[int, int, int, int]], offset: int) -> dict[str, int]:
    """``{"lo", "hi"}``: the indexes of the last of ``samples`` whose HW was at or below
    ``offset`` and of the next one (0 and the first one's when none was)."""
    j = max((k for k, s in enumerate(samples) if s[2] <= offset), default=-1)
    return {"lo": samples[j][0] if j >= 0 else 0, "hi": samples[j + 1][0]}


def hanging(rec: ev.Record, config: dict[str, Any] | None) -> dict[str, Any]:
    """The cases of ``hanging-transaction``: ``{"count": n, "examples": [...]}``, one per
    partition and stuck offset, each ``{"partition": "t-p", "lso", "hw" (at the last sample
    of the stretch), "at_s": [first, last sample seconds], "indexes": [first, last sample
    index], "quiet_s" (its longest stretch with no fault active), "bound_s"}``, and
    ``doubt`` (``doubt``) when there are findings the bound may not hold for; else
    ``cases``, each finding with
    its window for the promises table (``{"tp", "lo", "hi", "stuck"}``): when the stuck
    offset was written, from the last sample before the stretch whose HW was at or below it
    to the next sample (whose HW was above it), and the first sample of the stretch. The
    event that made the LSO stop must lie there (a late Produce), or between the write and
    the stretch (an election that lost the transaction's marker).
    Each finding is also added to ``rec`` as an ``lso-stuck`` event (``hi`` ``END`` when it
    lasted to the partition's last sample): the final reads' view of the partition ends
    there.

    A stretch is consecutive samples of the partition whose LSO is one offset below their
    HW, none further apart than ``evidence.MAX_BLIND_NS`` unless nothing in the record could
    have moved the LSO back in between (see the module docstring)."""
    spans = disturbed(rec.nemesis)
    limit = bound_s(config)
    examples, cases = [], []
    for tp, samples in sorted(rec.offsets.items()):
        stretch: list[tuple[int, int, int, int]] = []
        start = 0  # the position in ``samples`` of the stretch's first sample
        for i, sample in enumerate(samples + [None]):  # type: ignore[list-item]
            keeps = (sample is not None and sample[3] < sample[2] and stretch
                     and sample[3] == stretch[0][3]
                     and (sample[1] - stretch[-1][1] <= ev.MAX_BLIND_NS
                          or _unbroken(rec, tp, stretch[-1][0], sample[0])))
            if keeps:
                stretch.append(sample)
                continue
            if len(stretch) > 1:
                quiet = _quiet_ns(stretch[0][1], stretch[-1][1], spans) / 1e9
                if quiet > limit:
                    example = {
                        "partition": f"{tp[0]}-{tp[1]}", "lso": stretch[0][3],
                        "hw": stretch[-1][2], "indexes": [stretch[0][0], stretch[-1][0]],
                        "at_s": [round(stretch[0][1] / 1e9, 3), round(stretch[-1][1] / 1e9, 3)],
                        "quiet_s": round(quiet, 3), "bound_s": limit}
                    examples.append(example)
                    written = _written(samples[:start + 1], stretch[0][3])
                    cases.append((example, {"tp": tp, **written, "stuck": stretch[0][0]}))
                    rec.events.setdefault(tp, []).append(ev.Event(
                        ev.LSO_STUCK, tp, stretch[0][0], ev.END if sample is None else
                        stretch[-1][0], stretch[0][1], stretch[-1][1],
                        {"lso": stretch[0][3], "written": [written["lo"], written["hi"]]}))
            start = i
            stretch = [sample] if sample is not None and sample[3] < sample[2] else []
    out: dict[str, Any] = {"count": len(examples), "examples": examples}
    if examples and (why := doubt(config)):
        out["doubt"] = why
    elif examples:
        out["cases"] = cases
    return out
