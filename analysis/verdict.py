"""The analysis of one history: ``check(path)`` loads it, runs every checker on Spark, judges
each finding against what the run's configuration promises, and returns the verdict
(``kafka_chaos.analysis`` hands these names on without importing this module until one is
used: importing the package loads no Spark)."""

from __future__ import annotations

import importlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka_chaos.analysis import elle, judge, liveness, promises, quorum, remote
from kafka_chaos.analysis.checkers import (ANOMALIES, CHECKERS, CONSUMER_SIDE, EXAMPLES, cycles,
                                          versions)
from kafka_chaos.analysis.checkers.common import summarize
from kafka_chaos.analysis.checkers.lost import UNJUDGED
from kafka_chaos.catalogue.anomalies import SHARE_UNJUDGED
from kafka_chaos.analysis.checkers.versions import key_partitions
from kafka_chaos.analysis.load import History, load
from kafka_chaos.analysis.spark import SMALL_HISTORY_OPS, cores, is_connect, session
from kafka_chaos.analysis.stats import count_ops
from kafka_chaos.errors import AnalysisError
from kafka_chaos.history import HistoryError, columnar

__all__ = ["check", "AnalysisError", "HistoryError", "ANOMALIES", "CHECKERS", "History", "load",
           "session"]

#: Longest exception text kept in ``unknown_reasons`` (Py4J messages carry whole Java traces).
_MAX_REASON = 300


