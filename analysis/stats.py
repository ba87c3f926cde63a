"""Op counts and final-read coverage of a loaded history (not anomalies: inputs to validity)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from analysis.load import History
from history import NEMESIS

_OUTCOMES = ("ok", "fail", "info", "pending")


def count_ops(h: History) -> tuple[dict[str, Any], list[int]]:
    """Op counts, and the keys whose writes cannot be fully judged. One Spark job.

    Returns ``(stats, keys_without_final_read)``:

    ``stats`` = ``{"ops": lines, "send": {"ok", "fail", "info", "pending"}, "poll": {same},
    "nemesis": n, "keys": n}``. ``send``/``poll`` count operations (invoke + completion) by how
    they ended; ``pending`` = invoked, never completed (read as ``info``, see
    ``docs/history-format.md``). ``nemesis`` counts nemesis operations; ``keys`` the distinct
    keys client sends and polls targeted.

    ``keys_without_final_read``: keys with an ``ok`` send but no ``ok`` poll marked ``final``,
    ascending. Without a final read, writes above a key's highest read offset cannot be judged
    (a poller may just not have got there yet), so the result cannot be ``valid: true``.
    """
    kind = F.when(F.col("process") == NEMESIS, F.lit(NEMESIS)).otherwise(F.col("f"))
    final = F.coalesce(F.col("done_v.final"), F.lit(False)) & (F.col("type") == "ok")
    # Grouped rows number at most keys x 2 f x 4 types x 2, so they are summed up in Python.
    rows = (h.pairs.groupBy(kind.alias("kind"), "key", "type", final.alias("final"))
            .count().collect())
    stats: dict[str, Any] = {"ops": h.n_ops}
    for f in ("send", "poll"):
        stats[f] = {t: sum(r["count"] for r in rows if (r["kind"], r["type"]) == (f, t))
                    for t in _OUTCOMES}
    stats["nemesis"] = sum(r["count"] for r in rows if r["kind"] == NEMESIS)
    client = [r for r in rows if r["kind"] != NEMESIS]
    stats["keys"] = len({r["key"] for r in client})
    sent = {r["key"] for r in client if (r["kind"], r["type"]) == ("send", "ok")}
    final_read = {r["key"] for r in client if r["kind"] == "poll" and r["final"]}
    return stats, sorted(sent - final_read)
