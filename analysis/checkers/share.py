"""Share groups (KIP-932): what the ``share`` ops of a run (``workloads.share``) must show.

A *delivery* is one record a ``share`` op returned: ``key, offset, value, count`` (the
delivery count the broker sent), ``ack`` (accept, release, reject, or null: none sent) and
its result (``ok``, an error, or unknown). A delivery *settled* the record when its
``accept`` or ``reject`` was acknowledged ``ok``.

Delivery ``a`` comes *before* ``b`` when ``b``'s record was surely acquired after ``a``'s op
completed. A share consumer fetches ahead and returns buffered records in later polls (seen
here: a consumer handed its application records it had acquired seconds before, whose lock
had expired and which another consumer had meanwhile accepted), so the op that returns a
record does not bound when it was acquired: only the consumer's first op does. So ``a``
comes before ``b`` when ``b``'s consumer began after ``a``'s op completed, or when both are
of one consumer and ``a``'s op came first (the broker does not give a member a record it
holds, so the member's second copy was acquired after the first was given up).

- ``share-lost``: an acknowledged write that the final reads found in the log, that no
  delivery settled (nor may have: an acknowledgement of unknown result counts), and that never
  reached the delivery limit (a record whose last delivery was released or expired at
  ``group.share.delivery.count.limit`` is archived), although the final drain
  (``workloads.share.drain``) ended quiet. KIP-932: "the delivery behavior is at-least-once".
  Such a record is ``share-not-judged`` (the verdict is unknown) without a quiet drain, or
  when acquisitions no op recorded could have taken it to the limit: its highest recorded
  delivery count plus the consumers that may have held it unreturned when they ended
  reaches the limit (``_takers``). Unless, then, the share coordinator persisted it as
  archived at the limit (``_persisted``): it was not lost.
- ``share-accepted-twice``: two deliveries of one record both accepted ``ok``.
- ``share-after-ack``: a delivery after an earlier one settled the record (KIP-932: an
  Acknowledged or Archived record is not delivered again).
- ``share-count-regress``: two deliveries of a record with one delivery count, or a delivery
  whose count is below an earlier delivery's (KIP-932: "Every time that a record is acquired
  by a consumer in a share group, its delivery count increments by 1").
  ``state_write_failed``: an acknowledgement on that share-partition failed, or has an
  unknown outcome, after either consumer began and before the later delivery; the state
  write behind it may have failed, and KIP-932's counts are then imprecise
  (``analysis.promises``).
- ``share-over-limit``: a delivery count above the limit (KIP-932: at the limit the record
  "moves into Archived state and is not eligible for additional delivery attempts").
- ``share-lock-overlap``: a delivery to another process while an earlier delivery's lock
  surely held: the earlier one sent no acknowledgement (a refused one may mean that the lock
  had expired: KIP-932's ``InvalidRecordStateException``) and the later op completed
  within ``group.share.record.lock.duration.ms`` of the earlier consumer's first op (the
  earliest it could have acquired the record: ``deliveries``), so the lock could not have
  expired. ``ended_by``: ``gone`` when the earlier process had crashed (or ended ``info``)
  before, which ends its share session and releases its records (Kafka
  ``SharePartition.releaseAcquiredRecords``), else ``held``.
- ``share-redelivery``: a delivery after an earlier one that did not settle the record
  (``after``: ``release``, ``no-ack``: the lock expired or its holder crashed,
  ``ack-refused`` or ``ack-unknown``): what KIP-932 permits, counted.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import at, cases, no_cases
from kafka_chaos.analysis.load import History
from kafka_chaos.catalogue.anomalies import (SHARE_ACCEPTED_TWICE, SHARE_AFTER_ACK,
                                             SHARE_COUNT_REGRESS, SHARE_LOCK_OVERLAP, SHARE_LOST,
                                             SHARE_OVER_LIMIT, SHARE_REDELIVERY, SHARE_UNJUDGED)

_DONE = "records array<array<string>>, acks map<string,string>, drained boolean"
_SETTLING = ("accept", "reject")
#: Acknowledgement results that say the broker did not apply it (KIP-932: a record whose lock
#: expired "will fail with ... InvalidRecordStateException"; a request to a replica that does
#: not lead the partition, or in a share session the broker no longer knows, is refused whole).
#: Any other error (a broken connection: librdkafka's ``_TRANSPORT``, a timeout) leaves the
#: outcome unknown: the acknowledgement may have been applied.
REFUSED = ("INVALID_RECORD_STATE", "NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION",
           "SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH", "FENCED_LEADER_EPOCH",
           "UNKNOWN_TOPIC_ID", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED")


def deliveries(h: History) -> DataFrame:
    """``op, index, process, type, invoke_time, time, since_op, since_ns, pos, key, offset,
    value, count, ack, result, settled, maybe_settled``: one row per record a completed
    ``share`` op returned. ``result``: the acknowledgement's ``ok`` or error, NULL when none
    was sent or its outcome is unknown; ``settled``: an ``accept``/``reject`` acknowledged
    ``ok``; ``maybe_settled``: one of unknown outcome (no result, or an error not in
    ``REFUSED``). ``since_op``, ``since_ns``: the invoke index and time of the process's
    first ``share`` op, the earliest its consumer could have acquired the record: a share
    consumer fetches ahead and returns buffered records in later polls, so the op that
    returns a record does not bound its acquisition."""
    share_ops = h.ops.where(F.col("f") == "share")
    since = share_ops.groupBy("process").agg(F.min("op").alias("since_op"),
                                             F.min("invoke_time").alias("since_ns"))
    ops = (share_ops.where(F.col("type").isin("ok", "info")).join(since, "process")
           .select("op", "index", "process", "type", "invoke_time", "time", "since_op",
                   "since_ns", F.from_json("done", _DONE).alias("v")))
    recs = ops.select("op", "index", "process", "type", "invoke_time", "time", "since_op",
                      "since_ns", F.col("v.acks").alias("acks"),
                      F.posexplode("v.records").alias("pos", "r"))
    key = F.col("r")[0].cast("long")
    ack = F.col("r")[4]
    result = F.when(ack.isNotNull(), F.col("acks")[F.col("r")[0]])
    settling = ack.isin(*_SETTLING)
    return recs.select(
        "op", "index", "process", "type", "invoke_time", "time", "since_op", "since_ns", "pos",
        key.alias("key"), F.col("r")[1].cast("long").alias("offset"),
        F.col("r")[2].cast("long").alias("value"), F.col("r")[3].cast("int").alias("count"),
        ack.alias("ack"), result.alias("result"),
        F.coalesce(settling & (result == "ok"), F.lit(False)).alias("settled"),
        F.coalesce(settling & ((result.isNull() | (F.col("type") == "info"))
                               | ~result.isin("ok", *REFUSED)),
                   F.lit(False)).alias("maybe_settled"))


def _example(a: str | None, b: str, **more: Column) -> list[Column]:
    procs = F.array(f"{a}.process", f"{b}.process") if a else F.array(f"{b}.process")
    ops = F.array(f"{a}.op", f"{b}.op") if a else F.array(f"{b}.op")
    counts = F.array(f"{a}.count", f"{b}.count") if a else F.array(f"{b}.count")
    return [F.col(f"{b}.key").alias("key"), F.col(f"{b}.value").alias("value"),
            F.col(f"{b}.offset").alias("offset"), procs.alias("processes"),
            ops.alias("op_indexes"), counts.alias("delivery_counts"),
            *(c.alias(n) for n, c in more.items())]


def check(h: History) -> DataFrame:
    """The cases (``common.cases``) of every share anomaly of the module docstring, and of
    ``share-not-judged``. Examples: ``key, value, offset, processes, op_indexes`` (invoke
    indexes of the deliveries' ops, earlier first), ``delivery_counts``; ``settled_by``
    (after an acknowledgement), ``state_write_failed`` (counts that go back), ``limit``
    (over the limit), ``ended_by`` and ``lock_ms`` (lock overlaps), ``after``
    (redeliveries); a lost record's ``op`` (its writer), ``deliveries`` and
    ``max_delivery_count``."""
    if not h.counts.get("share"):
        return no_cases(h.ops.sparkSession)
    config = h.config or {}
    limit, lock_ms = config.get("share_delivery_limit"), config.get("share_lock_ms")
    d = deliveries(h)
    a, b = d.alias("a"), d.alias("b")
    # a record is its offset in its partition: a value a retrying producer wrote twice is two
    # records of the share-partition
    same = ((F.col("a.key") == F.col("b.key")) & (F.col("a.offset") == F.col("b.offset"))
            & (F.col("a.value") == F.col("b.value")))
    pairs = a.join(b, same & _before("a", "b"))
    where = at(key="b.key", lo="a.op", hi="b.op")
    # each two deliveries once: a count that went back, or one count for two acquisitions
    # (in whatever order they came: KIP-932's count rises with every acquisition)
    both = a.join(b, same & ((F.col("a.op") < F.col("b.op"))
                             | ((F.col("a.op") == F.col("b.op"))
                                & (F.col("a.pos") < F.col("b.pos")))))
    regress = _state_writes(both.where(
        (F.col("a.count") == F.col("b.count"))
        | (_before("a", "b") & (F.col("b.count") < F.col("a.count")))
        | (_before("b", "a") & (F.col("a.count") < F.col("b.count")))), d)
    out = [
        cases(regress, F.lit(SHARE_COUNT_REGRESS), ["b_op", "b_pos", "a_op"],
              ["key", "value", "offset", F.array("a_process", "b_process").alias("processes"),
               F.array("a_op", "b_op").alias("op_indexes"),
               F.array("a_count", "b_count").alias("delivery_counts"), "state_write_failed"],
              at(key="key", lo=F.least("a_since_op", "b_since_op"), hi="b_op")),
        cases(pairs.where("a.settled"), F.lit(SHARE_AFTER_ACK), ["b.op", "b.pos", "a.op"],
              _example("a", "b", settled_by=F.col("a.ack")), where),
        cases(a.join(b, same & (F.col("a.op") < F.col("b.op"))
                     & (F.col("a.ack") == "accept") & (F.col("a.result") == "ok")
                     & (F.col("b.ack") == "accept") & (F.col("b.result") == "ok")),
              F.lit(SHARE_ACCEPTED_TWICE), ["b.op", "b.pos", "a.op"], _example("a", "b"),
              where),
        _redeliveries(pairs),
    ]
    if limit is not None:
        out.append(cases(d.alias("b").where(F.col("count") > limit), F.lit(SHARE_OVER_LIMIT),
                         ["b.op", "b.pos"], _example(None, "b", limit=F.lit(limit)),
                         at(key="b.key", lo="b.op", hi="b.op")))
    if lock_ms is not None:
        out.append(_overlaps(h, pairs, lock_ms))
    out.append(_unsettled(h, d, limit))
    frame = out[0]
    for more in out[1:]:
        frame = frame.unionByName(more)
    return frame


def _before(a: str, b: str) -> Column:
    """Delivery ``a`` comes before ``b`` (the module docstring)."""
    return ((F.col(f"{a}.time") < F.col(f"{b}.since_ns"))
            | ((F.col(f"{a}.process") == F.col(f"{b}.process"))
               & (F.col(f"{a}.index") < F.col(f"{b}.op"))))


def _state_writes(pairs: DataFrame, d: DataFrame) -> DataFrame:
    """``pairs`` as ``key, value, offset`` and ``op, pos, process, count, since_op`` of each
    side (``a_op``, ``b_op``, ...) with ``state_write_failed``: an acknowledgement of the same
    share-partition failed other than by refusing its records (``INVALID_RECORD_STATE``), or
    has an unknown outcome, after either delivery's consumer began (their acquisitions may
    be that old) and before the later delivery. The share-partition leader writes its state
    through the share coordinator before it answers an acknowledgement; when that write
    fails, the state the partition goes on from may miss acquisitions."""
    failed = (d.where(F.col("ack").isNotNull()
                      & (F.col("result").isNull()
                         | ~F.col("result").isin("ok", "INVALID_RECORD_STATE")))
              .select(F.col("key").alias("f_key"), F.col("op").alias("f_op")).distinct())
    flat = pairs.select(
        F.col("b.key").alias("key"), F.col("b.value").alias("value"),
        F.col("b.offset").alias("offset"),
        *(F.col(f"{side}.{c}").alias(f"{side}_{c}") for side in "ab"
          for c in ("op", "pos", "process", "count", "since_op")))
    hit = ((F.col("f_key") == F.col("key"))
           & F.col("f_op").between(F.least("a_since_op", "b_since_op"), F.col("b_op")))
    return (flat.join(F.broadcast(failed), hit, "left")
            .groupBy(*flat.columns)
            .agg(F.max(F.col("f_op").isNotNull()).alias("state_write_failed")))


def _redeliveries(pairs: DataFrame) -> DataFrame:
    """One ``share-redelivery`` per later delivery: after the latest earlier delivery that
    did not settle the record."""
    unsettled = pairs.where("not a.settled")
    latest = (unsettled.groupBy("b.op", "b.pos")
              .agg(F.max(F.struct("a.op", "a.process", "a.count", "a.ack", "a.result"))
                   .alias("prev"), F.first("b.key").alias("key"),
                   F.first("b.value").alias("value"), F.first("b.offset").alias("offset"),
                   F.first("b.process").alias("process"), F.first("b.count").alias("count")))
    after = (F.when(F.col("prev.ack").isNull(), F.lit("no-ack"))
             .when(F.col("prev.result") == "ok", F.col("prev.ack"))
             .when(F.col("prev.result").isin(*REFUSED), F.lit("ack-refused"))
             .otherwise(F.lit("ack-unknown")))
    return cases(latest, F.lit(SHARE_REDELIVERY), ["op", "pos"],
                 [F.col("key"), F.col("value"), F.col("offset"),
                  F.array("prev.process", "process").alias("processes"),
                  F.array("prev.op", "op").alias("op_indexes"),
                  F.array("prev.count", "count").alias("delivery_counts"), after.alias("after")],
                 at(key="key", lo="prev.op", hi="op"))


def _overlaps(h: History, pairs: DataFrame, lock_ms: int) -> DataFrame:
    """``share-lock-overlap`` cases (module docstring)."""
    gone = (h.ops.where((F.col("f") == "crash") | (F.col("type") == "info"))
            .groupBy(F.col("process").alias("gone_process")).agg(F.min("op").alias("gone_at")))
    # only a delivery nothing acknowledged surely kept its lock: a refused acknowledgement
    # may mean the lock had already expired (KIP-932: InvalidRecordStateException)
    held = F.col("a.ack").isNull()
    found = (pairs.where(held & (F.col("a.process") != F.col("b.process"))
                         & (F.col("b.time") < F.col("a.since_ns") + lock_ms * 1_000_000))
             .join(F.broadcast(gone), F.col("a.process") == F.col("gone_process"), "left"))
    ended = F.when(F.col("gone_at") < F.col("b.index"), F.lit("gone")).otherwise(F.lit("held"))
    return cases(found, F.lit(SHARE_LOCK_OVERLAP), ["b.op", "b.pos", "a.op"],
                 _example("a", "b", ended_by=ended, lock_ms=F.lit(lock_ms)),
                 at(key="b.key", lo="a.since_op", hi="b.op"))


def _unsettled(h: History, d: DataFrame, limit: int | None) -> DataFrame:
    """``share-lost`` cases, or ``share-not-judged`` ones (``why``: ``no-quiet-drain``, or
    ``unrecorded-acquisitions`` with ``consumers``, how many could have taken the record)."""
    drained = (h.ops.where((F.col("f") == "share") & (F.col("type") == "ok"))
               .where(F.get_json_object("done", "$.drained") == "true").limit(1).count() > 0)
    in_log = h.reads.where("final").select("key", "offset", "value").distinct()
    acked = (h.sends.where(F.col("offset").isNotNull())
             .select("key", "value", "offset", F.col("op").alias("writer")))
    seen = d.groupBy("key", "offset", "value").agg(
        F.max(F.col("settled") | F.col("maybe_settled")).alias("settled"),
        F.max("count").alias("max_count"), F.count(F.lit(1)).alias("deliveries"))
    archived = F.col("max_count") >= limit if limit is not None else F.lit(False)
    missing = (acked.join(in_log, ["key", "offset", "value"])
               .join(seen, ["key", "offset", "value"], "left")
               .where(~F.coalesce(F.col("settled"), F.lit(False))
                      & ~F.coalesce(archived, F.lit(False))))
    takers = _takers(h, missing)
    # without the limit, no count says the record was not archived
    unrecorded = (F.lit(True) if limit is None else
                  F.coalesce("max_count", F.lit(0)) + F.col("consumers") >= limit)
    if limit is not None:  # the coordinator's account clears what unseen acquisitions explain
        persisted = _persisted(h).where(F.col("p_count") >= limit)
        cleared = takers.join(F.broadcast(persisted),
                              (F.col("key") == F.col("p_key"))
                              & F.col("offset").between(F.col("p_first"), F.col("p_last")),
                              "left_semi")
        record = ["key", "offset", "value"]  # never null, unlike a count never seen
        takers = takers.join(cleared.where(unrecorded).select(*record), record, "left_anti")
    kind = (F.when(F.lit(not drained), F.lit(SHARE_UNJUDGED))
            .when(unrecorded, F.lit(SHARE_UNJUDGED)).otherwise(F.lit(SHARE_LOST)))
    why = (F.when(F.lit(not drained), F.lit("no-quiet-drain"))
           .when(unrecorded, F.lit("unrecorded-acquisitions")))
    return cases(takers, kind, ["writer", "offset"],
                 [F.col("key"), F.col("value"), F.col("offset"), F.col("writer").alias("op"),
                  F.coalesce(F.col("deliveries"), F.lit(0)).alias("deliveries"),
                  F.col("max_count").alias("max_delivery_count"), "consumers",
                  why.alias("why")],
                 at(key="key", lo="writer", writer="writer"))


def _persisted(h: History) -> DataFrame:
    """``p_key, p_first, p_last, p_count``: the batches the share coordinator persisted as
    archived, with their delivery counts (the monitor's ``share-state`` op, read from
    ``__share_group_state`` after the drain: ``clusters.share_state``). A record in one with
    a count at the limit was archived there by the broker's own account, its last
    acquisitions by consumers that ended holding them (``_takers``): not lost."""
    ops = h.pairs.where((F.col("process") == "monitor") & (F.col("f") == "share-state")
                        & (F.col("type") == "ok"))
    batches = ops.select(F.explode(F.from_json(
        F.get_json_object("done", "$.archived"), "map<string,array<array<long>>>"))
        .alias("k", "bs")).select("k", F.explode("bs").alias("b"))
    return batches.select(F.col("k").cast("long").alias("p_key"),
                          F.col("b")[0].alias("p_first"), F.col("b")[1].alias("p_last"),
                          F.col("b")[2].alias("p_count"))


def _takers(h: History, missing: DataFrame) -> DataFrame:
    """``missing`` with ``consumers``: how many share consumers may have acquired its record
    without any op recording it, which is every one the run had. A consumer fetches ahead of
    its application (the module docstring) and what it holds when it ends, by a crash or at
    the end of the workload, no op returns; the broker counts those acquisitions all the
    same, and a record whose last one reached ``group.share.delivery.count.limit`` is
    archived unseen (KIP-932). Even a consumer that ended early counts: a ShareFetch it sent
    before may be served later (by a broker that was paused, say), acquiring records then.
    A consumer is taken to hold one copy of a record at most (the broker does not give a
    member a record it holds)."""
    n = (h.ops.where(F.col("f") == "share").select("process").distinct().count())
    return missing.withColumn("consumers", F.lit(n))
