"""What each consumer read, in order: the read stream, the ranges reads covered, and the poll
order anomalies ``poll-skip``, ``nonmonotonic-poll``, ``int-poll-skip``, ``int-nonmonotonic-poll``.

Source: Jepsen's ``jepsen.tests.kafka``: ``poll-skip+nonmonotonic-cases`` (a process's
consecutive ops reading a key: the first value read by an op against the last one read by the
previous op) and ``int-poll-skip+nonmonotonic-cases`` (consecutive reads of a key inside one op).
A *skip* is a jump of more than one position in the key's version order (records the consumer
passed over); *nonmonotonic* is a step back or in place.

A consumer's reads are compared only within a *segment*: its position is legitimately moved by
``assign``/``subscribe`` ops, by rebalance and seek events of that key (Jepsen ignores keys in an
op's rebalance log), and after an op that did not complete ``ok`` (an aborted transaction seeks
back). Final reads are left out: they are fresh consumers reading whole partitions, and a gap in
them is a ``lost-write``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import MOP_FS, History

_ORDER = ("op", "pos", "rec")
_RESETS = ("assigned", "revoked", "lost", "seek")


def read_stream(h: History, v: Versions) -> DataFrame:
    """Non-final reads with their predecessor in the same segment: ``process, key, op, pos,
    rec, offset, value, idx`` (the offset's version-order position), ``prev_op, prev_offset,
    prev_value, prev_idx`` (NULL for a segment's first read). Cached by the caller.

    One sort of the reads by process and key: segment boundaries go into that order as reset
    rows (rebalance and seek events at their position; ``assign``/``subscribe`` ops before
    their op and ops not ``ok`` after theirs, for every key), and a read right after a reset
    starts a segment.
    """
    reads = (h.reads.where(~F.col("final")).join(v.order, ["key", "offset"], "left")
             .select("process", "key", "op", "pos", "rec", "offset", "value", "idx",
                     F.lit(0).alias("reset")))
    none = F.lit(None).cast("long")
    is_sub = F.col("f").isin("assign", "subscribe")
    after_bad = F.col("f").isin(*MOP_FS) & (F.col("type") != "ok")
    op_resets = (h.ops.where(is_sub | after_bad)
                 .select("process", "op", F.when(is_sub, -1).otherwise(2**31 - 1).alias("pos"))
                 .crossJoin(h.reads.select("key").distinct()))
    resets = (h.events.where(F.col("kind").isin(*_RESETS)).select("process", "key", "op", "pos")
              .unionByName(op_resets)
              .select("process", "key", "op", "pos", F.lit(-1).alias("rec"), none.alias("offset"),
                      none.alias("value"), none.alias("idx"), F.lit(1).alias("reset")))
    w = Window.partitionBy("process", "key").orderBy(*_ORDER)
    lagged = reads.unionByName(resets).select(
        "*", *(F.lag(c).over(w).alias(f"prev_{c}") for c in ("reset", "op", "offset", "value",
                                                              "idx")))
    follows = F.col("prev_reset") == 0  # NULL (first row) or 1 (a reset) start a segment
    return lagged.where(F.col("reset") == 0).select(
        "process", "key", "op", "pos", "rec", "offset", "value", "idx",
        *(F.when(follows, F.col(f"prev_{c}")).alias(f"prev_{c}")
          for c in ("op", "offset", "value", "idx")))


def covered_runs(stream: DataFrame) -> DataFrame:
    """``key, lo, hi``: offsets a consumer read straight through (inclusive), one row per run.

    A run is a stretch of a segment's reads whose version-order positions follow each other
    (``delta == 1``): the consumer claims it delivered everything between ``lo`` and ``hi``
    (Kafka consumers deliver a partition in offset order), so an acknowledged write in
    ``[lo, hi]`` that nobody read is a ``lost-write`` (its offset was read with another
    value). A skip or a step back ends the run: what a consumer passed over is its
    ``poll-skip``, never a lost write.
    """
    new_run = (F.col("prev_idx").isNull() | F.col("idx").isNull()
               | ((F.col("idx") - F.col("prev_idx")) != 1)).cast("int")
    w = Window.partitionBy("process", "key").orderBy(*_ORDER)
    return (stream.withColumn("run", F.sum(new_run).over(w.rowsBetween(Window.unboundedPreceding, 0)))
            .groupBy("process", "key", "run")
            .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
            .select("key", "lo", "hi"))


def poll_order(stream: DataFrame) -> DataFrame:
    """The cases of ``poll-skip``, ``nonmonotonic-poll``, ``int-poll-skip`` and
    ``int-nonmonotonic-poll``.

    One case per consecutive pair of reads of a key in a segment whose version-order positions
    differ by ``delta != 1``; ``int-`` when both reads are in one op. Examples: ``process, key,
    offsets, values, delta, op_indexes`` (invoke indexes of the two ops), ``skipped`` (how many
    positions were passed over, for skips).
    """
    delta = F.col("idx") - F.col("prev_idx")
    same = F.col("op") == F.col("prev_op")
    kind = (F.when(delta > 1, F.when(same, "int-poll-skip").otherwise("poll-skip"))
            .when(delta < 1, F.when(same, "int-nonmonotonic-poll").otherwise("nonmonotonic-poll")))
    pairs = stream.where(F.col("prev_idx").isNotNull() & F.col("idx").isNotNull())
    return cases(pairs, kind, ["op", "pos", "rec"],
                 ["process", "key", F.array("prev_offset", "offset").alias("offsets"),
                  F.array("prev_value", "value").alias("values"), delta.alias("delta"),
                  F.array("prev_op", "op").alias("op_indexes"),
                  F.greatest(delta - 1, F.lit(0)).alias("skipped")])
