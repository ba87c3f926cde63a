"""Reads of writes that should be invisible: ``G1a`` (aborted read) and ``precommitted-read``.

Source: Jepsen's ``jepsen.tests.kafka``: ``g1a-cases`` ("aborted reads, where a known-failed
write is nonetheless visible to a committed read": an ``ok`` poll or transaction returned a
value whose send ended ``fail``) and ``precommitted-read-cases`` ("a transaction which observed
its own writes ... in Kafka's model, sent values are supposed to be invisible to *all* pollers
until their producing txn commits"). Final reads count as committed reads, so a ``fail`` send
whose value is in the log is found too: the ``fail`` was wrong.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History


def invisible_reads(h: History, v: Versions) -> DataFrame:
    """The cases of ``G1a`` and ``precommitted-read``, one per (reading op, key, value).

    Examples: ``key, value, offset, writer`` (invoke index of the sending op), ``writer_type,
    reader`` (invoke index of the reading op), ``reader_final``.
    """
    reads = (h.reads.where((F.col("type") == "ok") | (F.col("f") == "txn"))
             .select("key", "value", "offset", F.col("op").alias("reader"),
                     F.col("type").alias("reader_type"), F.col("final").alias("reader_final"))
             .dropDuplicates(["reader", "key", "value"]))
    joined = reads.join(v.writers, ["key", "value"])
    kind = (F.when((F.col("writer_type") == "fail") & (F.col("reader_type") == "ok"), "G1a")
            .when(F.col("writer") == F.col("reader"), "precommitted-read"))
    return cases(joined, kind, ["reader", "key", "value"],
                 ["key", "value", "offset", "writer", "writer_type", "reader", "reader_final"])
