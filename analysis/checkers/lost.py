"""Acknowledged writes that no poll read: ``lost-write`` and ``unseen``.

Every acknowledged send (``Versions.acked``) falls in exactly one of four classes, so counts add
up:

1. read: some poll returned its value;
2. ``lost-write``: not read, although reads *covered* its offset: a final read's range holds it,
   or a consumer read straight past it (``polls.covered_runs``);
3. ``unseen``: not read, not covered, and its key's final reads reached the end of the log
   (``eof``) at or below its offset (or its ack carried no offset): it was acknowledged yet is
   absent from a log read to its end, typically because the log was truncated below it (e.g.
   an unclean leader election);
4. not judged: none of these (no final read of the key, or a final read that failed midway);
   the result is then "unknown", never valid (``analysis.check``).

Source: Jepsen's ``jepsen.tests.kafka`` analysis step 3 and ``lost-write-cases`` ("we take the
highest observed offset, and then check that every :ok :send operation with an equal or lower
offset was *also* read"), and ``unseen``. Jepsen bounds a key by its highest read offset, which
assumes some read covered everything below it; here the bound is what reads actually covered,
so a poller that read only recent records (``auto.offset.reset=latest``, a late assignment) and
a final read that failed never turn unread writes into lost ones.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checkers.common import cases
from analysis.checkers.versions import Versions
from analysis.load import History

UNJUDGED = "not-judged"


def unread_writes(h: History, v: Versions, runs: DataFrame) -> DataFrame:
    """The cases (``common.cases``) of ``lost-write``, ``unseen`` and ``not-judged``.

    Args:
        h, v: the loaded history and its ``Versions``.
        runs: ``polls.covered_runs`` (``key, lo, hi`` inclusive).

    Examples (by send op): ``key, value, offset, process, op`` (invoke index of the send),
    ``index`` (its completion), ``type`` (``info`` for a partially acknowledged op),
    ``covered_by`` (``[lo, end)`` of a covering read, lost writes only), ``final_end`` (where
    the key's final reads ended).
    """
    read = h.reads.select("key", "value").distinct()
    unread = v.acked.join(read, ["key", "value"], "left_anti")
    cover = (h.ranges.select("key", "start", "end")
             .unionByName(runs.select("key", F.col("lo").alias("start"),
                                      (F.col("hi") + 1).alias("end"))))
    covering = (unread.where(F.col("offset").isNotNull()).alias("u")
                .join(cover.alias("c"), (F.col("u.key") == F.col("c.key"))
                      & (F.col("c.start") <= F.col("u.offset"))
                      & (F.col("u.offset") < F.col("c.end")))
                .groupBy("u.key", "u.value")
                .agg(F.min(F.array("c.start", "c.end")).alias("covered_by")))
    final_end = (h.ranges.groupBy("key")
                 .agg(F.max("end").alias("final_end"), F.max("eof").alias("eof"))
                 .where(F.col("eof")).drop("eof"))
    kind = (F.when(F.col("covered_by").isNotNull(), F.lit("lost-write"))
            .when(F.col("final_end").isNotNull()
                  & (F.col("offset").isNull() | (F.col("offset") >= F.col("final_end"))),
                  F.lit("unseen"))
            .otherwise(F.lit(UNJUDGED)))
    found = (unread.join(covering, ["key", "value"], "left")
             .join(final_end, "key", "left"))
    return cases(found, kind, ["op", "value"], ["key", "value", "offset", "process", "op",
                                                "index", "type", "covered_by", "final_end"])
