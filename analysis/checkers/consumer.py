"""Consumer-side delivery of consumer groups (beyond Jepsen): ``group-skip``, ``group-redelivery``.

A consumer group promises each record of its partitions to one member at a time, resuming after
a rebalance from the committed offsets (Kafka docs: "Consumer Position", "Offset Management";
seed 002: auto-commit is at-most-once when offsets are committed before processing, manual commit
after processing at-least-once). Over the members of one group (processes that ``subscribe``d
with it, ``docs/history-format.md``):

- ``group-skip``: a record known to be in the log (some poll, the final reads included, read it)
  at an offset the group's consumers had started on (>= the lowest offset the group delivered)
  and below an offset the group committed, that no member ever delivered: the group moved its
  committed position past a record it never handed to any member (at-most-once loss).
- ``group-redelivery``: a record delivered by more than one op of the group's members (after a
  rebalance, a crashed member, or an aborted transaction that seeked back): at-least-once.

These are consumer-side: the record is in the log, so they are reported apart from ``lost-write``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import MAX_OPS_PER_EXAMPLE, cases, no_cases
from kafka_chaos.analysis.checkers.versions import Versions
from kafka_chaos.analysis.load import History


def groups(h: History) -> DataFrame:
    """``process, group``: the consumer group of every process that subscribed."""
    return (h.ops.where((F.col("f") == "subscribe") & (F.col("type") == "ok"))
            .select("process", F.get_json_object("inv", "$.group").alias("group"))
            .where(F.col("group").isNotNull()).distinct())


def delivery(h: History, v: Versions) -> DataFrame:
    """The cases of ``group-skip`` and ``group-redelivery``.

    Examples: ``group, key, offset, value``; for redeliveries ``deliveries`` (how many ops
    delivered it) and ``op_indexes`` (their invoke indexes, first 10); for skips
    ``committed`` (the group's highest committed offset of the key) and ``from_offset``.
    """
    if not h.counts.get("subscribe", {}).get("ok"):  # no consumer group: nothing to scan
        return no_cases(h.ops.sparkSession)
    members = F.broadcast(groups(h))  # a few processes
    delivered = (v.reads.join(members, "process")
                 .select("group", "key", "offset", "value", "op"))
    redelivered = (delivered.groupBy("group", "key", "offset")
                   .agg(F.first("value").alias("value"),
                        F.countDistinct("op").alias("deliveries"),
                        F.slice(F.array_sort(F.collect_set("op")), 1, MAX_OPS_PER_EXAMPLE)
                        .alias("op_indexes"))
                   .where(F.col("deliveries") > 1))
    commit_ops = (h.ops.where((F.col("f") == "commit") & (F.col("type") == "ok"))
                  .select("process", F.explode(F.from_json(
                      F.get_json_object("inv", "$.offsets"), "map<string,bigint>")))
                  .select("process", F.col("key").cast("long").alias("key"),
                          F.col("value").alias("offset")))
    commit_events = (h.events.where(F.col("kind") == "committed")
                      .select("process", "key", "offset"))
    committed = (commit_ops.unionByName(commit_events).join(members, "process")
                 .groupBy("group", "key").agg(F.max("offset").alias("committed")))
    start = delivered.groupBy("group", "key").agg(F.min("offset").alias("from_offset"))
    # a record some poll (a final read included) returned is in the log; only the claims
    # between a group's bounds are aggregated, not every claim of the history
    bounds = F.broadcast(committed.join(start, ["group", "key"]))  # groups x keys: small
    skipped = (v.obs.where(F.col("read")).join(bounds, "key")
               .where((F.col("offset") >= F.col("from_offset"))
                      & (F.col("offset") < F.col("committed")))
               .groupBy("group", "key", "offset")
               .agg(F.min("value").alias("value"), F.first("committed").alias("committed"),
                    F.first("from_offset").alias("from_offset"))
               .join(delivered.select("group", "key", "offset").distinct(),
                     ["group", "key", "offset"], "left_anti"))
    order = ["key", "offset"]
    return (cases(redelivered, F.lit("group-redelivery"), order,
                  ["group", "key", "offset", "value", "deliveries", "op_indexes"])
            .unionByName(cases(skipped, F.lit("group-skip"), order,
                               ["group", "key", "offset", "value", "committed", "from_offset"])))
