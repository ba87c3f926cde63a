"""Every finding judged against what the configuration promises and what the run's record shows
(``analysis.promises``, ``analysis.evidence``): the Spark side of the verdict.

``record`` reads the nemesis's and the monitor's ops into an ``evidence.Record``; ``per_case``
says which anomalies must be judged finding by finding (their cases are then collected whole by
``checkers.common.summarize``); ``judge`` turns each anomaly's count and cases into outcomes,
examples that carry their evidence, and the reasons a verdict is unknown.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis import evidence, kafka_log, promises
from kafka_chaos.analysis.checkers.common import MAX_EXAMPLES
from kafka_chaos.analysis.load import History
from kafka_chaos.catalogue.anomalies import CYCLE_ANOMALIES, GARBAGE_READ, HANGING_TXN
from kafka_chaos.analysis.remote import is_url
from kafka_chaos.history import MONITOR, NEMESIS

#: Anomalies whose window ends at the *invoke* of the read that shows them (the event must
#: come before that read began); every other window ends at its last op's completion.
_TO_READ = ("lost-write", "unseen")
#: Findings about the record at one offset (``ex["offset"]``), which a damage of the batch
#: holding it may explain (``mechanisms.damaged_unchecked``).
_AT_OFFSET = (*_TO_READ, GARBAGE_READ, "corrupt-read", "inconsistent-offsets")
#: Findings about two reads of a key (``checkers.polls``): a truncation acted at or below
#: the later of their offsets, which stands for them (``mechanisms.in_sync_replicas_cut``).
_POLL_ORDER = ("poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll")
#: Most ops looked up as literals in one filter (more go through a broadcast join).
_LITERALS = 5000
_OUTCOME_ORDER = (promises.VIOLATION, promises.UNEXPLAINED, promises.PERMITTED)


def record(h: History) -> evidence.Record:
    """The ``evidence.Record`` of ``h``'s nemesis and monitor ops: read with pyarrow from a
    local copy (a few thousand rows, no Spark job), by Spark from one at a URL."""
    cols = ["op", "index", "process", "f", "type", "inv", "done", "invoke_time", "time"]
    path = h.tables.get("ops")
    if path is None or is_url(path):
        rows = [r.asDict() for r in h.pairs.where(F.col("process").isin(NEMESIS, MONITOR))
                .select(*cols).collect()]
    else:
        import pyarrow.dataset as pads

        rows = pads.dataset(path, format="parquet").to_table(
            columns=cols, filter=pads.field("process").isin([NEMESIS, MONITOR]),
            use_threads=False).to_pylist()
    header = h.header or {}
    rec = evidence.build(rows, header.get("nodes"), h.config)
    local = path is not None and not is_url(path)
    every_op = None
    if local and any(e.facts.get("cut") for es in rec.events.values() for e in es):
        every_op = _every_op(path)
        evidence.relocate(rec, every_op)
    logs = kafka_log.server_logs(Path(path).parent.parent) if local else []
    if not logs:  # <run dir>/history.parquet/ops.parquet: the logs are in <run dir>/nodes
        return rec
    unix_ns = kafka_log.usable(header, any(f.startswith("clock") for _, f, *_ in rec.nemesis))
    lines = kafka_log.read(logs, unix_ns or 0, (header.get("clock") or {}).get("utc_offset_s", 0))
    if unix_ns is None:
        kafka_log.mark_unclean(rec, lines)
    elif lines:
        kafka_log.narrow(rec, lines, every_op if every_op is not None else _every_op(path))
    return rec


def _every_op(path: str) -> tuple[Any, Any]:
    """``(times, indexes)`` of every line of the history whose ops table is at ``path``, in
    index order (numpy arrays: index order is time order)."""
    import numpy as np
    import pyarrow.dataset as pads

    t = pads.dataset(path, format="parquet").to_table(
        columns=["op", "invoke_time", "index", "time"], use_threads=False)
    done = t.filter(pads.field("index").is_valid())
    indexes = np.concatenate([t["op"].to_numpy(), done["index"].to_numpy()])
    times = np.concatenate([t["invoke_time"].to_numpy(), done["time"].to_numpy()])
    order = np.argsort(indexes, kind="stable")
    return times[order], indexes[order]


def per_case(names: list[str], facts: dict[str, Any] | None) -> set[str]:
    """The anomalies of ``names`` judged finding by finding under ``facts`` (cycles apart:
    their search reports whether each has a ww step)."""
    return {n for n in names if n not in CYCLE_ANOMALIES
            and promises.judge(n, facts)["per_case"]}


def judge(h: History, found: dict[str, dict[str, Any]], facts: dict[str, Any] | None,
          rec: evidence.Record) -> list[str]:
    """Judge every anomaly of ``found`` (``{name: {"count", "examples", ["cases"],
    ["ww_free"]}}``, as the checkers report them) in place, and return the reasons the
    verdict is unknown (unexplained findings).

    Each anomaly gets ``outcomes`` (``{"permitted", "violation", "unexplained"}`` counts),
    ``rules`` (``{rule: permitted count}``), ``by_configuration`` (how many of its findings
    the configuration alone permits, ``promises.by_configuration``; when found), ``permitted``
    (every finding was), ``rule``, ``because``, ``source`` (of the rule that permitted most,
    or of the configuration's verdict), and examples (violations first, then unexplained,
    then permitted) each with its ``outcome``, and for a permitted one its ``rule`` and
    ``evidence`` (the event, named: ``evidence.Event.as_json``), for an unexplained one the
    ``blind`` stretch.
    """
    reasons: list[str] = []
    judged = {n: a for n, a in found.items() if a.get("count") and "cases" in a}
    lookups = _lookups(h, judged)
    for name, a in found.items():
        cases = a.pop("cases", None)
        verdict = promises.judge(name, facts)
        a.update(because=verdict["because"], source=verdict["source"], rule=verdict["rule"])
        count = a.get("count")
        if not count:
            a.update(permitted=False, outcomes=_outcomes(), rules={})
            continue
        if "ww_free" in a:  # a cycle: permitted by its ww step or by nothing
            _cycles(name, a, facts)
        elif cases is not None:
            reasons += _cases(h, name, a, cases, facts, rec, lookups)
        elif a.get("doubt") and not verdict["permitted"]:  # the checker's bound is unsure
            # ``doubtful``: how many of them (the rest are violations; their examples come
            # without a ``why``); without it, every one
            unsure = min(a.get("doubtful", count), count)
            a.update(permitted=False, outcomes=_outcomes(**{promises.UNEXPLAINED: unsure,
                                                            promises.VIOLATION: count - unsure}),
                     rules={})
            for ex in a["examples"]:
                ex["outcome"] = (promises.UNEXPLAINED if unsure == count or ex.get("why")
                                 else promises.VIOLATION)
            reasons.append(f"{unsure} {name} finding(s) unexplained: {a['doubt']}")
        else:
            outcome = promises.PERMITTED if verdict["permitted"] else promises.VIOLATION
            a.update(permitted=verdict["permitted"], outcomes=_outcomes(**{outcome: count}),
                     rules={verdict["rule"]: count} if verdict["permitted"] else {})
            for ex in a["examples"]:
                ex["outcome"] = outcome
    for a in found.values():
        if a.get("count"):
            a["by_configuration"] = sum(n for rule, n in a["rules"].items()
                                        if promises.by_configuration(rule))
    return reasons



def _outcomes(**counts: int) -> dict[str, int]:
    return {o: counts.get(o, 0) for o in (promises.PERMITTED, promises.VIOLATION,
                                          promises.UNEXPLAINED)}


def _cycles(name: str, a: dict[str, Any], facts: dict[str, Any] | None) -> None:
    """Every cycle with (without) a ww step is judged alike: the rules look at nothing else."""
    free = a.pop("ww_free")
    verdicts = {ww: _cycle_verdict(name, ww, facts) for ww in (True, False)}
    for ex in a["examples"]:
        verdict = verdicts[bool(ex.get("ww"))]
        ex["outcome"] = verdict["outcome"]
        if verdict["rule"]:
            ex["rule"] = verdict["rule"]
    counts, rules = Counter(), Counter()
    for ww, k in ((True, a["count"] - free), (False, free)):
        if k:
            counts[verdicts[ww]["outcome"]] += k
            if verdicts[ww]["rule"]:
                rules[verdicts[ww]["rule"]] += k
    _summarise(a, counts, rules)


def _cycle_verdict(name: str, ww: bool, facts: dict[str, Any] | None) -> dict[str, Any]:
    verdict = promises.judge(name, facts)
    if not verdict["per_case"]:  # a plan's allow or forbid, or a rule of the whole run
        return {"outcome": promises.PERMITTED if verdict["permitted"] else promises.VIOLATION,
                "rule": verdict["rule"] if verdict["permitted"] else None}
    return promises.judge_case(name, promises.Case(None, 0, evidence.END, ww=ww), facts,
                               evidence.Record())


def _summarise(a: dict[str, Any], counts: Counter, rules: Counter) -> None:
    a["outcomes"] = _outcomes(**counts)
    a["rules"] = dict(rules.most_common())
    a["permitted"] = counts[promises.PERMITTED] == a["count"]
    if rules:
        top = rules.most_common(1)[0][0]
        a["rule"] = top
        rule = next((r for r in promises.RULES if r.name == top), None)
        if rule is not None:  # else the plan's allow list, whose text is the verdict's
            a.update(because=rule.because, source=rule.source)
    elif not a["permitted"]:
        a["rule"] = None
        if a.get("violation_because"):  # no finding permitted: say why none could be
            a.update(because=a["violation_because"], source=None)


def _cases(h: History, name: str, a: dict[str, Any], cases: list, facts: dict[str, Any],
           rec: evidence.Record, lookups: dict[str, Any]) -> list[str]:
    """Judge the collected ``cases`` of one anomaly; returns unknown reasons."""
    keys = ((h.header or {}).get("keys") or {}) if h is not None else {}
    counts, rules = Counter(), Counter()
    picked: dict[str, list[dict]] = {o: [] for o in _OUTCOME_ORDER}
    blind: list[tuple] = []
    for example, at in cases:
        case = _case(name, example, at, keys, lookups, rec)
        verdict = promises.judge_case(name, case, facts, rec)
        outcome = verdict["outcome"]
        counts[outcome] += 1
        if verdict["rule"]:
            rules[verdict["rule"]] += 1
        if outcome == promises.UNEXPLAINED:
            blind.append((case.tp, verdict["blind"], verdict["why"]))
        if len(picked[outcome]) < MAX_EXAMPLES:
            example = dict(example, outcome=outcome)
            if name == "group-skip":  # as judged: the proxy may have taken the epoch out
                example["epochless"] = case.epochless
            if verdict["rule"]:
                example["rule"] = verdict["rule"]
            if verdict["evidence"] is not None:
                example["evidence"] = verdict["evidence"].as_json(rec.names)
            if verdict["blind"] is not None:
                example["blind"] = _stretch(case.tp, verdict["blind"])
            if verdict["why"]:
                example["why"] = verdict["why"]
            picked[outcome].append(example)
    reasons = []
    unjudged = a["count"] - len(cases)
    if unjudged > 0:  # beyond the collection cap: counted, never judged
        counts[promises.UNEXPLAINED] += unjudged
        reasons.append(f"{unjudged} {name} finding(s) beyond the first {len(cases)} were not "
                       "judged one by one")
    if blind:
        tp, stretch, why = blind[0]
        where = ("its key maps to no partition" if tp is None else
                 why if stretch is None else
                 _blind_text(tp, stretch) if why is None else _doubt_text(tp, stretch, why))
        rule_names = [r.name for r in promises.candidates(name, facts) if r.evidence]
        reasons.append(f"{len(blind)} {name} finding(s) unexplained: "
                       f"{', '.join(rule_names)} could explain them, but the record cannot "
                       f"show it: {where}")
    a["examples"] = [ex for o in _OUTCOME_ORDER for ex in picked[o]][:MAX_EXAMPLES]
    if counts[promises.VIOLATION]:
        allowed = [r.name for r in promises.candidates(name, facts)]
        a["violation_because"] = (
            f"the configuration allows {', '.join(allowed)}, but for these findings the "
            "record shows no event that permits them on their partition in their window"
            if allowed else a["because"])
    _summarise(a, counts, rules)
    return reasons


def _stretch(tp, stretch) -> dict[str, Any]:
    lo, hi, lo_ns, hi_ns = stretch
    return {"partition": None if tp is None else f"{tp[0]}-{tp[1]}",
            "indexes": [lo, None if hi >= evidence.END else hi],
            "at_s": [None if t is None else round(t / 1e9, 3) for t in (lo_ns, hi_ns)]}


def _doubt_text(tp, stretch, why: str) -> str:
    s = _stretch(tp, stretch)
    lo, hi = s["at_s"]
    return f"{why} (on {s['partition']}, between {lo} s and {hi} s)"


def _blind_text(tp, stretch) -> str:
    s = _stretch(tp, stretch)
    lo, hi = s["at_s"]
    if lo is None:
        return f"the monitor never saw {s['partition']}"
    until = "the end of the history" if hi is None else f"{hi} s"
    return f"the monitor did not see {s['partition']} from {lo} s to {until}"


#: How the earlier owner's stretch of a ``group-overlap`` (``checkers.owners``), or the
#: earlier holder of a ``share-lock-overlap`` (``checkers.share``), ended -> whether it was
#: fenced (None: its record cannot tell).
_FENCED = {"lost": True, "gone": True, "fenced": True, "revoked": False, "still-owned": None,
           "held": False, "still-committing": False}


def _case(name: str, ex: dict, at: dict, keys: dict, lookups: dict,
          rec: evidence.Record) -> promises.Case:
    """The ``promises.Case`` of one collected case (``at``: ``checkers.common.AT``). A lost
    write whose send recorded when it was acknowledged (``ack_ns``) has its window begin at
    the record's first op at or after that time, not at its op's completion: one slow send
    keeps a whole op open for up to ``delivery.timeout.ms``. A ``hanging-transaction``'s
    window comes whole from ``analysis.liveness`` (monitor samples)."""
    if name == HANGING_TXN:
        return promises.Case(tuple(at["tp"]), at["lo"], at["hi"], stuck=at.get("stuck"),
                             offset=ex.get("lso"))
    key = at.get("key")
    tp = keys.get(str(key)) if key is not None else None
    done, f = lookups["done"], lookups["f"]
    lo = at.get("lo") if at.get("lo") is not None else 0
    hi = at.get("hi")
    acked = None
    if name in _TO_READ:
        acked = lookups["ack"].get((at.get("writer"), ex.get("value")))
        if acked is not None:
            lo = min(lo, rec.index_from(acked))
        if hi is None:  # a poll read another value at its offset: the first such poll
            hi = lookups["reader"].get((key, ex.get("offset"), ex.get("value")))
        hi = evidence.END if hi is None else hi
    elif name == GARBAGE_READ:  # up to the first read of that value there
        hi = lookups["garbage"].get((key, ex.get("offset"), ex.get("value")), evidence.END)
    else:
        hi = evidence.END if hi is None else done.get(hi) or evidence.END
    write = None
    if at.get("write_inv") is not None:
        write = (at["write_inv"], at.get("write_done") or evidence.END)
    sent = None
    if name == "duplicate" and at.get("writer") is not None:
        sent = (at["writer"], done.get(at["writer"]) or evidence.END)
    return promises.Case(tuple(tp) if tp else None, lo, hi, write=write, sent=sent,
                         value=ex.get("value") if name == "duplicate" else None,
                         writer_f=f.get(at.get("writer")),
                         fenced=_FENCED.get(ex.get("ended_by"), False),
                         state_write_failed=bool(ex.get("state_write_failed")),
                         epochless=_epochless(ex, lo, rec) if name == "group-skip" else False,
                         reset=ex.get("reset") if name == "group-skip" else False,
                         read_before=bool(ex.get("read_before")) and name in _TO_READ,
                         offset=_offset(name, ex),
                         copies=tuple(ex["offsets"]) if name == "duplicate" and ex.get(
                             "offsets") else None,
                         ack_ns=acked,
                         read_to=ex.get("final_end") if name == "unseen" else None)


def _offset(name: str, ex: dict) -> int | None:
    """The offset a finding is about (``promises.Case.offset``): its record's, or for two
    reads of a key the later offset of the two (``_POLL_ORDER``); None for the others."""
    if name in _AT_OFFSET:
        return ex.get("offset")
    if name in _POLL_ORDER and ex.get("offsets"):
        return max(ex["offsets"])
    return None


def _epochless(ex: dict, lo: int, rec: evidence.Record) -> bool | None:
    """Whether a commit above a ``group-skip``'s record was stored without its leader epoch:
    sent without one (the example's ``epochless``), or sent while a proxy fault took the
    epochs out of commits (``Record.forgotten``) between the first such commit's invoke
    (``lo``) and the last one's completion. None when the record cannot tell."""
    if ex.get("epochless"):
        return True
    until = ex.get("commits_until")
    until = evidence.END if until is None else until
    if any(a <= until and lo <= b for a, b in rec.forgotten):
        return True
    if any(a <= until and lo <= b for a, b in rec.forgotten_maybe):
        return None
    return ex.get("epochless")


def _lookups(h: History, judged: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the cases' windows and writers need from the history: ``done`` (op -> its
    completion index), ``f`` (op -> its ``f``), ``reader`` ((key, offset, value) of a lost
    write covered by a poll -> the first poll that read another value there), ``ack``
    ((writer op, value) of a lost or unseen write -> its ``ack_ns``, where recorded) and
    ``garbage`` ((key, offset, value) of a ``garbage-read`` -> the first op, final reads
    included, that read it)."""
    ops, polled, writers, garbage = set(), [], set(), []
    for name, a in judged.items():
        if name == HANGING_TXN:  # its windows are sample indexes, not ops
            continue
        for ex, at in a["cases"]:
            if name == GARBAGE_READ:
                garbage.append((at["key"], ex["offset"], ex["value"]))
            ops.update(x for x in (at.get("hi"), at.get("writer")) if x is not None)
            if name in _TO_READ and at.get("hi") is None and ex.get("covered_by"):
                polled.append((at["key"], ex["offset"], ex["value"]))
            if name in _TO_READ and at.get("writer") is not None:
                writers.add(at["writer"])
    out: dict[str, Any] = {"done": {}, "f": {}, "reader": {}, "ack": {}, "garbage": {}}
    if garbage:
        rows = (h.reads.where(F.col("key").isin(sorted({k for k, _, _ in garbage}))
                              & F.col("value").isin(sorted({v for _, _, v in garbage})))
                .groupBy("key", "offset", "value").agg(F.min("op").alias("op")).collect())
        out["garbage"] = {(r["key"], r["offset"], r["value"]): r["op"] for r in rows}
    if writers:
        rows = _of_ops(h.sends.where(F.col("ack_ns").isNotNull())
                       .select("op", "value", "ack_ns"), writers)
        out["ack"] = {(r["op"], r["value"]): r["ack_ns"] for r in rows}
    if ops:
        rows = _of_ops(h.pairs.select("op", "index", "f"), ops)
        out["done"] = {r["op"]: r["index"] for r in rows}
        out["f"] = {r["op"]: r["f"] for r in rows}
    if polled:
        keys = sorted({k for k, _, _ in polled})
        offsets = sorted({o for _, o, _ in polled})
        rows = (h.reads.where(~F.col("final") & F.col("key").isin(keys)
                              & F.col("offset").isin(offsets))
                .groupBy("key", "offset", "value").agg(F.min("op").alias("op")).collect())
        for k, o, v in polled:
            ops_ = [r["op"] for r in rows if r["key"] == k and r["offset"] == o
                    and r["value"] != v]
            if ops_:
                out["reader"][(k, o, v)] = min(ops_)
    return out


def _of_ops(df: DataFrame, ops: set[int]) -> list:
    """The rows of ``df`` whose ``op`` is one of ``ops``, collected: a filter of literals for
    a few, a broadcast join for many."""
    listed = sorted(ops)
    if len(listed) <= _LITERALS:
        return df.where(F.col("op").isin(listed)).collect()
    wanted = df.sparkSession.createDataFrame([(o,) for o in listed], "op long")
    return df.join(F.broadcast(wanted), "op").collect()
