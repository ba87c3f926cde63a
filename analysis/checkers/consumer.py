"""Consumer-side delivery of consumer groups (beyond Jepsen): ``group-skip``,
``group-redelivery``, ``group-rewind``, ``eos-duplicate``.

A consumer group promises each record of its partitions to one member at a time, resuming after
a rebalance from the committed offsets (Kafka docs: "Consumer Position", "Offset Management";
seed 002: auto-commit is at-most-once when offsets are committed before processing, manual commit
after processing at-least-once). Over the members of one group (processes that ``subscribe``d
with it, ``docs/history-format.md``):

- ``group-skip``: a record known to be in the log (some poll, the final reads included, read it)
  at an offset the group's consumers had started on (>= the lowest offset the group delivered)
  and below an offset the group committed, that no member ever delivered: the group moved its
  committed position past a record it never handed to any member (at-most-once loss). A
  record is its value at its offset: where a truncated log was refilled, the record the
  final reads found there is the one still in the log, whatever the group read there
  before. The group's commits above the record say whether a member resuming from one could
  have detected a truncation (``epochless``: one was stored without its leader epoch,
  KIP-320; KAFKA-20507). ``reset`` says whether a member of the group may have started
  past it at the log end, with no committed offset (asked only of a run with
  ``auto.offset.reset=latest``; NULL otherwise).
- a record (value at offset) delivered by more than one op of the group's members is, by
  what the group had committed when it came again:

  - ``eos-duplicate``: two committed (``ok``) read-process-write transactions delivered it.
    Each commits its consumed offsets atomically with its output (``send_offsets_to_transaction``,
    KIP-98/KIP-447: the offsets "will be considered committed only if the transaction is
    committed successfully"), so the second consumed a record whose consumption was committed.
  - ``group-rewind``: a later delivery began after the group had committed an offset past
    the record (an ``ok`` commit op, or a ``committed`` event, completed before it): the group
    resumes "from last committed offset" (KafkaConsumer javadoc), never below it.
  - ``group-redelivery``: otherwise (after a rebalance, a crashed member, or an aborted
    transaction that seeked back, above the committed offset): at-least-once.

These are consumer-side: the record is in the log, so they are reported apart from ``lost-write``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import MAX_OPS_PER_EXAMPLE, at, cases, no_cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History, is_f, is_type
from kafka_chaos.catalogue.anomalies import EOS_DUPLICATE, GROUP_REWIND


def groups(h: History) -> DataFrame:
    """``process, group``: the consumer group of every process that subscribed."""
    return (h.ops.where((F.col("f") == "subscribe") & (F.col("type") == "ok"))
            .select("process", F.get_json_object("inv", "$.group").alias("group"))
            .where(F.col("group").isNotNull()).distinct())


def delivery(h: History, v: Versions) -> DataFrame:
    """The cases of ``group-skip``, ``group-redelivery``, ``group-rewind`` and
    ``eos-duplicate``.

    Examples: ``group, key, offset, value``; for deliveries again ``deliveries`` (how many ops
    delivered it), ``op_indexes`` (their invoke indexes, first 10) and ``committed`` (the
    highest offset the group had committed for the key before the last delivery began; NULL
    if none); for skips ``committed`` (the group's highest committed offset of the key) and
    ``from_offset``, ``epochless`` and ``commits_until`` (``_resumable``), ``reset``
    (``_reset``).
    """
    if not h.counts.get("subscribe", {}).get("ok"):  # no consumer group: nothing to scan
        return no_cases(h.ops.sparkSession)
    members = F.broadcast(groups(h))  # a few processes
    delivered = (v.reads.join(members, "process")
                 .select("group", "key", "offset", "value", "op",
                         (is_f("f", "txn") & is_type("type", "ok")).alias("eos")))
    # a record is its value at its offset: one a truncation replaced is another record
    again = (delivered.groupBy("group", "key", "offset", "value")
             .agg(F.countDistinct("op").alias("deliveries"),
                  F.slice(F.array_sort(F.collect_set("op")), 1, MAX_OPS_PER_EXAMPLE)
                  .alias("op_indexes"), F.min("op").alias("first_op"),
                  F.max("op").alias("last_op"),
                  F.countDistinct(F.when(F.col("eos"), F.col("op"))).alias("committed_txns"))
             .where(F.col("deliveries") > 1))
    epochs = F.from_json(F.get_json_object("done", "$.epochs"), "map<string,bigint>")
    commit_ops = (h.ops.where((F.col("f") == "commit") & (F.col("type") == "ok"))
                  .select("process", "op", "index", epochs.alias("epochs"), F.explode(
                      F.from_json(F.get_json_object("inv", "$.offsets"),
                                  "map<string,bigint>")))
                  .select("process", "op", "index", F.col("key").cast("long").alias("key"),
                          F.col("value").alias("offset"),
                          (F.element_at("epochs", F.col("key")) < 0).alias("epochless")))
    # a record may have been fetched long before its poll began (the client prefetches):
    # any time after it was written. So a truncation that reset the group can have come
    # then; and the position a commit stores, reached by the read of the record below it,
    # can point past a truncation after that write, even if the poll and the commit came
    # after it
    writer = v.writers.select("key", "value", "w_op").groupBy("key", "value").agg(
        F.min("w_op").alias("w_op"))
    read_below = (v.reads.select("process", "key", "value",
                                 (F.col("offset") + 1).alias("offset"),
                                 F.col("op").alias("read_op"))
                  .join(writer, ["key", "value"], "left")
                  .select("process", "key", "offset", "read_op",
                          F.least(F.coalesce("w_op", "read_op"), "read_op").alias("fetched")))
    commit_ops = (commit_ops.join(read_below, ["process", "key", "offset"], "left")
                  .groupBy("process", "op", "index", "key", "offset", "epochless")
                  .agg(F.min(F.when(F.col("read_op") <= F.col("op"), F.col("fetched")))
                       .alias("fetched"))
                  .select("process", "op", "index", "key", "offset", "epochless",
                          F.least(F.coalesce("fetched", "op"), "op").alias("based")))
    # an event's commit is done by its op's completion; the events are few, so they meet
    # the ops' completions broadcast. Auto-commit's events do not say which epoch they sent.
    commit_events = (h.ops.select("op", "index")
                     .join(F.broadcast(h.events.where(F.col("kind") == "committed")
                                       .select("process", "op", "key", "offset")), "op")
                     .withColumn("epochless", F.lit(None).cast("boolean"))
                     .withColumn("based", F.col("op")))
    commits = commit_ops.unionByName(commit_events).join(members, "process")
    committed = commits.groupBy("group", "key").agg(F.max("offset").alias("committed"))
    # what the group had committed before the last delivery of each record delivered again
    before = (again.select("group", "key", "offset", "value", "last_op")
              .join(F.broadcast(commits.select("group", "key", F.col("index").alias("done"),
                                               F.col("offset").alias("c"))), ["group", "key"])
              .where(F.col("done") < F.col("last_op"))
              .groupBy("group", "key", "offset", "value").agg(F.max("c").alias("committed")))
    again = again.join(before, ["group", "key", "offset", "value"], "left")
    kind = (F.when(F.col("committed_txns") > 1, F.lit(EOS_DUPLICATE))
            .when(F.col("committed") > F.col("offset"), F.lit(GROUP_REWIND))
            .otherwise(F.lit("group-redelivery")))
    start = delivered.groupBy("group", "key").agg(F.min("offset").alias("from_offset"))
    # a record some poll (a final read included) returned is in the log; only the claims
    # between a group's bounds are aggregated, not every claim of the history
    bounds = F.broadcast(committed.join(start, ["group", "key"]))  # groups x keys: small
    # of an offset that held several values (a truncated log refilled), only the one the
    # final reads found is still in the log; the group may have delivered the other
    skipped = (v.obs.where(F.col("read") & (~F.col("incons") | F.col("final")))
               .join(bounds, "key")
               .where((F.col("offset") >= F.col("from_offset"))
                      & (F.col("offset") < F.col("committed")))
               .select("group", "key", "offset", "value", "committed", "from_offset")
               .join(delivered.select("group", "key", "offset", "value").distinct(),
                     ["group", "key", "offset", "value"], "left_anti"))
    skipped = skipped.join(_resumable(commits, skipped), ["group", "key", "offset"], "left")
    order = ["key", "offset"]
    final = F.broadcast(v.final_end.select("key", "final_op"))
    if (h.config or {}).get("auto_offset_reset") == "latest":  # else no rule asks
        skipped = _reset(h, v.reads.join(members, "process"), members, commits, skipped,
                         writer)
    else:
        skipped = skipped.withColumn("reset", F.lit(None).cast("boolean"))
    again = again.join(writer, ["key", "value"], "left")
    return (cases(again, kind, order,
                  ["group", "key", "offset", "value", "deliveries", "op_indexes", "committed"],
                  at(key="key", lo=F.least(F.coalesce("w_op", "first_op"), "first_op"),
                     hi="last_op"))
            .unionByName(cases(skipped.join(final, "key", "left"), F.lit("group-skip"), order,
                               ["group", "key", "offset", "value", "committed", "from_offset",
                                "epochless", "commits_until", "reset"],
                               at(key="key", lo="commits_from", hi="final_op"))))


def _reset(h: History, reads: DataFrame, members: DataFrame, commits: DataFrame,
           skipped: DataFrame, writer: DataFrame) -> DataFrame:
    """``skipped`` with ``reset``: whether a member of the group was assigned the key while
    the group had no committed offset for it, after the record's write was invoked, and
    then first delivered the key above the record, so ``auto.offset.reset`` may have
    started it at a log end past the record (Kafka consumer configs: "What to do when there
    is no initial offset in Kafka"). True when no commit of the group's key had been invoked
    before such an assignment completed; NULL when one was in flight then, or the group's
    members recorded no assignment at all; False when every such assignment came after a
    commit had completed. An out-of-range committed offset resets too, but only after a
    truncation, which the truncating rules judge. ``reads``: the group's members' reads
    (``Versions.reads`` with ``group``)."""
    assigned = (h.events.where((F.col("kind") == "assigned") & F.col("key").isNotNull())
                .join(members, "process")
                .join(h.ops.select("op", F.col("index").alias("a_done")), "op")
                .select("group", "process", "key", F.col("op").alias("a_op"), "a_done"))
    # where each assigned member began: the first offset of the key it delivered after
    a = F.broadcast(assigned.alias("a"))
    began = (reads.alias("r").join(a, (F.col("r.group") == F.col("a.group"))
                                   & (F.col("r.process") == F.col("a.process"))
                                   & (F.col("r.key") == F.col("a.key"))
                                   & (F.col("r.op") >= F.col("a.a_op")))
             .groupBy("a.group", "a.process", "a.key", "a.a_op")
             .agg(F.min(F.struct("r.op", "r.offset")).alias("first"))
             .select("group", "process", "key", "a_op",
                     F.col("first.offset").alias("began")))
    first = commits.groupBy("group", "key").agg(F.min("index").alias("c_done"),
                                                F.min("op").alias("c_op"))
    status = (assigned.join(began, ["group", "process", "key", "a_op"])
              .join(first, ["group", "key"], "left")
              .select("group", "key", "a_done", "began",
                      F.when(F.col("c_done") < F.col("a_op"), F.lit(0))
                      .when(F.col("c_op") < F.col("a_done"), F.lit(1))
                      .otherwise(F.lit(2)).alias("status")))
    recorded = assigned.select("group").distinct().withColumn("recorded", F.lit(True))
    per = (skipped.select("group", "key", "offset", "value").distinct()
           .join(writer, ["key", "value"], "left")
           .join(F.broadcast(status), ["group", "key"])
           .where((F.col("w_op").isNull() | (F.col("a_done") > F.col("w_op")))
                  & (F.col("began") > F.col("offset")))
           .groupBy("group", "key", "offset", "value").agg(F.max("status").alias("status")))
    reset = (F.when(F.col("recorded").isNull() | (F.col("status") == 1), F.lit(None))
             .when(F.col("status") == 2, F.lit(True)).otherwise(F.lit(False)))
    return (skipped.join(per, ["group", "key", "offset", "value"], "left")
            .join(F.broadcast(recorded), "group", "left")
            .withColumn("reset", reset.cast("boolean")).drop("status", "recorded"))


def _resumable(commits: DataFrame, skipped: DataFrame) -> DataFrame:
    """For each skipped ``group, key, offset``: the group's commits above it, from which a
    member may have resumed past it: ``commits_from`` (the earliest of their invoke
    indexes and of the writes of the records whose reads reached the positions they store,
    ``based``: the client may have fetched a record long before its poll),
    ``commits_until`` (the last one's completion index) and ``epochless``: True when one of
    them was sent without a leader epoch, NULL when one of them does not say, else False (a
    member resuming from an offset with its epoch validates it, KIP-320).

    One running aggregate per group and key, down the offsets (a skip sorted before the
    commits of its own offset), rather than a join of every skip with every commit above
    it: both can number in the hundreds of thousands in a long run."""
    none = F.lit(None).cast("long")
    rows = (commits.select("group", "key", "offset", F.col("based").alias("op"), "index",
                           F.col("epochless").cast("int").alias("bare"),
                           F.col("epochless").isNull().cast("int").alias("unsaid"),
                           F.lit(1).alias("commit"))
            .unionByName(skipped.select("group", "key", "offset").distinct()
                         .select("group", "key", "offset", none.alias("op"),
                                 none.alias("index"), F.lit(None).cast("int").alias("bare"),
                                 F.lit(None).cast("int").alias("unsaid"),
                                 F.lit(0).alias("commit"))))
    above = (Window.partitionBy("group", "key").orderBy(F.desc("offset"), "commit")
             .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (rows.select("group", "key", "offset", "commit",
                        F.min("op").over(above).alias("commits_from"),
                        F.max("index").over(above).alias("commits_until"),
                        F.max("bare").over(above).alias("bare"),
                        F.max("unsaid").over(above).alias("unsaid"))
            .where(F.col("commit") == 0)
            .select("group", "key", "offset", "commits_from", "commits_until",
                    F.when(F.col("bare") == 1, F.lit(True))
                    .when(F.col("unsaid") == 1, F.lit(None))
                    .otherwise(F.lit(False)).alias("epochless")))
