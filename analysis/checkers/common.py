"""What every checker produces: anomaly *cases* as rows, summarised as plain JSON-able data.

A checker returns a DataFrame of cases with three columns: ``kind`` (the anomaly name),
``ord`` (``array<bigint>``: the order examples are picked in, so results are deterministic) and
``ex`` (the example as JSON text). ``summarize`` turns the cases of any number of checkers into
``{kind: {"count": n, "examples": [...]}}`` in one Spark job: per-job overhead, not data,
dominates the analysis of a small history.
"""

from __future__ import annotations

from typing import Any, Iterable

import orjson
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: Examples per anomaly type: enough to start debugging, small enough to print.
MAX_EXAMPLES = 5

#: Op-index lists inside one example are cut to this many (a value may be read by every poll).
MAX_OPS_PER_EXAMPLE = 10


def cases(df: DataFrame, kind: Column | str, ord: list[Column | str],
          example: list[Column | str]) -> DataFrame:
    """The ``kind, ord, ex`` rows of ``df``'s anomalies (rows whose ``kind`` is NULL are not
    anomalies and are dropped). ``ord`` columns must be integers; ``example`` columns become
    the example's fields, NULLs kept."""
    kind_col = F.col(kind) if isinstance(kind, str) else kind
    return (df.select(kind_col.alias("kind"),
                      F.array(*(F.col(c).cast("long") if isinstance(c, str) else c.cast("long")
                                for c in ord)).alias("ord"),
                      F.to_json(F.struct(*example), {"ignoreNullFields": "false"}).alias("ex"))
            .where(F.col("kind").isNotNull()))


def no_cases(spark) -> DataFrame:
    """An empty DataFrame of cases (a checker with nothing to look at). Built from
    ``range(0)``: a DataFrame of local Python rows, even of none, starts Spark's Python worker
    processes when it is computed (1.2 s the first time in a session, measured alone)."""
    return spark.range(0).select(F.lit(None).cast("string").alias("kind"),
                                 F.lit(None).cast("array<bigint>").alias("ord"),
                                 F.lit(None).cast("string").alias("ex"))


def summarize(all_cases: Iterable[DataFrame], kinds: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{kind: {"count": n, "examples": [dict, ...]}}`` for every kind in ``kinds`` (count 0
    when no case has it), from the union of ``all_cases``; examples are the first
    ``MAX_EXAMPLES`` cases of each kind in ``ord`` order. One Spark job."""
    frames = list(all_cases)
    out: dict[str, dict[str, Any]] = {k: {"count": 0, "examples": []} for k in kinds}
    if not frames:
        return out
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    by_kind = Window.partitionBy("kind")
    # Windows gather each kind's cases in one partition, which is fine: anomaly lists are far
    # smaller than the history.
    rows = (union
            .select("kind", "ex", F.count(F.lit(1)).over(by_kind).alias("n"),
                    F.row_number().over(by_kind.orderBy("ord", "ex")).alias("rank"))
            .where(F.col("rank") <= MAX_EXAMPLES)
            .orderBy("kind", "rank")
            .collect())
    for row in rows:
        found = out.setdefault(row["kind"], {"count": 0, "examples": []})
        found["count"] = row["n"]
        found["examples"].append(orjson.loads(row["ex"]))
    return out