def check(history_path: str | Path, *, spark_master: str = "local[2]",
          config: dict[str, Any] | None = None,
          cycle_time_limit_s: float | None = None) -> dict[str, Any]:
    """Check the history at ``history_path`` and judge what is found.

    Args:
        history_path: a ``history.jsonl`` of format 1 or 2 (``docs/history-format.md``), or
            its URL on storage the Spark cluster reads (``hdfs://.../history.jsonl``, any
            scheme of Hadoop's ``FileSystem``) beside a current columnar copy
            (``analysis.remote.current_copy``; ``kafka-chaos publish`` puts both there).
        spark_master: Spark master URL.
        config: the run configuration (``config.json``) to judge against when the history has
            no header (format 1); a format-2 header's configuration always wins.
        cycle_time_limit_s: bound of the cycle search (default ``checkers.cycles.TIME_LIMIT_S``).

    Returns a JSON-able dict::

        {"valid": True | False | "unknown",
         "anomalies": {name: {"count": n, "examples": [...], "permitted": bool,
                              "outcomes": {"permitted": n, "violation": n, "unexplained": n},
                              "rules": {rule: n permitted by it},
                              "by_configuration": n permitted with no event (when n > 0),
                              "rule": str | None, "because": str, "source": str | None,
                              "side": "log" | "consumer"}, ...},
         "anomaly_types": [names with count > 0],
         "violations": [names with a violation], "permitted": [names all permitted],
         "unexplained": [names with a finding the record cannot explain or rule out],
         "chances": {rule: events}: for each rule of the configuration that permits a
                    lost write only with an event, how many the record holds (none: the
                    run gave that loss no chance, ``promises.chances``),
         "cycle_search": {"complete", "components", "largest_component", "edges", "time_s"},
         "stats": see analysis.stats.count_ops, "format": 1 | 2, "config_known": bool,
         "unknown_reasons": [str, ...],
         "analysis_time_s": wall seconds for the whole check, Spark start-up included,
         "timings_s": {"columnar", "versions", "count", "checkers", "cycles"}: wall seconds
                      of each phase: finding (or making: conversion and validation) the
                      columnar copy, the shared table (load, shuffle, sorts, cache), then
                      the three families, which run side by side}

    ``anomalies`` has every name of ``ANOMALIES`` in that order. An anomaly whose checker
    raised has ``"count": None`` and an ``"error"``.

    Each finding is judged on its own (``analysis.judge``, ``analysis.promises``): permitted
    only when a rule of the configuration holds for it and the run's record shows the rule's
    event on its partition in its window; examples carry their ``outcome`` and, when
    permitted, the ``rule`` and ``evidence``.

    Validity merges like Jepsen's ``checker/compose`` (false > unknown > true): ``False`` if a
    violation was found; else ``"unknown"`` if nothing was acknowledged, some acknowledged
    writes could not be judged (no final read covers them), a finding is unexplained (the
    record is blind where its permitting event would be), a checker raised, or the cycle
    search hit its time bound (an exception never yields ``True``); else ``True``.

    Raises:
        HistoryError: malformed or empty history (checked before Spark starts); names the line.
            For a URL: no history or no current copy there.
        OSError: the file cannot be read, or its columnar copy cannot be written.
        AnalysisError: Spark failed outside a checker, or a URL could not be read.
    """
    start = time.perf_counter()
    timings: dict[str, float] = {}
    threading.Thread(target=_import_search_modules, name="analysis-imports",
                     daemon=True).start()
    if remote.is_url(history_path):
        path = history_path
        try:  # the size, so the JVM's tuning for small histories, is unknown until then
            tables, meta = remote.current_copy(session(spark_master), path)
        except remote.RemoteError as exc:
            raise AnalysisError(str(exc)) from exc
    else:
        path = Path(history_path)
        copy = columnar.ensure(path)  # validates the history when it has no current copy
        tables, meta = {t: str(copy.table(t)) for t in columnar.TABLES}, copy.meta
    timings["columnar"] = time.perf_counter() - start
    if meta["ops"] == 0:
        raise HistoryError("the history holds no ops: nothing to analyse")
    try:
        small = meta["ops"] < SMALL_HISTORY_OPS
        spark = session(spark_master, small=small)
        h = load(spark, tables, meta, config)
        v = versions(h, 1 if small else key_partitions(h, cores(spark)))  # shuffled, cached
        timings["versions"] = time.perf_counter() - start - timings["columnar"]
    except Exception as exc:
        raise AnalysisError(f"could not load {path} into Spark: {_short(exc)}") from exc
    config = h.config
    reasons: list[str] = []
    cycle_reasons: list[str] = []
    judged: dict[str, Any] = {}
    try:
        # The three families are independent Spark queries over the same cached table. On a
        # small history each is a few short jobs whose cost is driver-side planning, so
        # running them side by side uses a second core. Reasons are kept per family so their
        # order stays deterministic.
        with ThreadPoolExecutor(3, thread_name_prefix="analysis") as pool:
            counting = pool.submit(_timed, timings, "count", _count_ops, h, v, path)
            checking = pool.submit(_timed, timings, "checkers", _run_checkers, h, v, reasons,
                                   judged)
            searching = pool.submit(_timed, timings, "cycles", _search_cycles, h, v,
                                    cycle_time_limit_s, cycle_reasons)
            try:
                op_stats, no_final, _ = counting.result()
                anomalies = checking.result()
                found, search = searching.result()
            except BaseException:
                # leaving the pool waits for its threads: stop their Spark jobs first (Ctrl-C,
                # or the counting failed and the check is over)
                if is_connect(spark):
                    spark.interruptAll()
                else:
                    spark.sparkContext.cancelAllJobs()
                raise
            anomalies.update(found)
            reasons.extend(cycle_reasons)
    finally:
        v.unpersist()

    unsettled = anomalies.pop(SHARE_UNJUDGED, None)
    if unsettled and unsettled["count"]:
        why = {e.get("why") for e in unsettled["examples"]}
        reasons.append(
            f"{unsettled['count']} acknowledged record(s) were never settled by the share "
            "group, " + ("whose final drain did not end quiet" if "no-quiet-drain" in why else
                         "and consumers that ended holding what they had fetched may have "
                         "taken them to the delivery limit unseen (KIP-932 archives them)")
            + ": not judged")
    unjudged = anomalies.pop(UNJUDGED, None)
    if op_stats["acked_sends"] == 0:
        reasons.append("no send was acknowledged: there was nothing to check")
    if unjudged and unjudged["count"]:
        keys = sorted({e["key"] for e in unjudged["examples"]})
        reasons.append(f"{unjudged['count']} acknowledged write(s) were never read and no read "
                       f"covered them (e.g. key(s) {keys}): not judged")
    if no_final:
        shown = ", ".join(map(str, no_final[:20])) + (", ..." if len(no_final) > 20 else "")
        reasons.append(f"no ok final read of key(s) {shown}: unread writes above their highest "
                       "read offset were not judged")
    if search is not None and not search["complete"]:
        reasons.append(f"the cycle search stopped at its time bound ({search['time_s']} s): "
                       "absent G0/G1c cycles prove nothing")
    for name in ANOMALIES:
        if name not in anomalies:  # a checker bug; treated like a raise, never as "none found"
            reasons.append(f"no checker reported {name}")
            anomalies[name] = {"count": None, "examples": [], "error": "not reported"}
    try:
        reasons.extend(judge.judge(h, anomalies, judged["facts"], judged["record"]))
    except Exception as exc:  # the findings stand; how they are judged is then unknown
        reasons.append(f"judging the findings raised: {type(exc).__name__}: {_short(exc)}")
        for a in anomalies.values():
            a.pop("cases", None)
            if a.get("count"):
                a.update(permitted=False, outcomes={"permitted": 0, "violation": 0,
                                                    "unexplained": a["count"]}, rules={})
    for name in ANOMALIES:
        anomalies[name]["side"] = "consumer" if name in CONSUMER_SIDE else "log"
    anomalies = {name: anomalies[name] for name in ANOMALIES}
    found = [name for name, a in anomalies.items() if a["count"]]
    violations = [name for name in found
                  if (anomalies[name].get("outcomes") or {}).get("violation")]
    unexplained = [name for name in found
                   if (anomalies[name].get("outcomes") or {}).get("unexplained")]
    valid: bool | str = False if violations else ("unknown" if reasons else True)
    chances = promises.chances("lost-write", judged.get("facts"), judged["record"]) \
        if "record" in judged else {}
    return {
        "valid": valid,
        "anomalies": anomalies,
        "anomaly_types": found,
        "violations": violations,
        "permitted": [name for name in found if anomalies[name].get("permitted")],
        "unexplained": unexplained,
        "chances": chances,
        "cycle_search": search,
        "stats": op_stats,
        "format": meta["format"],
        "config_known": config is not None,
        "unknown_reasons": reasons,
        "analysis_time_s": round(time.perf_counter() - start, 3),
        "timings_s": {k: round(t, 3) for k, t in timings.items()},
    }


