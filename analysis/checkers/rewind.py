"""A consumer that does not rewind after an aborted transaction: ``no-rewind-after-abort``.

Kafka's exactly-once consume-transform-produce loop (KIP-98, KIP-447; the
``KafkaProducer`` javadoc: after an abort the application resets the consumer to the last
committed positions) re-reads what an aborted transaction consumed: the workload seeks every
assigned partition back to its committed offset after each abort (``workloads/client.py``
``_rewind``), and records each target in a ``seek`` event of the aborted op. The records
that transaction read at or above that target are still in the log, so the process's next
read of the key must begin at or below the first of them. A consumer whose position stays
where the aborted transaction left it (KAFKA-17582, "unpredictable consumer position after
transaction abort"; a fetch in flight across the seek) reads on above it instead: what the
aborted transaction consumed is then never processed by that process.

The poll-order checkers do not see this: a seek resets their comparison. Here only what
else moves a consumer does (an assign or subscribe op, a rebalance event of the key); a
process that never reads the key again, or an abort without a seek of the key, claims
nothing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases
from kafka_chaos.analysis.checkers.polls import position, without_resets
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History, is_f, is_type

NAME = "no-rewind-after-abort"
#: Events that move a consumer's position other than the abort's own seek.
_MOVES = ("assigned", "revoked", "lost")


def unrewound(h: History, v: Versions) -> DataFrame:
    """The cases of ``no-rewind-after-abort``, one per aborted transaction and key.

    Each process's reads of a key are grouped by op; an op that is a transaction ending
    ``fail`` (aborted) with a ``seek`` event of the key is paired with the process's next op
    that read the key, and is a case when that op's first read is above the first record at
    or above the seek's target that the aborted transaction read, with no assign or
    subscribe op and no rebalance event of the key between them.

    Examples: ``process, key, seek_to`` (the seek's offset), ``aborted_from`` (the first
    offset at or above it the aborted transaction read), ``offset`` (where the next read
    began), ``op_indexes`` (the aborted op, the next one).
    """
    seeks = (h.events.where((F.col("kind") == "seek") & F.col("offset").isNotNull())
             .groupBy("process", "op", "key").agg(F.max("offset").alias("seek_to")))
    reread = (v.reads.where(is_f("f", "txn") & is_type("type", "fail"))
              .join(seeks, ["process", "op", "key"])
              .where(F.col("offset") >= F.col("seek_to"))
              .groupBy("process", "op", "key")
              .agg(F.min("offset").alias("aborted_from"), F.first("seek_to").alias("seek_to")))
    per_op = (v.reads.groupBy("process", "key", "op")
              .agg(F.min(F.struct("pos", "rec", "offset")).alias("first"),
                   F.max(F.struct("pos", "rec")).alias("last")))
    w = Window.partitionBy("process", "key").orderBy("op")
    pairs = (per_op.select("process", "key", F.col("op").alias("prev_op"),
                           F.col("last.pos").alias("prev_pos"),
                           F.col("last.rec").alias("prev_rec"),
                           F.lead("op").over(w).alias("op"),
                           F.lead("first").over(w).alias("next"))
             .join(reread.withColumnRenamed("op", "prev_op"), ["process", "key", "prev_op"])
             .where(F.col("op").isNotNull() & (F.col("next.offset") > F.col("aborted_from")))
             .select("process", "key", "prev_op", "prev_pos", "prev_rec", "op",
                     F.col("next.pos").alias("pos"), F.col("next.rec").alias("rec"),
                     "seek_to", "aborted_from", F.col("next.offset").alias("offset")))
    is_sub = F.col("f").isin("assign", "subscribe")
    op_resets = (h.ops.where(is_sub)
                 .select("process", position("op", F.lit(-1), F.lit(-1)).alias("reset")))
    kept = without_resets(pairs, op_resets, ["process"])
    if h.rows.get("events", 1):
        moves = (h.events.where(F.col("kind").isin(*_MOVES))
                 .select("process", "key", position("op", "pos", F.lit(-1)).alias("reset")))
        kept = without_resets(kept, moves, ["process", "key"])
    return cases(kept.withColumn("kind", F.lit(NAME)), "kind", ["process", "key", "prev_op"],
                 ["process", "key", "seek_to", "aborted_from", "offset",
                  F.array("prev_op", "op").alias("op_indexes")],
                 at(key="key", lo="prev_op", hi="op"))
