"""Checkers on the offset order of each partition: ``duplicate``, ``inconsistent-offsets``,
``nonmonotonic-send``.

Source: Jepsen's Kafka workload, ``jepsen.tests.kafka`` (jepsen-io/jepsen,
``jepsen/src/jepsen/tests/kafka.clj``): ``version-orders`` (whose ``:errors`` are reported as
``:inconsistent-offsets``), ``duplicate-cases`` and ``nonmonotonic-send-cases``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.checkers.common import MAX_OPS_PER_EXAMPLE, summarize


def observations(sends: DataFrame, reads: DataFrame) -> DataFrame:
    """Every (partition, offset, value) claim, one row per claim.

    Columns ``key, partition, offset, value, op_index``: each record of an ``ok`` poll
    (``op_index`` = the poll's completion index) and each ``ok`` send whose ack reported an
    offset (``op_index`` = the send's completion index). Jepsen builds its version orders the
    same way: from polls, and from sends "when we can prove their effects were visible" (ok).
    """
    acked = (sends.where((F.col("type") == "ok") & F.col("offset").isNotNull())
             .select("key", "partition", "offset", "value", F.col("index").alias("op_index")))
    polled = reads.select("key", "partition", "offset", "value",
                          F.col("poll_index").alias("op_index"))
    return acked.unionByName(polled)


def _sorted_set(col: str, limit: int | None = None) -> Column:
    s = F.array_sort(F.collect_set(col))
    return F.slice(s, 1, limit) if limit else s


def duplicates(sends: DataFrame, reads: DataFrame) -> dict[str, Any]:
    """Count ``duplicate``: one value at more than one distinct offset of a partition.

    Rule (Jepsen ``duplicate-cases``): "cases where a single value appears at more than one
    offset in a key", from the version order, which combines ok polls' records and ok sends'
    acked offsets (``observations``). Values are unique per run, so any second offset is a
    second copy of the message in the log (e.g. a producer retry without idempotence).

    Args:
        sends, reads: ``History.sends`` and ``History.reads`` (``analysis.load``).

    Returns:
        ``{"count": n, "examples": [...]}``; one per (partition, value), each with ``key,
        partition, value, offsets`` (sorted) and ``op_indexes`` (ops that saw it, first 10).
    """
    cases = (observations(sends, reads)
             .groupBy("partition", "value")
             .agg(F.min("key").alias("key"),
                  _sorted_set("offset").alias("offsets"),
                  _sorted_set("op_index", MAX_OPS_PER_EXAMPLE).alias("op_indexes"))
             .where(F.size("offsets") > 1)
             .select("key", "partition", "value", "offsets", "op_indexes"))
    return summarize(cases, ["partition", "value"])


def inconsistent_offsets(sends: DataFrame, reads: DataFrame) -> dict[str, Any]:
    """Count ``inconsistent-offsets``: one (partition, offset) observed with several values.

    Rule (Jepsen ``version-orders`` ``:errors``, analysis step 2): "We verify that all sends and
    polls agree on the value for a given key and offset ... If we find divergence, we know that
    Kakfa [sic] disagreed about the value at some offset." Observations are ok polls' records and ok
    sends' acked offsets together (``observations``): a send acked at offset o while a poll
    reads another value at o counts, as does two polls disagreeing (e.g. a log truncated and
    rewritten after an unclean leader election).

    Args:
        sends, reads: ``History.sends`` and ``History.reads`` (``analysis.load``).

    Returns:
        ``{"count": n, "examples": [...]}``; one per (partition, offset), each with ``key,
        partition, offset, values`` (sorted) and ``op_indexes`` (first 10).
    """
    cases = (observations(sends, reads)
             .groupBy("partition", "offset")
             .agg(F.min("key").alias("key"),
                  _sorted_set("value").alias("values"),
                  _sorted_set("op_index", MAX_OPS_PER_EXAMPLE).alias("op_indexes"))
             .where(F.size("values") > 1)
             .select("key", "partition", "offset", "values", "op_indexes"))
    return summarize(cases, ["partition", "offset"])


def nonmonotonic_sends(sends: DataFrame) -> dict[str, Any]:
    """Count ``nonmonotonic-send``: a process's next ok send to a partition got no higher offset.

    Rule (Jepsen ``nonmonotonic-send-cases``): "checks each process's operations sequentially,
    looking for cases where a single process's sends to a given key go backwards relative to
    the version order" (or stay in place). Here: for each process and partition, consecutive
    ``ok`` sends in completion order with ``offset_next <= offset_prev``. Sends whose ack had
    no offset are skipped, as Jepsen skips values missing from its version order. A process
    runs one op at a time, so completion order is also its invoke order.

    Args:
        sends: ``History.sends`` (``analysis.load``).

    Returns:
        ``{"count": n, "examples": [...]}``; one per offending pair, each with ``process, key,
        partition, values, offsets, op_indexes`` (completion indexes), previous send first.
    """
    w = Window.partitionBy("process", "partition").orderBy("index")
    acked = sends.where((F.col("type") == "ok") & F.col("offset").isNotNull())
    prev = {c: F.lag(c).over(w) for c in ("value", "offset", "index")}
    cases = (acked.select("process", "key", "partition", "value", "offset", "index",
                          *(v.alias(f"prev_{c}") for c, v in prev.items()))
             .where(F.col("prev_offset").isNotNull() & (F.col("offset") <= F.col("prev_offset")))
             .select("process", "key", "partition",
                     F.array("prev_value", "value").alias("values"),
                     F.array("prev_offset", "offset").alias("offsets"),
                     F.array("prev_index", "index").alias("op_indexes"),
                     "index"))
    result = summarize(cases, ["index"])
    for example in result["examples"]:
        del example["index"]
    return result