def _import_search_modules() -> None:
    """Import what the cycle search imports only when it runs (``elle.MODULES``,
    ``cycles.MODULES``): here, on the other core while the driver JVM starts, they take
    none of the check's time (0.4 s in a fresh process). A module that cannot be imported
    raises again where it is used."""
    for name in (*elle.MODULES, *cycles.MODULES):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported where the search imports it
            return


def _timed(timings: dict[str, float], name: str, fn, *args):
    t = time.perf_counter()
    try:
        return fn(*args)
    finally:
        timings[name] = time.perf_counter() - t


def _count_ops(h: History, v, path: Path) -> tuple[dict[str, Any], list[int], set[str]]:
    """``stats.count_ops``; raises ``AnalysisError`` (without counts there is no verdict)."""
    try:
        return count_ops(h, v)
    except Exception as exc:
        raise AnalysisError(f"could not count the ops of {path}: {_short(exc)}") from exc


def _search_cycles(h: History, v, time_limit_s: float | None,
                   reasons: list[str]) -> tuple[dict[str, dict[str, Any]], dict | None]:
    """``cycles.cycles`` with a raise turned into unknown cycle anomalies (and a reason)."""
    try:
        return cycles.cycles(h, v, time_limit_s or cycles.TIME_LIMIT_S)
    except Exception as exc:
        found: dict[str, dict[str, Any]] = {}
        _failed(found, reasons, "+".join(elle.CYCLE_ANOMALIES), exc)
        return found, None


def _run_checkers(h: History, v, reasons: list[str],
                  judged: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``CHECKERS`` entry, summarised in one Spark job; when that job fails, each checker
    alone, so a broken one marks only its own anomalies unknown and hides no other finding.
    The run's record (``judge.record``) is read first: it decides which anomalies are judged
    finding by finding, whose cases the job then collects whole (``judged`` gets ``facts``
    and ``record``); the liveness and the quorum checks (``analysis.quorum``: a check it
    could not judge is a reason) read the monitor's samples in it. Then ``EXAMPLES``
    completes the examples of what was found (a raise makes those anomalies unknown too)."""
    rec = judge.record(h)
    facts = promises.facts_of(h.config, rec)
    judged.update(facts=facts, record=rec)
    every = judge.per_case(list(ANOMALIES), facts)
    frames: dict[str, Any] = {}
    anomalies: dict[str, dict[str, Any]] = {}
    for name, checker in CHECKERS.items():
        try:
            frames[name] = checker(h, v)
        except Exception as exc:  # a planning error: this checker's anomalies are unknown
            _failed(anomalies, reasons, name, exc)
    kinds = [k for name in frames for k in name.split("+")]
    try:
        anomalies.update(summarize(frames.values(), kinds, every & set(kinds)))
    except Exception:
        for name, frame in frames.items():
            try:
                mine = name.split("+")
                anomalies.update(summarize([frame], mine, every & set(mine)))
            except Exception as exc:
                _failed(anomalies, reasons, name, exc)
    try:  # from the monitor's samples, no Spark job (``analysis.liveness``)
        anomalies[liveness.NAME] = liveness.hanging(rec, h.config)
    except Exception as exc:
        _failed(anomalies, reasons, liveness.NAME, exc)
    try:  # the KRaft quorum's metadata, from the same samples (``analysis.quorum``)
        metadata = quorum.check(rec, h.config)
        anomalies.update(metadata)
        reasons.extend(f"{name} not judged: {a['not_judged']}" for name, a in metadata.items()
                       if a.get("not_judged"))
    except Exception as exc:
        _failed(anomalies, reasons, "+".join(quorum.NAMES), exc)
    for name, complete in EXAMPLES.items():
        found = [k for k in name.split("+") if anomalies.get(k, {}).get("count")]
        if not found:
            continue
        try:
            complete(v, {k: anomalies[k]["examples"] for k in found})
        except Exception as exc:
            _failed(anomalies, reasons, "+".join(found), exc)
    return anomalies


def _failed(anomalies: dict, reasons: list[str], name: str, exc: BaseException) -> None:
    text = f"{type(exc).__name__}: {_short(exc)}"
    reasons.append(f"checker {name} raised: {text}")
    anomalies.update({a: {"count": None, "examples": [], "error": text}
                      for a in name.split("+")})


def _short(exc: BaseException) -> str:
    """The first line of ``exc``; for a Java exception, of its root cause too (Py4J's own
    first line only names the call, e.g. "An error occurred while calling o289.count")."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else repr(exc)
    root = getattr(exc, "java_exception", None)
    try:
        while root is not None and root.getCause() is not None:
            root = root.getCause()
        if root is not None:
            first = f"{first} {str(root.toString()).splitlines()[0]}"
    except Exception:  # the JVM may be gone: the first line alone
        pass
    return first[:_MAX_REASON]
