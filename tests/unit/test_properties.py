"""Property-based tests (Hypothesis): histories valid by construction have no violation, and
one seeded mutation of such a history is found.

Histories come from a tiny simulated Kafka: per-key logs, producers appending each op's sends
(an ``info`` op may append only some of them), ``assign`` consumers polling in order from their
position (a re-assign seeks back to the beginning), and final reads of every key. Each example
costs one Spark analysis, so the example counts are small and derandomized for CI.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from kafka_chaos import analysis
from tests.queue_builder import Q

# no shrinking: each step is a Spark analysis (seconds), so a failure is reported as found
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@st.composite
def simulations(draw) -> list[dict]:
    """A list of ops (plain dicts) of a correct Kafka run, final reads included."""
    n_keys = draw(st.integers(1, 3))
    logs: list[list[int]] = [[] for _ in range(n_keys)]
    values = itertools.count()
    consumers = {10 + i: [0] * n_keys for i in range(draw(st.integers(1, 2)))}
    ops: list[dict] = [{"f": "assign", "p": p} for p in consumers]
    for _ in range(draw(st.integers(3, 25))):
        step = draw(st.sampled_from(["send", "send", "poll", "reassign"]))
        if step == "send":
            p = draw(st.integers(0, 2))
            sends = []
            typ = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
            for k in draw(st.lists(st.integers(0, n_keys - 1), min_size=1, max_size=4)):
                v = next(values)
                appended = typ == "ok" or (typ == "info" and draw(st.booleans()))
                if appended:
                    logs[k].append(v)
                acked = appended and (typ == "ok" or draw(st.booleans()))
                sends.append([k, v, len(logs[k]) - 1 if acked else None])
            ops.append({"f": "send", "p": p, "type": typ, "sends": sends})
        elif step == "poll":
            p = draw(st.sampled_from(sorted(consumers)))
            read = {}
            for k in range(n_keys):
                n = draw(st.integers(0, 3))
                start = consumers[p][k]
                got = [(o, logs[k][o]) for o in range(start, min(start + n, len(logs[k])))]
                if got:
                    read[k] = got
                    consumers[p][k] = got[-1][0] + 1
            ops.append({"f": "poll", "p": p, "read": read})
        else:
            p = draw(st.sampled_from(sorted(consumers)))
            consumers[p] = [0] * n_keys
            ops.append({"f": "assign", "p": p})
    for k in range(n_keys):
        ops.append({"f": "final", "p": 99, "key": k, "read": list(enumerate(logs[k])),
                    "end": len(logs[k])})
    return ops


def build(ops: list[dict]) -> Q:
    q = Q()
    retired = itertools.count(1000)
    alias: dict[int, int] = {}
    for op in ops:
        p = alias.get(op["p"], op["p"])
        if op["f"] == "assign":
            q.assign(p, list(range(3)))
        elif op["f"] == "send":
            sends = [(k, v) for k, v, _ in op["sends"]]
            offsets = [o for _, _, o in op["sends"]]
            q.send(p, sends, type=op["type"], offsets=offsets,
                   acked=[o is not None for o in offsets])
            if op["type"] == "info":  # Jepsen: a process whose op ended info is retired
                alias[op["p"]] = next(retired)
        elif op["f"] == "poll":
            q.poll(p, op["read"])
        else:
            q.final(p, op["key"], op["read"], end=op["end"])
    return q


def check(q: Q, tmp_path: Path, name: str) -> dict:
    path = tmp_path / f"{name}.jsonl"
    path.unlink(missing_ok=True)
    return analysis.check(q.write(path))


@pytest.mark.spark
@settings(max_examples=4, **SETTINGS)
@given(simulations())
def test_histories_valid_by_construction_have_no_violation(spark, tmp_path, ops) -> None:
    result = check(build(ops), tmp_path, "clean")
    assert result["violations"] == [], {n: result["anomalies"][n]["examples"]
                                        for n in result["violations"]}
    assume(result["stats"]["acked_sends"] > 0)
    assert result["valid"] is True, result["unknown_reasons"]


def _acked_records(ops):
    return [(i, j) for i, op in enumerate(ops) if op["f"] == "send"
            for j, s in enumerate(op["sends"]) if s[2] is not None]


def lose(ops, data):
    """An acknowledged record vanishes from the log: no read returns it any more (a
    ``lost-write``, or ``unseen`` when it was the last record of its key)."""
    i, j = data.draw(st.sampled_from(_acked_records(ops)))
    k, v, _ = ops[i]["sends"][j]
    for op in ops:
        if op["f"] == "poll" and k in op["read"]:
            op["read"][k] = [r for r in op["read"][k] if r[1] != v]
        if op["f"] == "final" and op["key"] == k:
            op["read"] = [r for r in op["read"] if r[1] != v]
    return "lost-write", "unseen"


def duplicate(ops, data):
    """A record is appended twice (a retry without idempotence)."""
    finals = [op for op in ops if op["f"] == "final" and op["read"]]
    final = data.draw(st.sampled_from(finals))
    o, v = data.draw(st.sampled_from(final["read"]))
    final["read"].append((final["end"], v))
    final["end"] += 1
    return ("duplicate",)


def rewrite(ops, data):
    """Two reads disagree on the value at one offset."""
    polls = [op for op in ops if op["f"] == "poll" and op["read"]]
    poll = data.draw(st.sampled_from(polls))
    k = data.draw(st.sampled_from(sorted(poll["read"])))
    o, _ = poll["read"][k][0]
    poll["read"][k][0] = (o, 10**9)
    return ("inconsistent-offsets",)


def wrongly_failed(ops, data):
    """An ``ok`` send op whose record is in the log is recorded as ``fail``."""
    oks = [op for op in ops if op["f"] == "send" and op["type"] == "ok"]
    op = data.draw(st.sampled_from(oks))
    op["type"] = "fail"
    for s in op["sends"]:
        s[2] = None
    return ("G1a",)


MUTATIONS = {"lose": lose, "duplicate": duplicate, "rewrite": rewrite, "fail": wrongly_failed}


@pytest.mark.spark
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@settings(max_examples=2, **SETTINGS)
@given(ops=simulations(), data=st.data())
def test_one_seeded_mutation_is_found(spark, tmp_path, mutation, ops, data) -> None:
    ops = copy.deepcopy(ops)
    assume(_acked_records(ops) and any(op["f"] == "poll" and op["read"] for op in ops))
    assume(any(op["f"] == "send" and op["type"] == "ok" for op in ops))
    expected = MUTATIONS[mutation](ops, data)
    result = check(build(ops), tmp_path, "mutated")
    assert set(expected) & set(result["violations"]), (mutation, result["anomaly_types"])
    assert result["valid"] is False
