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

from kafka_chaos.analysis.checkers.common import at, cases
from kafka_chaos.analysis.checkers.versions import LITERALS, Versions
from kafka_chaos.analysis.load import is_f, is_type, type_name


def invisible_reads(v: Versions) -> DataFrame:
    """The cases of ``G1a`` and ``precommitted-read``, one per (reading op, key, value).

    ``G1a`` claims are few (a failed write that an ``ok`` op read: ``Versions.obs``), so only
    they meet the reads: collected first (one small job), they filter the reads as literals
    (``Versions.reads_of``); a precommitted read is a transaction's read of its own write, so
    only transactions' reads meet their writes.

    Examples: ``key, value, offset, writer`` (invoke index of the sending op), ``writer_type,
    reader`` (invoke index of the reading op), ``reader_final``.
    """
    failed = (v.obs.where(is_type("w_type", "fail") & F.col("read_ok"))
              .select("key", "value", "w_op", "w_type"))
    # usually none or a handful: collected first, they filter the reads as literals
    rows = failed.select("key", "value").limit(LITERALS + 1).collect()
    g1a = (v.reads_of(failed, ["key", "value"], "offset", "op", "type",
                      rows=rows if len(rows) <= LITERALS else None)
           .where(is_type("type", "ok"))
           .withColumn("kind", F.lit("G1a")))
    own = v.writers.where(is_f("w_f", "txn")).drop("w_f")
    pre = (v.reads.where(is_f("f", "txn")).withColumn("final", F.lit(False))
           .join(own.hint("shuffle_hash"), ["key", "value"])
           .where(F.col("w_op") == F.col("op")).withColumn("kind", F.lit("precommitted-read")))
    cols = ["kind", "key", "value", "offset", "op", "final", "w_op", "w_type"]
    found = (g1a.select(*cols).unionByName(pre.select(*cols))
             .groupBy("kind", "op", "key", "value")
             .agg(F.min("offset").alias("offset"), F.max("final").alias("reader_final"),
                  F.first("w_op").alias("writer"),
                  F.first(type_name("w_type")).alias("writer_type")))
    return cases(found, "kind", ["op", "key", "value"],
                 ["key", "value", "offset", "writer", "writer_type",
                  F.col("op").alias("reader"), "reader_final"],
                 at(key="key", lo="writer", hi="op", writer="writer"))
