"""Version orders and acknowledged writes: what every other checker compares against.

Source: Jepsen's ``jepsen.tests.kafka`` (jepsen-io/jepsen, ``jepsen/src/jepsen/tests/kafka.clj``):
``version-orders`` (offsets -> values per key from every poll, and from sends "when we can prove
their effects were visible"), ``must-have-committed?`` and ``writer-of``. Positions in a key's
version order are *dense* indexes over the offsets that hold a value, so the offset gaps that
transaction markers leave are never mistaken for skipped records (and no array is ever indexed
by a raw offset: maelstrom issue 51).
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.load import History


@dataclasses.dataclass(frozen=True)
class Versions:
    """Tables derived once per analysis (cached; ``unpersist()`` when done).

    - ``acked``: acknowledged sends, ``key, value, offset, process, op, index, f, type``:
      sends of ``ok`` ops; sends of ``info`` non-transactional ops whose delivery report gave an
      offset (a delivery report is an acknowledgement, ``docs/history-format.md``); and sends of
      ``info`` transactions proven committed because an ``ok`` op read one of their values
      (Jepsen ``must-have-committed?``; not under ``read_uncommitted``, where reading a value
      proves nothing about its transaction).
    - ``writers``: ``key, value, writer`` (op), ``writer_type, writer_f, writer_process``: who
      sent each value (Jepsen ``writer-of``), for every send of every op.
    - ``order``: ``key, offset, idx``: the dense position of each offset holding a value.
    - ``by_value``: ``key, value, idx``: a value's first position (its earliest offset).
    """

    acked: DataFrame
    writers: DataFrame
    order: DataFrame
    by_value: DataFrame

    def unpersist(self) -> None:
        """Drop the cached tables."""
        for df in (self.acked, self.order, self.by_value):
            df.unpersist()


def versions(h: History) -> Versions:
    """Derive the ``Versions`` of a loaded history."""
    committed_proof = (h.config or {}).get("isolation_level") != "read_uncommitted"
    proven = (h.sends.where(F.col("f") == "txn")
              .join(h.reads.where(F.col("type") == "ok").select("key", "value").distinct(),
                    ["key", "value"])
              .select("op").distinct().withColumn("proven", F.lit(committed_proof)))
    s = h.sends.join(proven, "op", "left")
    is_acked = ((F.col("type") == "ok")
                | ((F.col("type") == "info") & (F.col("f") == "send") & F.col("offset").isNotNull())
                | ((F.col("type") == "info") & (F.col("f") == "txn")
                   & F.coalesce("proven", F.lit(False))))
    acked = (s.where(is_acked)
             .select("key", "value", "offset", "process", "op", "index", "f", "type").cache())
    writers = h.sends.select("key", "value", F.col("op").alias("writer"),
                             F.col("type").alias("writer_type"), F.col("f").alias("writer_f"),
                             F.col("process").alias("writer_process"))
    obs = observations(h, acked)
    order = (obs.select("key", "offset").distinct()
             .withColumn("idx", F.dense_rank().over(Window.partitionBy("key").orderBy("offset"))
                         - 1)
             .cache())
    by_value = (obs.join(order, ["key", "offset"]).groupBy("key", "value")
                .agg(F.min("idx").alias("idx")).cache())
    return Versions(acked=acked, writers=writers, order=order, by_value=by_value)


def observations(h: History, acked: DataFrame) -> DataFrame:
    """Every ``(key, offset, value)`` claim, one row per claim, with ``op`` (who claimed it).

    Reads of every poll (of ``ok``, ``info`` and ``fail`` ops alike: "pollers in Kafka's
    transaction design are *always* supposed to emit safe data", Jepsen ``version-orders``) and
    acknowledged sends that carry an offset.
    """
    sent = (acked.where(F.col("offset").isNotNull())
            .select("key", "offset", "value", "op"))
    return h.reads.select("key", "offset", "value", "op").unionByName(sent)
