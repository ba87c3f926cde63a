"""Checkers on the offset order of each key: ``duplicate``, ``inconsistent-offsets``,
``garbage-read`` and ``corrupt-read``.

Source: Jepsen's ``jepsen.tests.kafka`` (``jepsen/src/jepsen/tests/kafka.clj``):
``version-orders`` (whose ``:errors`` are reported as ``:inconsistent-offsets``) and
``duplicate-cases``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import MAX_OPS_PER_EXAMPLE, at, cases
from kafka_chaos.analysis.checkers.versions import BY_VALUE, Versions
from kafka_chaos.analysis.load import History
from kafka_chaos.catalogue.anomalies import CORRUPT_READ, GARBAGE_READ


def _sorted_set(col: str) -> Column:
    return F.array_sort(F.collect_set(col))


#: The column each example of these anomalies is found by, beside ``key``.
_BY = {"duplicate": "value", "inconsistent-offsets": "offset"}


def example_ops(v: Versions, examples: dict[str, list[dict[str, Any]]]) -> None:
    """Add ``op_indexes`` to the ``duplicate`` and ``inconsistent-offsets`` ``examples``
    (``{kind: [example, ...]}``, as ``common.summarize`` gives them): the invoke indexes of the
    ops whose reads (final reads included) or acknowledged sends claimed the example's (key,
    value), or (key, offset), sorted, the first ``MAX_OPS_PER_EXAMPLE``; None when no op did.

    One Spark job for all of them, after the counts: the examples are at most
    ``MAX_EXAMPLES`` a kind, so they are literals in the filters of one scan of the reads, the
    final reads (their keys filtered before the records are exploded) and the sends. A join of
    every case against those tables, inside the checkers' job, cost 5-6 s a checker at 10 M
    ops (``docs/performance.md``)."""
    wanted = [(kind, ex) for kind, found in examples.items() if kind in _BY for ex in found]
    if not wanted:
        return
    match = None
    for kind, ex in wanted:
        here = (F.col("key") == ex["key"]) & (F.col(_BY[kind]) == ex[_BY[kind]])
        match = here if match is None else match | here
    keys = F.col("key").isin(sorted({ex["key"] for _, ex in wanted}))
    cols = ("key", "offset", "value", "op")
    rows = (v.reads.where(keys & match).select(*cols)
            .unionByName(v.finals.where(keys & match).select(*cols))
            .unionByName(v.sends.where(F.col("acked") & F.col("offset").isNotNull()
                                       & keys & match).select(*cols))
            .collect())
    for kind, ex in wanted:
        by = _BY[kind]
        ops = sorted({r["op"] for r in rows if r["key"] == ex["key"] and r[by] == ex[by]})
        ex["op_indexes"] = ops[:MAX_OPS_PER_EXAMPLE] or None


def duplicates(v: Versions) -> DataFrame:
    """Count ``duplicate``: one value at more than one distinct offset of a key.

    Rule (Jepsen ``duplicate-cases``): "cases where a single value appears at more than one
    offset in a key", from the version order, which combines every poll's records and the
    acknowledged sends' offsets (``Versions.obs``). Values are unique per run, so any second
    offset is a second copy of the record in the log (e.g. a producer retry without
    idempotence).

    Returns the cases (``common.cases``); one per (key, value), each with ``key, value,
    offsets`` (sorted); ``example_ops`` adds the examples' ``op_indexes``.
    """
    # the values claimed at two offsets first, then their claims: a window over every value
    # flagging them, while the shared tables were built, cost 2.2 s at 10 M ops
    claims = v.obs.select("key", "value", "offset", "w_op")
    spread = (claims.groupBy(*BY_VALUE)
              .agg((F.min("offset") != F.max("offset")).alias("dup")).where("dup"))
    found = (claims.join(spread.hint("shuffle_hash"), BY_VALUE, "left_semi")
             .groupBy(*BY_VALUE).agg(_sorted_set("offset").alias("offsets"),
                                     F.min("w_op").alias("w_op"))
             .join(F.broadcast(v.final_end.select("key", "final_op")), "key", "left"))
    # a truncation behind it lies between its write and the end of the log's final reads
    return cases(found, F.lit("duplicate"), ["key", "value"], ["key", "value", "offsets"],
                 at(key="key", lo="w_op", hi="final_op", writer="w_op"))


def inconsistent_offsets(v: Versions) -> DataFrame:
    """Count ``inconsistent-offsets``: one (key, offset) observed with several values.

    Rule (Jepsen ``version-orders`` ``:errors``, analysis step 2): "We verify that all sends and
    polls agree on the value for a given key and offset ... If we find divergence, we know that
    Kakfa [sic] disagreed about the value at some offset." A send acknowledged at offset o while
    a poll reads another value at o counts, as do two polls disagreeing (a log truncated and
    rewritten after an unclean leader election).

    Returns the cases (``common.cases``); one per (key, offset), each with ``key, offset,
    values`` (sorted); ``example_ops`` adds the examples' ``op_indexes``.
    """
    found = (v.obs.where(F.col("incons")).groupBy("key", "offset")
             .agg(_sorted_set("value").alias("values"), F.min("w_op").alias("w_op"))
             .join(F.broadcast(v.final_end.select("key", "final_op")), "key", "left"))
    return cases(found, F.lit("inconsistent-offsets"), ["key", "offset"],
                 ["key", "offset", "values"], at(key="key", lo="w_op", hi="final_op"))


def garbage_reads(v: Versions) -> DataFrame:
    """Count ``garbage-read``: a record some read returned whose value no send of the history
    wrote to that key.

    Values are unique per run and every send is recorded at its invoke, so such a record is
    corrupt data, a record of another run, or a value moved to another key: no rule of Kafka
    explains it. Elle's README names it ("Garbage Reads: A read observes a state which could
    not have been the product of any write"); Jepsen's Kafka checker refuses such a history
    (``:no-writer-of-value``) instead of reporting it.

    Returns the cases (``common.cases``); one per (key, offset, value), each with ``key,
    offset, value``.
    """
    found = v.obs.where(F.col("read") & F.col("w_op").isNull()).select("key", "offset", "value")
    return cases(found, F.lit(GARBAGE_READ), ["key", "offset", "value"],
                 ["key", "offset", "value"], at(key="key"))


def corrupt_reads(h: History) -> DataFrame:
    """Count ``corrupt-read``: an offset of a key at which some consumer met a record it
    could not read (its ``corrupt`` events, ``docs/history-format.md``): bytes that are no
    value the workload writes, or a batch its CRC check refused. Kafka's log is the record
    of what producers wrote; no rule of it makes a record unreadable, so only a damage below
    the broker can (``docs/file-faults.md``). The record at that offset is not read, so
    ``lost-write`` may also name it.

    Returns the cases (``common.cases``); one per (key, offset), each with ``key, offset,
    reads`` (how many times it was met: a refused batch is met at every poll),
    ``processes`` and ``op`` (the invoke index of the first op that met it).
    """
    found = (h.events.where(F.col("kind") == "corrupt")
             .groupBy("key", "offset")
             .agg(F.min("op").alias("op"), F.count(F.lit(1)).alias("reads"),
                  F.sort_array(F.collect_set("process")).alias("processes")))
    return cases(found, F.lit(CORRUPT_READ), ["key", "offset"],
                 ["key", "offset", "reads", "processes", "op"], at(key="key", hi="op"))
