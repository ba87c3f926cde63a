"""Acknowledged writes missing from the log: ``lost-write`` and ``unseen``.

Every acknowledged send (``Versions.acked``) falls in exactly one of these classes, so counts
add up. For a key whose final reads reached the end of its partition (``eof``), the final reads
are the log as it stands after the faults healed:

1. present: the final reads returned it;
2. ``lost-write``: missing, although the final reads covered its offset;
3. ``unseen``: missing, and its offset is at or beyond where the final reads ended (or its ack
   carried no offset): the log was truncated below it (e.g. an unclean leader election).

For a key without such a final read (it failed or is missing), only what polls covered counts:

1. read: some poll returned it;
2. ``lost-write``: not read, although a final-read chunk covered its offset, or a consumer
   read another value at its offset (a consumer's skip is never a lost write);
3. not judged: anything else; the result is then "unknown", never valid (``analysis.check``).

Source: Jepsen's ``jepsen.tests.kafka`` analysis step 3 and ``lost-write-cases`` ("we take the
highest observed offset, and then check that every :ok :send operation with an equal or lower
offset was *also* read"), and ``unseen``. Two departures, both about what reads prove. Jepsen
bounds a key by its highest read offset, which assumes some read covered everything below it;
here the bound is what reads actually covered, so a poller that read only recent records
(``auto.offset.reset=latest``, a late assignment) and a failed final read never turn unread
writes into lost ones. And Jepsen counts a value any poll returned as seen; a value read before
a truncation and gone from the final reads was lost all the same (Jepsen reports such a case
only as ``inconsistent-offsets``, when another value took its offset).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History, type_name

UNJUDGED = "not-judged"


def unread_writes(h: History, v: Versions) -> DataFrame:
    """The cases (``common.cases``) of ``lost-write``, ``unseen`` and ``not-judged``.

    Examples (by send op): ``key, value, offset, process, op`` (invoke index of the send),
    ``index`` (its completion), ``type`` (``info`` for a partially acknowledged op),
    ``covered_by`` (``[start, end)`` of a covering read, lost writes only: a final-read
    chunk, or ``[offset, offset + 1)`` for a poll that read another value there),
    ``final_end`` (where the key's final reads ended), ``read_before`` (a poll had returned
    it).
    """
    complete = F.col("final_end").isNotNull()
    missing = (v.sends.where(F.col("acked"))
               .join(F.broadcast(v.final_end), "key", "left")
               .where(F.when(complete, ~F.col("read_final")).otherwise(~F.col("read_any"))))
    # Acknowledged writes missing from the log are few: they are hashed and ``obs`` streams
    # past them for each one's own claim (whether a consumer read its offset: ``read_at``),
    # and each meets the final reads' ranges, broadcast.
    claims = v.obs.select("key", "offset", "value", "read_at")
    found = missing.hint("shuffle_hash").join(claims, ["key", "offset", "value"], "left")
    m, c = found.alias("m"), h.ranges.alias("c")
    found = (m.join(F.broadcast(c), (F.col("m.key") == F.col("c.key"))
                    & (F.col("c.start") <= F.col("m.offset"))
                    & (F.col("m.offset") < F.col("c.end")), "left")
             .groupBy(*(F.col(f"m.{col}") for col in found.columns))
             .agg(F.min(F.when(F.col("c.start").isNotNull(),
                               F.struct("c.start", "c.end", "c.op"))).alias("chunk"))
             .withColumn("by_final", F.when(F.col("chunk").isNotNull(),
                                            F.array("chunk.start", "chunk.end"))))
    # A consumer that read another value at the offset read that position of the version
    # order: the acknowledged value was not there.
    by_poll = F.when(~complete & F.coalesce("read_at", F.lit(False)),
                     F.array("offset", F.col("offset") + 1))
    covered = (F.when(F.col("by_final").isNull(), by_poll)
               .when(by_poll.isNull() | (F.col("by_final") < by_poll), F.col("by_final"))
               .otherwise(by_poll))
    found = found.withColumn("covered_by", covered)
    kind = (F.when(F.col("covered_by").isNotNull(), F.lit("lost-write"))
            .when(complete, F.lit("unseen"))
            .otherwise(F.lit(UNJUDGED)))
    # the window a truncation must lie in: after the acknowledgement, before the read that
    # misses the write (a poll's is looked up only when needed: analysis.judge)
    reader = (F.when(F.col("covered_by") == F.col("by_final"), F.col("chunk.op"))
              .when(F.col("covered_by").isNull(), F.col("final_op")))
    return cases(found, kind, ["op", "value"],
                 ["key", "value", "offset", "process", "op", "index",
                  type_name("type").alias("type"), "covered_by", "final_end",
                  F.col("read_any").alias("read_before")],
                 at(key="key", lo="index", hi=reader, write_inv="op", write_done="index",
                    writer="op"))
