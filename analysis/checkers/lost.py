"""Acknowledged sends that no poll read: ``lost-write`` and ``unseen``.

Every ``ok`` send falls in exactly one of four classes, so counts add up:

1. read: some ``ok`` poll of its partition returned its value;
2. ``lost-write``: not read, although ``ok`` polls of its partition read an offset >= its offset;
3. ``unseen``: not read, not a lost write, and its key has an ``ok`` final poll;
4. not judged: not read, not a lost write, and no ``ok`` final poll of its key exists (the
   result is then "unknown", not valid: see ``analysis.check``).

Source: Jepsen's Kafka workload, ``jepsen.tests.kafka`` (jepsen-io/jepsen,
``jepsen/src/jepsen/tests/kafka.clj``): analysis step 3 and ``lost-write-cases``, and ``unseen``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis.checkers.common import summarize_by


def _example_columns() -> list[str | Column]:
    # A function, not a constant: Column objects need a running SparkContext.
    return ["key", "value", "partition", "offset", "process", "invoke_index",
            F.col("index").alias("send_index"), "max_read_offset", "max_read_poll_index"]


def _unread_ok_sends(sends: DataFrame, reads: DataFrame) -> DataFrame:
    """Ok sends whose value no ok poll of their partition returned, with the partition's highest
    read offset (``max_read_offset``, NULL if never read) and the first poll that read it."""
    read_values = reads.select("partition", "value").distinct()
    # max over (offset, -poll_index) picks the highest offset and, among polls reading it, the
    # earliest: the poll that proves the lost write should have been visible.
    highest = (reads.groupBy("partition")
               .agg(F.max(F.struct("offset", (-F.col("poll_index")).alias("neg"))).alias("top"))
               .select("partition", F.col("top.offset").alias("max_read_offset"),
                       (-F.col("top.neg")).alias("max_read_poll_index")))
    return (sends.where(F.col("type") == "ok")
            .join(read_values, ["partition", "value"], "left_anti")
            .join(highest, "partition", "left"))


def _is_lost() -> Column:
    return (F.col("offset").isNotNull() & F.col("max_read_offset").isNotNull()
            & (F.col("offset") <= F.col("max_read_offset")))


def _classified(sends: DataFrame, reads: DataFrame, polls: DataFrame) -> DataFrame:
    """Unread ok sends with a ``kind`` column: ``lost-write``, ``unseen`` or NULL (not judged);
    the one place the rules of this module are applied."""
    final_keys = (polls.where(F.col("final")).select("key").distinct()
                  .withColumn("has_final", F.lit(True)))
    kind = (F.when(_is_lost(), F.lit("lost-write"))
            .when(F.col("has_final").isNotNull(), F.lit("unseen")))
    return (_unread_ok_sends(sends, reads)
            .join(final_keys, "key", "left")
            .select(kind.alias("kind"), *_example_columns()))


def lost_writes(sends: DataFrame, reads: DataFrame, polls: DataFrame) -> dict[str, Any]:
    """Count ``lost-write``: acknowledged sends below the highest read offset, never read.

    Rule (Jepsen ``lost-write-cases``): "For each key, we take the highest observed offset, and
    then check that every :ok :send operation with an equal or lower offset was *also* read by
    at least one consumer. If we find one, we know a write was lost!" Here: an ``ok`` send
    (key k, value v, offset o) such that no ``ok`` poll of its partition returned v, while some
    ``ok`` poll of that partition returned a record at offset >= o. Partition == key
    (``docs/history-format.md``). Sends whose ack carried no offset are never lost writes (no
    offset to compare); they can still be ``unseen``.

    Jepsen compares positions in a per-key version order (dense indexes, because transaction
    markers leave offset gaps); with no transactions, raw offsets order the log the same way.
    Only ``ok`` sends count: ``info``/``fail``/pending sends may never have happened.

    Args:
        sends, reads, polls: ``History.sends``, ``.reads``, ``.polls`` (``analysis.load``).

    Returns:
        ``{"count": n, "examples": [...]}``; one per lost send, each with ``key, value,
        partition, offset, process, invoke_index, send_index`` (op indexes of the send) and
        ``max_read_offset, max_read_poll_index`` (the poll that read past it), by send index.
    """
    return unread_writes(sends, reads, polls)["lost-write"]


def unseen(sends: DataFrame, reads: DataFrame, polls: DataFrame) -> dict[str, Any]:
    """Count ``unseen``: acknowledged sends no poll read, above the highest read offset.

    Rule: an ``ok`` send whose value no ``ok`` poll of its partition returned, which is not a
    ``lost-write`` (its offset is above every offset read from its partition, or its ack had no
    offset), and whose key has an ``ok`` final poll (``final: true``: a read of the whole
    partition after the nemesis healed). Such a write was acknowledged yet is absent from a log
    read to its end: typically the log was truncated below its offset (e.g. unclean leader
    election).

    Jepsen's ``unseen`` ("acknowledged, but not polled by any client", taken at the end of the
    history, and an error type when non-empty) also contains what it reports as lost writes;
    here the two are disjoint so that their counts add up. Jepsen's final reads poll until they
    catch up; keys whose final poll failed or is missing are left out here (their unread writes
    above the highest read offset are not judged) and make the result "unknown" instead, since
    the run simply did not look.

    Args:
        sends, reads, polls: ``History.sends``, ``.reads``, ``.polls`` (``analysis.load``).

    Returns:
        ``{"count": n, "examples": [...]}``; examples as for ``lost_writes``
        (``max_read_offset`` is NULL when nothing of the partition was read).
    """
    return unread_writes(sends, reads, polls)["unseen"]


def unread_writes(sends: DataFrame, reads: DataFrame,
                  polls: DataFrame) -> dict[str, dict[str, Any]]:
    """``{"lost-write": {...}, "unseen": {...}}``, as ``lost_writes`` and ``unseen``, in one
    Spark job (both classify the same unread sends; ``analysis.check`` calls this)."""
    cases = _classified(sends, reads, polls).where(F.col("kind").isNotNull())
    return summarize_by(cases, "kind", ["lost-write", "unseen"], ["send_index"])
