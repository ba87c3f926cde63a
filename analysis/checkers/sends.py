"""Send order anomalies: ``nonmonotonic-send``, ``int-nonmonotonic-send``, ``int-send-skip``.

Source: Jepsen's ``jepsen.tests.kafka``: ``nonmonotonic-send-cases`` ("checks each process's
operations sequentially, looking for cases where a single process's sends to a given key go
backwards relative to the version order": the first send of an op against the last send to that
key of the process's previous ``ok``/``info`` op) and ``int-send-skip+nonmonotonic-cases``
(consecutive sends to one key inside one op: a jump of more than one position is a skip — other
producers' records in between, normal in Kafka — and a step back or in place is nonmonotonic:
the producer's retries reordered its own records). Positions are a value's first position in
the key's version order; a send whose value has none (never observed) is not compared.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import is_type


def send_order(v: Versions) -> DataFrame:
    """The cases (``common.cases``) of ``nonmonotonic-send``, ``int-nonmonotonic-send`` and
    ``int-send-skip``.

    One sort of each process's sends to a key (in op and micro-op order; of the few columns
    compared, so it is done here rather than on the whole cached table): within an op each
    send is compared with the one before it; the first send of an ``ok``/``info`` op with the
    last send of the process's previous ``ok``/``info`` op (a ``fail``ed op did not happen).

    Examples: ``process, key, values, delta`` (position difference), ``op_indexes`` (invoke
    indexes of the two sends' ops; the same op twice for ``int-``).
    """
    sends = (v.sends.where(~is_type("type", "pending"))
             .select("process", "key", "op", "pos", "type", "value",
                     F.col("vidx").alias("idx")))
    w = Window.partitionBy("process", "key").orderBy("op", "pos")
    counted = is_type("type", "ok", "info")
    last_counted = F.last(F.when(counted, F.struct("op", "value", "idx")), ignorenulls=True)
    lagged = sends.select("*", *(F.lag(c).over(w).alias(f"prev_{c}")
                                 for c in ("op", "value", "idx")),
                          last_counted.over(w.rowsBetween(Window.unboundedPreceding, -1))
                          .alias("before"))
    # a send is compared within its op (not its op's first) or across ops (the first of a
    # counted op: the row before it in the same op is none), never both: one branch, so the
    # sort and windows run once
    within = F.col("op") == F.col("prev_op")
    across = counted & (F.col("before.op") != F.col("op"))
    prev = {c: F.when(within, F.col(f"prev_{c}")).otherwise(F.col(f"before.{c}"))
            for c in ("op", "value", "idx")}
    delta = F.col("idx") - prev["idx"]
    kind = (F.when(within & (delta > 1), "int-send-skip")
            .when(within & (delta < 1), "int-nonmonotonic-send")
            .when(~within & across & (delta < 1), "nonmonotonic-send"))
    example = ["process", "key", F.array(prev["value"], "value").alias("values"),
               delta.alias("delta"), F.array(prev["op"], "op").alias("op_indexes")]
    return cases(lagged, kind, ["op", "pos"], example,
                 at(key="key", lo=prev["op"], hi="op", writer="op"))
