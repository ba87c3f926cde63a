"""Offline analysis of a kafka-chaos history with Spark: Jepsen's Kafka anomaly checkers.

Entry point: ``check(path)``. Layout: ``validate`` (Python pass over the file), ``load``
(DataFrames), ``checkers`` (one function per anomaly type), ``stats``, ``spark`` (the session).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from analysis.checkers import ANOMALIES, CHECKERS
from analysis.load import History, load
from analysis.spark import session
from analysis.stats import count_ops
from analysis.validate import validate
from history import HistoryError

__all__ = ["check", "AnalysisError", "HistoryError", "ANOMALIES", "CHECKERS", "History", "load",
           "session"]

#: Longest exception text kept in ``unknown_reasons`` (Py4J messages carry whole Java traces).
_MAX_REASON = 300


class AnalysisError(RuntimeError):
    """Spark failed outside a checker: it could not start, or could not load or count the ops.

    Not raised for bad input (that is ``HistoryError``), nor when a single checker fails (that
    makes the result ``"unknown"``).
    """


def check(history_path: str | Path, *, spark_master: str = "local[2]") -> dict[str, Any]:
    """Check the history at ``history_path`` for Kafka anomalies.

    Returns a JSON-able dict::

        {"valid": True | False | "unknown",
         "anomalies": {name: {"count": n, "examples": [up to 5 dicts]}, ...},
         "anomaly_types": [names with count > 0],
         "stats": see analysis.stats.count_ops,
         "unknown_reasons": [str, ...],
         "analysis_time_s": wall seconds for the whole check, Spark start-up included}

    ``anomalies`` always has every name of ``analysis.checkers.ANOMALIES`` (``lost-write``,
    ``unseen``, ``duplicate``, ``inconsistent-offsets``, ``nonmonotonic-send``), in that order;
    the rules are in ``analysis.checkers``. An anomaly whose checker raised has
    ``{"count": None, "examples": [], "error": text}``.

    Validity merges like Jepsen's ``checker/compose`` (false > unknown > true): ``False`` if any
    count > 0; else ``"unknown"`` if no send completed ok, or some key with ok sends has no ok
    final poll, or a checker raised (an exception never yields ``True``); else ``True``.

    The Spark session (``analysis.spark.session``) is left running for later calls.

    Raises:
        HistoryError: malformed history (checked before Spark starts); names the line.
        OSError: the file cannot be read.
        AnalysisError: Spark failed outside a checker.
    """
    start = time.perf_counter()
    path = Path(history_path)
    n_ops = validate(path)
    try:
        h = load(session(spark_master), path, n_ops)
    except Exception as exc:
        raise AnalysisError(f"could not load {path} into Spark: {_short(exc)}") from exc
    try:
        try:
            op_stats, unjudged = count_ops(h)
        except Exception as exc:
            raise AnalysisError(f"could not count the ops of {path}: {_short(exc)}") from exc
        reasons: list[str] = []
        anomalies: dict[str, dict[str, Any]] = {}
        for name, checker in CHECKERS.items():
            try:
                anomalies.update(checker(h))
            except Exception as exc:  # one broken checker must not hide the others' findings
                text = f"{type(exc).__name__}: {_short(exc)}"
                reasons.append(f"checker {name} raised: {text}")
                anomalies.update({a: {"count": None, "examples": [], "error": text}
                                  for a in _reported_by(name)})
    finally:
        h.unpersist()

    if op_stats["send"]["ok"] == 0:
        reasons.append("no send completed ok: there was nothing to check")
    if unjudged:
        shown = ", ".join(map(str, unjudged[:20])) + (", ..." if len(unjudged) > 20 else "")
        reasons.append(f"no ok final poll of key(s) {shown}: unread writes above their highest "
                       "read offset were not judged")
    for name in ANOMALIES:
        if name not in anomalies:  # a checker bug; treated like a raise, never as "none found"
            reasons.append(f"no checker reported {name}")
            anomalies[name] = {"count": None, "examples": [], "error": "not reported"}
    anomalies = {name: anomalies[name] for name in ANOMALIES}
    found = [name for name, a in anomalies.items() if a["count"]]
    valid: bool | str = False if found else ("unknown" if reasons else True)
    return {
        "valid": valid,
        "anomalies": anomalies,
        "anomaly_types": found,
        "stats": op_stats,
        "unknown_reasons": reasons,
        "analysis_time_s": round(time.perf_counter() - start, 3),
    }


def _reported_by(checker: str) -> list[str]:
    # Checker names are their anomaly names, joined by "+" when one job reports several.
    return checker.split("+")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else repr(exc)
    return first[:_MAX_REASON]
