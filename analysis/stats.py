"""Op counts and final-read coverage of a loaded history (not anomalies: inputs to validity)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from analysis.load import History
from history import NEMESIS

_OUTCOMES = ("ok", "fail", "info")


def stats(h: History) -> dict[str, Any]:
    """Counts of the history's ops.

    Returns:
        ``{"ops": lines, "send": {"ok", "fail", "info", "pending"}, "poll": {same},
        "nemesis": n, "keys": n}``. ``send``/``poll`` count operations (invoke + completion) by
        how they ended; ``pending`` = invoked, never completed (read as ``info``, see
        ``docs/history-format.md``). ``nemesis`` counts nemesis operations (invokes); ``keys``
        the distinct keys that client sends and polls targeted.
    """
    kind = F.when(F.col("process") == NEMESIS, F.lit(NEMESIS)).otherwise(F.col("f"))
    lines = {(r["kind"], r["type"]): r["count"]
             for r in h.ops.groupBy(kind.alias("kind"), "type").count().collect()}
    out: dict[str, Any] = {"ops": h.n_ops}
    for f in ("send", "poll"):
        done = {t: lines.get((f, t), 0) for t in _OUTCOMES}
        out[f] = {**done, "pending": lines.get((f, "invoke"), 0) - sum(done.values())}
    out["nemesis"] = lines.get((NEMESIS, "invoke"), 0)
    out["keys"] = h.sends.select("key").union(h.polls.select("key")).distinct().count()
    return out


def keys_without_final_read(h: History) -> list[int]:
    """Keys with at least one ``ok`` send but no ``ok`` poll marked ``final``, ascending.

    Without a final read of a key, writes above its highest read offset cannot be judged (a
    poller may simply not have got there yet), so the result cannot be ``valid: true``.
    """
    sent = h.sends.where(F.col("type") == "ok").select("key").distinct()
    final = h.polls.where(F.col("final")).select("key").distinct()
    return [r["key"] for r in sent.join(final, "key", "left_anti").orderBy("key").collect()]
