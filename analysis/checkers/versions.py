"""Version orders, acknowledged writes and writers: the tables every checker reads.

Source: Jepsen's ``jepsen.tests.kafka`` (jepsen-io/jepsen, ``jepsen/src/jepsen/tests/kafka.clj``):
``version-orders`` (offsets -> values per key from every poll, and from sends "when we can prove
their effects were visible"), ``must-have-committed?`` and ``writer-of``. Positions in a key's
version order are *dense* indexes over the offsets that hold a value, so the offset gaps that
transaction markers leave are never mistaken for skipped records (and no array is ever indexed
by a raw offset: maelstrom issue 51).

How it is computed, for speed (``docs/performance.md``): reads and sends are each shuffled once,
by key, sorted once (the polls' reads in the order their windows need, a process's reads of a
key; the sends by value and key, for the joins) and cached. The final reads only add claims to
the version order: they are shuffled by key for that aggregation and neither sorted nor
cached. Everything about a key's version order comes from ``obs``, one row per distinct (key,
offset, value), about as many rows as there are sends whatever the number of reads: it is
aggregated from the cached tables, ranked by offset, and joined to the writers on (key,
value) within each partition (``writers_join``), with no shuffle on the way: each table is
computed before the next is planned (``versions``).
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Callable

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis.load import History, is_f, is_type
from kafka_chaos.analysis.spark import SMALL_HISTORY_OPS

#: Node types of the dependency graph: a ``fail``ed op did not happen (``cycles``).
NODE_TYPES = ("ok", "info", "pending")
#: Most rows ``Versions.reads_of`` takes as literals.
LITERALS = 1000
#: The most key partitions per core ``key_partitions`` considers.
MAX_PARTITIONS_PER_CORE = 16
#: The order of the columns that joins on (key, value) name, and so of the sorts before a
#: sort-merge join: ``value`` first. Spark sorts by a prefix of the first column and compares
#: whole rows only where the prefixes tie, and a partition holds one key or a few (the key
#: shuffle): sorted by ``key`` first, nearly every comparison was of whole rows. 9 M sends
#: sorted by (key, value) took 0.6 s more than a scan, by (value, key) 0.4 s
#: (``docs/performance.md``). Every table is still partitioned by ``key`` alone.
BY_VALUE = ["value", "key"]


@dataclasses.dataclass(frozen=True)
class Versions:
    """What the checkers share: cached tables, all partitioned by ``key``. ``unpersist()``
    when done.

    - ``sends``: one row per send micro-op, sorted by value and key: ``key, value,
      offset, op, index, process, f, type, pos``; ``acked``: acknowledged: a send of an ``ok``
      op; of an ``info`` non-transactional op whose delivery report gave an offset (a delivery
      report is an acknowledgement, ``docs/history-format.md``); of an ``info`` transaction
      proven committed because an ``ok`` op read one of its values (Jepsen
      ``must-have-committed?``; not under ``read_uncommitted``, where reading a value proves
      nothing about its transaction). With the value's facts: ``vidx`` (its first position in
      the version order, NULL if never observed), ``read_any``, ``read_final`` (some read,
      some final read returned it).
    - ``reads``: one row per record a poll returned (final reads apart), sorted by process,
      key, op, pos, rec: ``key, offset, value, op, process, pos, rec, type, f``.
    - ``finals``: one row per record a final read returned: ``key, offset, value, op, type``;
      not cached (read again from the columnar copy, which keeps them after the polls' rows).
    - ``obs``: one row per distinct claim ``key, offset, value``: every read's (of ``ok``,
      ``info`` and ``fail`` ops alike: "pollers in Kafka's transaction design are *always*
      supposed to emit safe data", Jepsen ``version-orders``) and every acknowledged send's
      that carries an offset. ``idx``: the offset's dense position in the key's version order;
      ``incons``: the offset holds more than one value; ``read_at``: a non-final read returned
      a record at the offset; ``read``, ``final``, ``nonfinal``, ``read_ok``: some read, final
      read, non-final read, read of an ``ok`` op returned the claim; ``w_op, w_type``: who
      sent the value (Jepsen ``writer-of``; NULL for a value nobody sent). Sorted by value and
      key for a large history (``writers_join``).
    - ``writers``: ``key, value, w_op, w_type, w_f``: one row per send micro-op.
    - ``final_end``: ``key, final_end, final_op`` for the keys whose final reads reached the
      end of the partition: where they ended (the largest range end) and the invoke index of
      the read that got there.
    """

    sends: DataFrame
    reads: DataFrame
    finals: DataFrame
    obs: DataFrame
    writers: DataFrame
    final_end: DataFrame
    _cached: tuple[DataFrame, ...] = ()

    def reads_of(self, few: DataFrame, on: list[str], *cols: str,
                 rows: list | None = None) -> DataFrame:
        """``on``, ``cols`` and ``final`` (bool) of every record read, the final reads'
        included, that matches a row of ``few`` on ``on`` (with ``few``'s other columns).
        ``few``: a few rows (anomalies found): hashed beside each partition of ``reads``
        (partitioned by key, so ``on`` must hold ``key``), and broadcast to a scan of the
        final reads, so neither table is shuffled. ``cols`` must be columns of ``finals``.

        ``rows``: ``few``'s rows, collected (at most ``LITERALS``): both tables are then
        filtered first by the values each ``on`` column takes in them, as literals (the final
        reads of other keys are skipped before their records are exploded), and ``few`` is
        broadcast to the little that is left (``docs/performance.md``)."""
        reads, finals = self.reads, self.finals
        join = few.hint("shuffle_hash")
        if rows is not None:
            known = F.lit(True)
            for c in on:
                known = known & F.col(c).isin(sorted({r[c] for r in rows}))
            reads, finals, join = reads.where(known), finals.where(known), F.broadcast(few)
        return (reads.select(*on, *cols, F.lit(False).alias("final")).join(join, on)
                .unionByName(finals.select(*on, *cols, F.lit(True).alias("final"))
                             .join(F.broadcast(few), on)))

    def unpersist(self) -> None:
        """Drop the cached tables."""
        for df in self._cached:
            df.unpersist()


def writers_join(h: History) -> str:
    """The join hint for joining claims or reads to their writers on (key, value): a shuffled
    hash join for a small history (no sort of either side), a sort-merge join for a large one.
    A hash join holds every writer of its partition's keys in memory, and the analysis
    partitions by key alone, so more partitions do not shrink a big key: a 10 M-op history
    whose sends go to 8 keys ran out of a 2 GiB heap, and of a 3 GiB one with the parallel
    collector ("There is not enough memory to build hash map"); a sort spills instead
    (``docs/performance.md``)."""
    return "shuffle_hash" if h.n_ops < SMALL_HISTORY_OPS else "merge"


def key_partitions(h: History, cores: int) -> int:
    """How many partitions the key shuffle of a large history makes: of ``cores`` to
    ``MAX_PARTITIONS_PER_CORE`` x ``cores``, the count whose partitions (Spark's
    ``HashPartitioning``: the Murmur3 ``hash`` of the key modulo the count) spread the keys'
    sends most evenly over ``cores`` cores, each partition a task given to the least busy
    core, largest first; among equals, the one whose largest partition is smallest, then the
    smaller count. A key is never split, and with a few large keys (a topic's partitions) a
    count chosen blind can leave a core idle: 4 partitions of the 8 large keys of the bench
    histories held 3, 3, 2 and 0 keys, so every stage over them took 5 keys' time on one core
    where 4 would do. And the smaller a task, the less its sorts and aggregations spill:
    7 partitions held those 8 keys 3, 3, 1 and 1 (as even over 2 cores as 8 alone), 25 one
    each, and with one each the shared tables of a 10 M-op history took 2-4 s less
    (``docs/performance.md``).

    The sends per key come from the columnar copy's ``meta.json`` (``History.sends_by_key``),
    and Spark hashes just those keys, a table of one row per key: counting them was a job
    scanning every send (2.7-3.4 s at 10 M ops). A copy made before it counted them is
    scanned so."""
    counts = range(max(1, cores), MAX_PARTITIONS_PER_CORE * max(1, cores) + 1)
    # Spark's hash of each key, once: its partition among p is pmod(hash, p), Python's ``%``
    # for a positive p. A column per count, and a list of every partition and core per count
    # below, took 29.6 s for the 3,200 counts of a 200-core cluster; this 0.11 s (1 run each)
    hashed = F.hash("key").alias("h")
    if h.sends_by_key is not None:
        rows = []
        if h.sends_by_key:  # a VALUES table is a local relation: no scan, no Python worker
            keys = h.sends.sparkSession.sql(
                "SELECT CAST(col1 AS BIGINT) AS key FROM VALUES "
                + ", ".join(f"({k})" for k in h.sends_by_key))
            rows = [(r["h"], h.sends_by_key[r["key"]])
                    for r in keys.select("key", hashed).collect()]
    else:
        rows = [(r["h"], r["n"]) for r in (h.sends.groupBy("key")
                                           .agg(F.count(F.lit(1)).alias("n"))
                                           .select(hashed, "n").collect())]

    # per count, only the partitions that hold keys, onto a heap of the cores' loads
    def cost(p: int) -> tuple[int, int, int]:
        tasks: dict[int, int] = {}
        for hash_, n in rows:
            tasks[hash_ % p] = tasks.get(hash_ % p, 0) + n
        busy = [0] * max(1, cores)
        for t in sorted(tasks.values(), reverse=True):
            heapq.heapreplace(busy, busy[0] + t)
        return max(busy), max(tasks.values(), default=0), p

    return min(counts, key=cost)


def proven_txns(h: History) -> DataFrame:
    """``op``: ``info`` transactions an ``ok`` op read a value of (Jepsen
    ``must-have-committed?``). The ``info`` transactions are few, so they are broadcast; the
    reads are ``History.read_values``, where only the values' lists are exploded: at 10 M ops
    this query took 1.9-2.1 s alone (warm) against 2.6-3.2 s over ``History.reads``, which
    zips the offsets and values into records first (``docs/performance.md``)."""
    info = (h.sends.where(is_f("f", "txn") & is_type("type", "info"))
            .select("op", "key", "value"))
    read = h.read_values.where(is_type("type", "ok")).select("key", "value")
    return read.join(F.broadcast(info), ["key", "value"]).select("op").distinct()


#: The bits of a claim's flag in the aggregation of claims (``_versions``).
_FLAGS = {"read": 1, "final": 2, "nonfinal": 4, "read_ok": 8}


def _any(cond: Column) -> Column:
    return F.max(cond.cast("int")) == 1


def versions(h: History, partitions: int) -> Versions:
    """Compute and cache the ``Versions`` of a loaded history (one Spark job per table).
    ``partitions``: how many partitions the key shuffle makes (a key is never split).

    Each cached table is computed before the tables built from it are planned. Spark plans a
    cached table when it is persisted, and under adaptive query execution (off in the
    analysis's sessions, ``spark._runtime_settings``, but a user's ``--spark-conf`` may turn
    it on) a cached table reports its partitioning by key only once it is computed: planned
    earlier, the claims' aggregation and window and the joins to the writers shuffled the
    cached rows all over again (``docs/performance.md``). What is cached is dropped again if
    this raises.
    """
    cached: list[DataFrame] = []
    try:
        return _versions(h, partitions, lambda df: _cache(df, cached))
    except BaseException:
        for df in cached:
            df.unpersist()
        raise


def _versions(h: History, partitions: int,
              cache: Callable[[DataFrame], DataFrame]) -> Versions:
    # Final reads are a third of the records at 10 M ops and no window looks at them: kept out
    # of the sort and the cache (the union of both for the claims needs no shuffle, both
    # being partitioned alike)
    r = cache(h.reads.where(~F.col("final"))
               .select("key", "offset", "value", "op", "process", "pos", "rec", "type", "f")
               .repartition(partitions, "key")
               .sortWithinPartitions("process", "key", "op", "pos", "rec"))
    finals = h.reads.where(F.col("final")).select("key", "offset", "value", "op", "type")
    committed_proof = (h.config or {}).get("isolation_level") != "read_uncommitted"
    is_ok, is_info = is_type("type", "ok"), is_type("type", "info")
    acked = is_ok | (is_info & is_f("f", "send") & F.col("offset").isNotNull())
    sends = h.sends
    if committed_proof and h.counts.get("txn", {}).get("info"):
        proven = proven_txns(h).withColumn("proven", F.lit(True))
        sends = sends.join(F.broadcast(proven), "op", "left")
        acked = acked | (is_info & is_f("f", "txn") & F.coalesce("proven", F.lit(False)))
    # shuffled and sorted once for the two joins on (key, value) below, then dropped
    s0 = cache(sends.select("key", "value", "offset", "op", "index", "process", "f", "type",
                             "pos", acked.alias("acked"))
               .repartition(partitions, "key")
               .sortWithinPartitions(*BY_VALUE))
    # one aggregation of every read and acknowledged send (aggregating the reads first, then
    # their union with the sends, built two hash tables of every claim); what each claim is
    # goes in as bits of one flag, or-ed: the aggregation alone at 10 M ops, 5.8-6.3 s against
    # 6.4-6.8 s for four aggregates of booleans
    ok = F.when(is_type("type", "ok"), _FLAGS["read_ok"]).otherwise(0)
    claims = (r.select("key", "offset", "value",
                       (ok + _FLAGS["read"] + _FLAGS["nonfinal"]).alias("flags"))
              .unionByName(finals.repartition(partitions, "key")
                           .select("key", "offset", "value",
                                   (ok + _FLAGS["read"] + _FLAGS["final"]).alias("flags")))
              .unionByName(s0.where(F.col("acked") & F.col("offset").isNotNull())
                           .select("key", "offset", "value", F.lit(0).alias("flags")))
              .groupBy("key", "offset", "value").agg(F.bit_or("flags").alias("flags"))
              .select("key", "offset", "value",
                      *((F.col("flags").bitwiseAND(bit) != 0).alias(name)
                        for name, bit in _FLAGS.items())))
    at_offset = Window.partitionBy("key", "offset")
    ranked = claims.select(
        "*", (F.dense_rank().over(Window.partitionBy("key").orderBy("offset")) - 1).alias("idx"),
        (F.count(F.lit(1)).over(at_offset) > 1).alias("incons"),
        (F.max(F.col("nonfinal").cast("int")).over(at_offset) == 1).alias("read_at"))
    writers0 = s0.select("key", "value", F.col("op").alias("w_op"),
                         F.col("type").alias("w_type"))
    join = writers_join(h)
    obs = ranked.join(writers0.hint(join), BY_VALUE, "left")
    if join == "merge":
        # the rows come in this order already (the planner runs no sort for it); declared,
        # the cached table reports it, and joins to it on (key, value) sort only their other
        # side
        obs = obs.sortWithinPartitions(*BY_VALUE)
    obs = cache(obs)
    facts = (obs.groupBy(*BY_VALUE)
             .agg(F.min("idx").alias("vidx"), _any(F.col("read")).alias("read_any"),
                  _any(F.col("final")).alias("read_final")))
    s = cache(s0.join(facts.hint(join), BY_VALUE, "left")
               .select("key", "value", "offset", "op", "index", "process", "f", "type", "pos",
                       "acked", "vidx", F.coalesce("read_any", F.lit(False)).alias("read_any"),
                       F.coalesce("read_final", F.lit(False)).alias("read_final")))
    s0.unpersist()
    final_end = (h.ranges.groupBy("key")
                 .agg(F.max("end").alias("final_end"), F.max("eof").alias("eof"),
                      F.max_by("op", "end").alias("final_op"))
                 .where(F.col("eof")).drop("eof"))
    writers = s.select("key", "value", F.col("op").alias("w_op"), F.col("type").alias("w_type"),
                       F.col("f").alias("w_f"))
    return Versions(sends=s, reads=r, finals=finals, obs=obs, writers=writers, final_end=final_end,
                    _cached=(r, obs, s))


def _cache(df: DataFrame, cached: list[DataFrame]) -> DataFrame:
    """``df`` cached (memory, spilling to disk), added to ``cached``, and computed now."""
    cached.append(df.persist(StorageLevel.MEMORY_AND_DISK))
    df.count()
    return df
