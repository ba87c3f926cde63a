"""What every checker returns: a count and a few examples, as plain JSON-able data."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: Examples per anomaly type: enough to start debugging, small enough to print.
MAX_EXAMPLES = 5

#: Op-index lists inside one example are cut to this many (a value may be read by every poll).
MAX_OPS_PER_EXAMPLE = 10


def summarize(cases: DataFrame, order_by: list[str | Column]) -> dict[str, Any]:
    """``{"count": n, "examples": [dict, ...]}`` for a DataFrame with one row per anomaly.

    Examples are the first ``MAX_EXAMPLES`` rows in ``order_by`` order (so results are
    deterministic), each row as a dict with its columns as keys.
    """
    return summarize_by(cases.withColumn("_kind", F.lit("")), "_kind", [""], order_by)[""]


def summarize_by(cases: DataFrame, kind: str, kinds: list[str],
                 order_by: list[str | Column]) -> dict[str, dict[str, Any]]:
    """Like ``summarize`` for cases of several anomaly types told apart by column ``kind``.

    Returns ``{k: {"count": n, "examples": [...]}}`` for every ``k`` in ``kinds`` (count 0 when
    no row has it); the ``kind`` column is left out of the examples.
    """
    # One Spark job for counts and examples together (count() then take() would be two, and
    # per-job overhead dominates on small histories). Windows gather each kind's cases in one
    # partition, which is fine: anomaly lists are far smaller than the history.
    by_kind = Window.partitionBy(kind)
    rows = (cases
            .select("*", F.count(F.lit(1)).over(by_kind).alias("_count"),
                    F.row_number().over(by_kind.orderBy(*order_by)).alias("_rank"))
            .where(F.col("_rank") <= MAX_EXAMPLES)
            .orderBy(kind, "_rank")
            .collect())
    out: dict[str, dict[str, Any]] = {k: {"count": 0, "examples": []} for k in kinds}
    for row in rows:
        example = row.asDict(recursive=True)
        k = example.pop(kind)
        out[k]["count"] = example.pop("_count")
        del example["_rank"]
        out[k]["examples"].append(example)
    return out
