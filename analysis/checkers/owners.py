"""``group-overlap``: a partition owned by two members of one consumer group at once, by the
members' own rebalance callbacks (beyond Jepsen).

A member (a process that ``subscribe``d with the group, ``consumer.groups``) owns a key's
partition from an ``assigned`` event until a ``revoked`` or ``lost`` event of that key, or
until the process ends. Both group protocols report increments (cooperative and KIP-848
callbacks name what was added or taken; the classic eager protocol revokes everything before
it assigns anew), so the same arithmetic serves both.

Events are recorded inside ops, so when one happened is known only to lie within its op:
ownership is *certain* from the completion of the op that recorded the ``assigned`` event to the
invoke of the op that recorded its end (or of the process's last op). Two members whose certain
stretches on one key overlap owned it at once. Kafka hands a partition to another member only
after its owner revoked it, unless the owner was fenced (ConsumerRebalanceListener javadoc,
``onPartitionsLost``: partitions "that have already been reassigned to other consumers ... will
not be called during normal execution as the owned partitions would first be revoked"; KIP-848
likewise waits for the revocation before it assigns the partition elsewhere). So each case says
how the earlier owner's stretch ended: ``revoked`` (a violation), ``lost``, ``gone`` (the
process crashed or its op ended ``info``), or ``fenced`` (a commit of the process failed
with an error that says the group had moved on without it, ``FENCED_BY``): all three
fenced, ``analysis.promises`` rule ``fenced-member``; or ``still-owned`` (nothing ended it
before the process's last op: it may have been fenced without learning it yet, so the
finding is unexplained). An earlier owner that committed ``ok`` (a commit op, or an
auto-commit's ``committed`` event) after the later owner's assignment was not fenced then,
whatever ended it later: the coordinator accepts a member's commit only in its current
generation (member epoch, KIP-848), and it moves a partition of such a member only once it
revoked it. Such a case says ``still-committing``: a violation.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases, no_cases
from kafka_chaos.analysis.checkers.consumer import groups
from kafka_chaos.analysis.load import History
from kafka_chaos.catalogue.anomalies import GROUP_OVERLAP

_OWNERSHIP = ("assigned", "revoked", "lost")
#: A commit op's errors that end its member's ownership: the member was no longer in the
#: group's current generation (member epoch), and "some of the partitions may have already
#: been assigned to another member in the group" (``CommitFailedException`` javadoc, the Java
#: client's; Kafka's error codes UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, and KIP-848's
#: FENCED_MEMBER_EPOCH, as librdkafka names them).
FENCED_BY = ("CommitFailedException", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION",
             "FENCED_MEMBER_EPOCH")


def stretches(h: History) -> DataFrame:
    """``group, process, key, start, end, ended_by, assign_op``: each certain stretch of
    ownership (history indexes, ``start <= end``), as the module docstring defines it."""
    members = F.broadcast(groups(h))
    done = h.ops.select("op", F.col("index").alias("done"))
    last = (h.ops.groupBy("process")
            .agg(F.max(F.struct("op", "f", "type")).alias("last")))
    w = Window.partitionBy("process", "key").orderBy("op", "pos")
    ev = (h.events.where(F.col("kind").isin(*_OWNERSHIP))
          .select("process", "key", "op", "pos", "kind",
                  F.lead("kind").over(w).alias("next_kind"),
                  F.lead("op").over(w).alias("next_op")))
    gone = (F.col("last.f") == "crash") | (F.col("last.type") == "info")
    ended = F.coalesce(F.col("next_kind").isin("revoked", "lost"), F.lit(False))
    # the op that recorded the assignment may be the process's last: certain at its
    # completion alone (a stretch of one index), which a later owner's start can meet
    owned = (ev.where(F.col("kind") == "assigned")
             .join(members, "process").join(done, "op").join(last, "process")
             .select("group", "process", "key", F.col("done").alias("start"),
                     F.when(ended, F.col("next_op"))
                     .otherwise(F.greatest("last.op", "done")).alias("end"),
                     F.when(ended, F.col("next_kind"))
                     .when(gone, F.lit("gone")).otherwise(F.lit("still-owned"))
                     .alias("ended_by"),
                     F.col("op").alias("assign_op")))
    # a commit failing as fenced before that end ends the stretch at its invoke
    fences = (h.ops.where((F.col("f") == "commit") & (F.col("type") == "fail")
                          & F.col("error").isin(*FENCED_BY))
              .select("process", F.col("op").alias("fence")))
    first = (owned.join(fences, "process")
             .where((F.col("fence") > F.col("assign_op")) & (F.col("fence") < F.col("end")))
             .groupBy("process", "key", "assign_op").agg(F.min("fence").alias("fence")))
    fenced = F.col("fence").isNotNull()
    return (owned.join(first, ["process", "key", "assign_op"], "left")
            .select("group", "process", "key", "start",
                    F.when(fenced, F.col("fence")).otherwise(F.col("end")).alias("end"),
                    F.when(fenced, F.lit("fenced")).otherwise(F.col("ended_by"))
                    .alias("ended_by"), "assign_op")
            .where((F.col("start") < F.col("end"))
                   | (F.col("ended_by").isin("still-owned", "gone")
                      & (F.col("start") == F.col("end")))))


def overlaps(h: History) -> DataFrame:
    """The cases of ``group-overlap``: pairs of stretches of two processes of one group on
    one key where the later one began before the earlier one ended.

    Examples: ``group, key, processes`` (earlier owner first), ``op_indexes`` (the invoke
    indexes of the ops that recorded their ``assigned`` events), ``ended_by`` (how the earlier
    owner's stretch ended; ``still-committing`` when it committed ``ok`` after the later
    owner's assignment)."""
    if not h.counts.get("subscribe", {}).get("ok") or not h.rows.get("events", 1):
        return no_cases(h.ops.sparkSession)
    s = stretches(h)
    a, b = s.alias("a"), s.alias("b")
    pairs = a.join(b, (F.col("a.group") == F.col("b.group")) & (F.col("a.key") == F.col("b.key"))
                   & (F.col("a.process") != F.col("b.process"))
                   & (F.col("a.start") <= F.col("b.start"))
                   & (F.col("b.start") < F.col("a.end")))
    # the earlier owner's ok commits that began after the later owner's assignment was
    # certain (and before its own stretch ended): it was still a member in good standing
    committed = (h.ops.where((F.col("f") == "commit") & (F.col("type") == "ok"))
                 .select("process", "op")
                 .unionByName(h.events.where(F.col("kind") == "committed")
                              .select("process", "op").distinct()))
    c = F.broadcast(committed.alias("c"))
    still = (pairs.join(c, (F.col("c.process") == F.col("a.process"))
                        & (F.col("c.op") > F.col("b.start")) & (F.col("c.op") < F.col("a.end")))
             .select(F.col("a.group").alias("g"), F.col("a.key").alias("k"),
                     F.col("a.process").alias("pa"), F.col("b.process").alias("pb"),
                     F.col("b.start").alias("bs")).distinct().withColumn("still", F.lit(True)))
    pairs = pairs.join(still, (F.col("g") == F.col("a.group")) & (F.col("k") == F.col("a.key"))
                       & (F.col("pa") == F.col("a.process"))
                       & (F.col("pb") == F.col("b.process")) & (F.col("bs") == F.col("b.start")),
                       "left")
    ended_by = F.when(F.col("still"), F.lit("still-committing")).otherwise(F.col("a.ended_by"))
    return cases(pairs, F.lit(GROUP_OVERLAP), ["b.start", "a.process", "b.process"],
                 [F.col("a.group").alias("group"), F.col("a.key").alias("key"),
                  F.array("a.process", "b.process").alias("processes"),
                  F.array("a.assign_op", "b.assign_op").alias("op_indexes"),
                  ended_by.alias("ended_by")],
                 at(key="a.key", lo="a.assign_op", hi="b.assign_op"))
