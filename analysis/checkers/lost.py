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
2. ``lost-write``: not read, although a consumer read its offset's position in the version
   order straight through (``polls.covered_runs``: it read another value there) or a
   final-read chunk covered it; a consumer's skip is never a lost write;
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

from kafka_chaos.analysis.checkers.common import cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History

UNJUDGED = "not-judged"


def unread_writes(h: History, v: Versions, runs: DataFrame) -> DataFrame:
    """The cases (``common.cases``) of ``lost-write``, ``unseen`` and ``not-judged``.

    Args:
        h, v: the loaded history and its ``Versions``.
        runs: ``polls.covered_runs`` (``key, lo, hi`` inclusive).

    Examples (by send op): ``key, value, offset, process, op`` (invoke index of the send),
    ``index`` (its completion), ``type`` (``info`` for a partially acknowledged op),
    ``covered_by`` (``[start, end)`` of a covering read, lost writes only), ``final_end`` (where
    the key's final reads ended), ``read_before`` (a poll had returned it).
    """
    final_end = (h.ranges.groupBy("key")
                 .agg(F.max("end").alias("final_end"), F.max("eof").alias("eof"))
                 .where(F.col("eof")).drop("eof"))
    seen = (h.reads.groupBy("key", "value")
            .agg(F.max("final").alias("in_final")).withColumn("read_before", F.lit(True)))
    complete = F.col("final_end").isNotNull()
    missing = (v.acked.join(final_end, "key", "left").join(seen, ["key", "value"], "left")
               .where(F.when(complete, ~F.coalesce("in_final", F.lit(False)))
                      .otherwise(F.col("read_before").isNull())))
    final_cover = h.ranges.select("key", "start", "end", F.lit(True).alias("by_final"))
    run_cover = runs.select("key", F.col("lo").alias("start"), (F.col("hi") + 1).alias("end"),
                            F.lit(False).alias("by_final"))
    m, c = missing.alias("m"), final_cover.unionByName(run_cover).alias("c")
    covering = (m.where(F.col("offset").isNotNull())
                .join(c, (F.col("m.key") == F.col("c.key")) & (F.col("c.start") <= F.col("m.offset"))
                      & (F.col("m.offset") < F.col("c.end"))
                      # a complete final read is the log's state: only it decides
                      & (F.col("c.by_final") | F.col("m.final_end").isNull()))
                .groupBy("m.key", "m.value")
                .agg(F.min(F.array("c.start", "c.end")).alias("covered_by")))
    kind = (F.when(F.col("covered_by").isNotNull(), F.lit("lost-write"))
            .when(complete, F.lit("unseen"))
            .otherwise(F.lit(UNJUDGED)))
    found = missing.join(covering, ["key", "value"], "left")
    return cases(found, kind, ["op", "value"],
                 ["key", "value", "offset", "process", "op", "index", "type", "covered_by",
                  "final_end", F.coalesce("read_before", F.lit(False)).alias("read_before")])
