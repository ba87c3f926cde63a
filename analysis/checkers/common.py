"""What every checker produces: anomaly *cases* as rows, summarised as plain JSON-able data.

A checker returns a DataFrame of cases with four columns: ``kind`` (the anomaly name),
``ord`` (``array<bigint>``: the order examples are picked in, so results are deterministic),
``ex`` (the example as JSON text) and ``at`` (``AT``: where and when the case happened, for the
promises table's per-case judgement, ``analysis.judge``). ``summarize`` turns the cases of any
number of checkers into ``{kind: {"count": n, "examples": [...]}}`` in one Spark job: per-job
overhead, not data, dominates the analysis of a small history.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable

import orjson
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: Examples per anomaly type: enough to start debugging, small enough to print.
MAX_EXAMPLES = 5

#: Op-index lists inside one example are cut to this many (a value may be read by every poll).
MAX_OPS_PER_EXAMPLE = 10

#: Most cases of one anomaly collected for a judgement case by case (``summarize``'s
#: ``every``); the rest are counted, not judged, and the verdict is then unknown.
MAX_JUDGED = 200_000

#: The fields of a case's ``at`` (all bigint, NULL when unknown): ``key``; ``lo`` and ``hi``,
#: the history indexes that bound its window (the invoke of the earliest op it involves, or a
#: write's completion, and the op whose invoke or completion ends it: ``analysis.judge``);
#: ``write_inv``, ``write_done``: the invoke and completion of the send it concerns;
#: ``writer``: the invoke index of the op that wrote the value.
AT = ("key", "lo", "hi", "write_inv", "write_done", "writer")


def _col(c: Column | str) -> Column:
    return F.col(c) if isinstance(c, str) else c


def at(**fields: Column | str | None) -> Column:
    """The ``at`` struct of a case from columns named by ``AT``'s fields (absent: NULL)."""
    return F.struct(*((F.lit(None) if fields.get(name) is None else _col(fields[name]))
                      .cast("long").alias(name) for name in AT))


def cases(df: DataFrame, kind: Column | str, ord: list[Column | str],
          example: list[Column | str], where: Column | None = None) -> DataFrame:
    """The ``kind, ord, ex, at`` rows of ``df``'s anomalies (rows whose ``kind`` is NULL are
    not anomalies and are dropped). ``ord`` columns must be integers; ``example`` columns
    become the example's fields, NULLs kept; ``where`` is the ``at`` struct (``at``)."""
    return (df.select(_col(kind).alias("kind"),
                      F.array(*(_col(c).cast("long") for c in ord)).alias("ord"),
                      F.to_json(F.struct(*example), {"ignoreNullFields": "false"}).alias("ex"),
                      (where if where is not None else at()).alias("at"))
            .where(F.col("kind").isNotNull()))


def no_cases(spark) -> DataFrame:
    """An empty DataFrame of cases (a checker with nothing to look at). Built from
    ``range(0)``: a DataFrame of local Python rows, even of none, starts Spark's Python worker
    processes when it is computed (1.2 s the first time in a session, measured alone)."""
    return spark.range(0).select(F.lit(None).cast("string").alias("kind"),
                                 F.lit(None).cast("array<bigint>").alias("ord"),
                                 F.lit(None).cast("string").alias("ex"), at().alias("at"))


def summarize(all_cases: Iterable[DataFrame], kinds: Iterable[str],
              every: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """``{kind: {"count": n, "examples": [dict, ...]}}`` for every kind in ``kinds`` (count 0
    when no case has it), from the union of ``all_cases``; examples are the first
    ``MAX_EXAMPLES`` cases of each kind in ``ord`` order. The kinds of ``every`` (judged case
    by case) also get ``"cases"``: ``[(example, at), ...]`` of their first ``MAX_JUDGED``
    cases in that order, ``at`` a dict of ``AT``'s fields. One Spark job."""
    frames = list(all_cases)
    out: dict[str, dict[str, Any]] = {k: {"count": 0, "examples": []} for k in kinds}
    for k in every:
        out.setdefault(k, {"count": 0, "examples": []})["cases"] = []
    if not frames:
        return out
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    by_kind = Window.partitionBy("kind")
    # Windows gather each kind's cases in one partition, which is fine: anomaly lists are far
    # smaller than the history.
    keep = F.col("rank") <= MAX_EXAMPLES
    if every:
        keep = keep | (F.col("kind").isin(*sorted(every)) & (F.col("rank") <= MAX_JUDGED))
    rows = (union
            .select("kind", "ex", "at", F.count(F.lit(1)).over(by_kind).alias("n"),
                    F.row_number().over(by_kind.orderBy("ord", "ex")).alias("rank"))
            .where(keep)
            .orderBy("kind", "rank")
            .collect())
    for row in rows:
        found = out.setdefault(row["kind"], {"count": 0, "examples": []})
        found["count"] = row["n"]
        example = orjson.loads(row["ex"])
        if row["rank"] <= MAX_EXAMPLES:
            found["examples"].append(example)
        if "cases" in found:
            found["cases"].append((example, row["at"].asDict()))
    return out
