"""What each consumer read, in order: the poll order anomalies ``poll-skip``,
``nonmonotonic-poll``, ``int-poll-skip``, ``int-nonmonotonic-poll``.

Source: Jepsen's ``jepsen.tests.kafka``: ``poll-skip+nonmonotonic-cases`` (a process's
consecutive ops reading a key: the first value read by an op against the last one read by the
previous op) and ``int-poll-skip+nonmonotonic-cases`` (consecutive reads of a key inside one op).
A *skip* is a jump of more than one position in the key's version order (records the consumer
passed over); *nonmonotonic* is a step back or in place.

A consumer's reads are compared only within a *segment*: its position is legitimately moved by
``assign``/``subscribe`` ops, by rebalance and seek events of that key (Jepsen ignores keys in an
op's rebalance log), and after a transaction that did not complete ``ok`` (an aborted
transaction seeks back). Two reads with a record between them that the consumer met but
could not read (a ``corrupt`` event: ``corrupt-read``) are no skip. Nothing else resets it:
a ``send`` that failed never moved a consumer. Final reads are left out: they are fresh
consumers reading whole partitions, and a gap in them is a ``lost-write``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases
from kafka_chaos.analysis.checkers.versions import BY_VALUE, Versions, writers_join
from kafka_chaos.analysis.load import History

_ORDER = ("op", "pos", "rec")
_RESETS = ("assigned", "revoked", "lost", "seek")


def position(op: str, pos: str | Column, rec: str | Column) -> Column:
    """A position in a process's history, comparable: (op, micro-op, record)."""
    col = lambda c: F.col(c) if isinstance(c, str) else c  # noqa: E731
    return F.struct(col(op).alias("o"), col(pos).alias("p"), col(rec).alias("r"))


