"""Checkers on the offset order of each key: ``duplicate`` and ``inconsistent-offsets``.

Source: Jepsen's ``jepsen.tests.kafka`` (``jepsen/src/jepsen/tests/kafka.clj``):
``version-orders`` (whose ``:errors`` are reported as ``:inconsistent-offsets``) and
``duplicate-cases``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import MAX_OPS_PER_EXAMPLE, cases
from kafka_chaos.analysis.checkers.versions import Versions


def _sorted_set(col: str, limit: int | None = None) -> Column:
    s = F.array_sort(F.collect_set(col))
    return F.slice(s, 1, limit) if limit else s


def _observers(v: Versions, flagged: DataFrame, on: list[str]) -> DataFrame:
    """``key, <on>, op``: the reads and acknowledged sends behind the claims ``flagged``
    (few rows), for the examples' ``op_indexes``."""
    reads = v.reads_of(flagged, on, "op").drop("final")
    sends = (v.sends.where(F.col("acked") & F.col("offset").isNotNull()).select(*on, "op")
             .join(flagged.hint("shuffle_hash"), on))
    return reads.unionByName(sends)


def _one_with_many(v: Versions, found: DataFrame, one: str, plural: str,
                   kind: str) -> DataFrame:
    """Cases of ``kind``: ``found`` has ``key, <one>, <plural>`` for each (key, ``one``)
    observed with more than one value of what ``plural`` lists."""
    ops = (_observers(v, found.select("key", one), ["key", one])
           .groupBy("key", one).agg(_sorted_set("op", MAX_OPS_PER_EXAMPLE).alias("op_indexes")))
    return cases(found.join(ops, ["key", one], "left"), F.lit(kind), ["key", one],
                 ["key", one, plural, "op_indexes"])


def duplicates(v: Versions) -> DataFrame:
    """Count ``duplicate``: one value at more than one distinct offset of a key.

    Rule (Jepsen ``duplicate-cases``): "cases where a single value appears at more than one
    offset in a key", from the version order, which combines every poll's records and the
    acknowledged sends' offsets (``Versions.obs``). Values are unique per run, so any second
    offset is a second copy of the record in the log (e.g. a producer retry without
    idempotence).

    Returns the cases (``common.cases``); one per (key, value), each with ``key, value,
    offsets`` (sorted) and ``op_indexes`` (invoke indexes of ops that saw it, first 10).
    """
    found = (v.obs.where(F.col("dup")).groupBy("key", "value")
             .agg(_sorted_set("offset").alias("offsets")))
    return _one_with_many(v, found, "value", "offsets", "duplicate")


def inconsistent_offsets(v: Versions) -> DataFrame:
    """Count ``inconsistent-offsets``: one (key, offset) observed with several values.

    Rule (Jepsen ``version-orders`` ``:errors``, analysis step 2): "We verify that all sends and
    polls agree on the value for a given key and offset ... If we find divergence, we know that
    Kakfa [sic] disagreed about the value at some offset." A send acknowledged at offset o while
    a poll reads another value at o counts, as do two polls disagreeing (a log truncated and
    rewritten after an unclean leader election).

    Returns the cases (``common.cases``); one per (key, offset), each with ``key, offset,
    values`` (sorted) and ``op_indexes`` (first 10).
    """
    found = (v.obs.where(F.col("incons")).groupBy("key", "offset")
             .agg(_sorted_set("value").alias("values")))
    return _one_with_many(v, found, "offset", "values", "inconsistent-offsets")
