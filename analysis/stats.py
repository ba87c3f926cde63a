"""Op counts and final-read coverage of a loaded history (not anomalies: inputs to validity)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History
from kafka_chaos.history import MONITOR, NEMESIS

_OUTCOMES = ("ok", "fail", "info", "pending")


def count_ops(h: History, v: Versions) -> tuple[dict[str, Any], list[int], set[str]]:
    """Op counts, the keys whose writes cannot be fully judged, and the nemesis ``f``s that
    completed ``ok``. One Spark job.

    Returns ``(stats, keys_without_final_read, nemesis_ok)``:

    ``stats`` = ``{"ops": lines, "by_f": {f: {"ok", "fail", "info", "pending"}}, "nemesis": n,
    "monitor": n, "acked_sends": n, "records_read": n, "keys": n}``: ``by_f`` counts client
    operations (invoke + completion) by how they ended (``pending``: invoked, never completed,
    read as ``info``), as the columnar copy counted them (``History.counts``); ``acked_sends``
    the acknowledged sends (``acked`` in ``Versions.sends``), ``records_read`` the records all
    polls returned (counted when the columnar copy was written), ``keys`` the distinct keys
    sent to or read.

    ``keys_without_final_read``: keys with an acknowledged send but no ``ok`` final read that
    reached the end of the partition;
    without one, writes above a key's highest read cannot be judged (a poller may just not have
    got there yet), so the result cannot be ``valid: true``.
    """
    null = F.lit(None).cast("long")
    # client ops are counted in the copy's meta (``History.counts``): only the nemesis's and
    # the monitor's are scanned (grouping every op by three strings took 5 s of a 10 M-op
    # history's task time)
    parts = [
        h.pairs.where(F.col("process").isin(NEMESIS, MONITOR))
        .groupBy(F.col("process").alias("what"), "f", "type")
        .agg(null.alias("key"), F.count(F.lit(1)).alias("n")),
        v.sends.where(F.col("acked")).groupBy("key").agg(F.count(F.lit(1)).alias("n"))
        .select(F.lit("acked").alias("what"), F.lit(None).cast("string").alias("f"),
                F.lit(None).cast("string").alias("type"), "key", "n"),
        v.obs.where(F.col("read")).groupBy("key").agg(F.count(F.lit(1)).alias("n"))
        .select(F.lit("read").alias("what"), F.lit(None).cast("string").alias("f"),
                F.lit(None).cast("string").alias("type"), "key", "n"),
        h.ranges.where(F.col("eof"))
        .select(F.lit("final").alias("what"), F.lit(None).cast("string").alias("f"),
                F.lit(None).cast("string").alias("type"), "key",
                F.lit(1).cast("long").alias("n")).distinct(),
    ]
    rows = parts[0].unionByName(parts[1]).unionByName(parts[2]).unionByName(parts[3]).collect()
    by_f = {f: {**dict.fromkeys(_OUTCOMES, 0), **types} for f, types in h.counts.items()}
    nemesis_n, monitor_n, nemesis_ok = 0, 0, set()
    keys: dict[str, dict[int, int]] = {"acked": {}, "read": {}, "final": {}}
    for r in rows:
        if r["what"] == NEMESIS:
            nemesis_n += r["n"]
            if r["type"] == "ok":
                nemesis_ok.add(r["f"])
        elif r["what"] == MONITOR:
            monitor_n += r["n"]
        else:
            keys[r["what"]][r["key"]] = r["n"]
    stats = {"ops": h.n_ops, "by_f": dict(sorted(by_f.items())), "nemesis": nemesis_n,
             "monitor": monitor_n, "acked_sends": sum(keys["acked"].values()),
             "records_read": h.records_read,
             "keys": len(keys["acked"].keys() | keys["read"].keys())}
    return stats, sorted(keys["acked"].keys() - keys["final"].keys()), nemesis_ok