def without_resets(pairs: DataFrame, resets: DataFrame, by: list[str]) -> DataFrame:
    """The ``pairs`` with no row of ``resets`` (``*by, reset``) of the same ``by`` columns
    strictly between their two reads.

    A range join would compare every pair with every reset of its process: quadratic, and
    it was (10 M ops: 445 s, against 10.6 s at 1 M). Instead both ends of every pair go into
    one sorted stream with the resets, per ``by``; a running count of the resets passed
    gives each end a number, and a pair is kept when its two ends have the same. Reads and
    resets never sit at the same position (a reset's record is -1), so ties cannot blur
    which side of a reset a read is on.
    """
    # each pair once, as its two ends (a union of two selects of ``pairs`` computed it twice)
    ends = (pairs.select(*by, F.struct(*pairs.columns).alias("p"))
            .select(*by, "p", F.explode(F.array(
                F.struct(position("p.prev_op", "p.prev_pos", "p.prev_rec").alias("at"),
                         F.lit(False).alias("end")),
                F.struct(position("p.op", "p.pos", "p.rec").alias("at"),
                         F.lit(True).alias("end")))).alias("e")))
    stream = (resets.select(*by, F.col("reset").alias("at"), F.lit(1).alias("is_reset"),
                            F.lit(None).cast(ends.schema["p"].dataType).alias("p"),
                            F.lit(None).cast("boolean").alias("end"))
              .unionByName(ends.select(*by, F.col("e.at").alias("at"),
                                       F.lit(0).alias("is_reset"), "p",
                                       F.col("e.end").alias("end"))))
    w = (Window.partitionBy(*by).orderBy("at")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    passed = (stream.select("p", "end", F.sum("is_reset").over(w).alias("n"))
              .where(F.col("end").isNotNull()))
    # a pair's identity: where its second read is (the key and process are in it)
    me = [F.col(f"p.{c}") for c in ("process", "key", "op", "pos", "rec")]
    return (passed.groupBy(*me)
            .agg(F.first("p").alias("p"),
                 (F.max(F.when(F.col("end"), F.col("n")))
                  - F.max(F.when(~F.col("end"), F.col("n")))).alias("resets"))
            .where(F.col("resets") == 0).select("p.*"))


def poll_order(h: History, v: Versions) -> DataFrame:
    """The cases of ``poll-skip``, ``nonmonotonic-poll``, ``int-poll-skip`` and
    ``int-nonmonotonic-poll``.

    Each process's polled records of a key (final reads apart), in op, micro-op and record
    order (``Versions.reads`` is sorted so), are compared with the read before. Reads of
    consecutive offsets are consecutive positions (both offsets hold a value, and no offset
    lies between): only the other pairs look up their positions in ``Versions.obs`` (joined
    as ``versions.writers_join`` says), and only those whose positions differ by
    ``delta != 1`` are matched against the resets; a pair with a reset between its two reads
    is no case.

    Examples: ``process, key, offsets, values, delta, op_indexes`` (invoke indexes of the two
    ops), ``skipped`` (how many positions were passed over, for skips).
    """
    w = Window.partitionBy("process", "key").orderBy(*_ORDER)
    pairs = (v.reads.select("process", "key", *_ORDER, "offset", "value",
                          *(F.lag(c).over(w).alias(f"prev_{c}")
                            for c in (*_ORDER, "offset", "value")))
             .where(F.col("prev_offset").isNotNull()
                    & (F.col("offset") != F.col("prev_offset") + 1)))
    idx = v.obs.select("key", F.col("offset").alias("at"), "value", "idx")
    prev_idx = (v.obs.select("key", F.col("offset").alias("prev_at"),
                             F.col("value").alias("prev_value"), F.col("idx").alias("prev_idx"),
                             F.col("w_op").alias("prev_writer")))
    delta = F.col("idx") - F.col("prev_idx")
    # Joined on (key, value), the order ``obs`` of a large history is cached in, so only the
    # pairs are sorted (a hash table of the pairs ran a 2 GiB heap out of memory at 10 M ops);
    # the offsets are compared as a difference, which the optimizer does not make a join key
    hint = writers_join(h)
    pairs = (pairs.join(idx.hint(hint), BY_VALUE)
             .where(F.col("at") - F.col("offset") == 0)
             .join(prev_idx.hint(hint), ["prev_value", "key"])
             .where((F.col("prev_at") - F.col("prev_offset") == 0) & (delta != 1))
             .drop("at", "prev_at"))
    # Resets of a process's position: only what moves the consumer. Assign/subscribe ops
    # (before their op) and transactions that did not complete ok (after theirs: an aborted
    # transaction seeks back to the committed offsets), for every key; rebalance and seek
    # events, for their key, where they happened. A send that failed moves no consumer, and
    # a poll that raised leaves its position where it was; an op ending info retires its
    # process, so nothing after it is compared anyway.
    is_sub = F.col("f").isin("assign", "subscribe")
    after_bad = (F.col("f") == "txn") & (F.col("type") != "ok")
    op_resets = (h.ops.where(is_sub | after_bad)
                 .select("process", position("op", F.when(is_sub, -1).otherwise(2**31 - 1),
                                        F.lit(-1)).alias("reset")))
    key_resets = (h.events.where(F.col("kind").isin(*_RESETS))
                  .select("process", "key", position("op", "pos", F.lit(-1)).alias("reset")))
    kept = without_resets(pairs, op_resets, ["process"])
    if h.rows.get("events", 1):  # no event rows, no pass (fewer operators to plan)
        kept = without_resets(kept, key_resets, ["process", "key"])
        # a record the consumer met but could not read (``corrupt-read``) lies between
        # the two reads: it was passed over as read, no skip
        met = h.events.where(F.col("kind") == "corrupt").select(
            "process", "key", F.col("offset").alias("met"))
        kept = kept.join(F.broadcast(met), (kept["process"] == met["process"])
                         & (kept["key"] == met["key"]) & (met["met"] > F.col("prev_offset"))
                         & (met["met"] < F.col("offset")), "left_anti")
    kept = _without_later_records(h, v, kept, delta)
    same = F.col("op") == F.col("prev_op")
    kind = (F.when(delta > 1, F.when(same, "int-poll-skip").otherwise("poll-skip"))
            .when(delta < 1, F.when(same, "int-nonmonotonic-poll").otherwise("nonmonotonic-poll")))
    return cases(kept, kind, ["op", "pos", "rec"],
                 ["process", "key", F.array("prev_offset", "offset").alias("offsets"),
                  F.array("prev_value", "value").alias("values"), delta.alias("delta"),
                  F.array("prev_op", "op").alias("op_indexes"),
                  F.greatest(delta - 1, F.lit(0)).alias("skipped")],
                 # The first record may have been fetched long before its poll (librdkafka
                 # prefetches into a queue, ``queued.min.messages``): what moved the log
                 # under the consumer can have happened any time after it was written.
                 at(key="key", lo=F.least(F.coalesce("prev_writer", "prev_op"), "prev_op"),
                    hi="op"))


def _without_later_records(h: History, v: Versions, pairs: DataFrame, delta: Column
                           ) -> DataFrame:
    """``pairs`` without the skips (``delta > 1``) every one of whose passed-over positions
    holds only values sent after the read op completed: the consumer cannot have passed
    over a record not yet written. Such a position is an offset a truncation (an unclean
    election) gave to a new record after the read, where the consumer's log had held what
    no consumer returns (a transaction marker, KAFKA-20716's scenario). A value whose
    sender is unknown counts as written before."""
    ident = ["process", "key", "op", "pos", "rec"]
    done = h.pairs.select(F.col("op").alias("read_op"), F.col("index").alias("read_done"))
    skips = (pairs.where(delta > 1).select(*ident, "prev_idx", "idx")
             .join(done, F.col("op") == F.col("read_op")))
    passed = v.obs.select(F.col("key").alias("b_key"), F.col("idx").alias("b_idx"),
                          F.col("w_op").alias("b_op"))
    before = F.col("b_op").isNull() | (F.col("b_op") < F.col("read_done"))
    later = (skips.join(passed, (F.col("key") == F.col("b_key"))
                        & (F.col("b_idx") > F.col("prev_idx")) & (F.col("b_idx") < F.col("idx")))
             .groupBy(*ident).agg(F.max(before.cast("int")).alias("existed"))
             .where(F.col("existed") == 0).select(*ident))
    return pairs.join(later, ident, "left_anti")
