"""Load a validated ``history.jsonl`` into Spark DataFrames shaped for the checkers.

Both formats (``docs/history-format.md``) load into the same tables, so every checker sees one
shape: a format-1 send is a one-send op, a format-1 final read a poll with the range
``[0, end_offset)``. Each line is parsed by Spark with the op's ``value`` kept as raw JSON text,
then micro-ops are parsed per kind. Invokes are paired with completions per process, as
``history.Pairer`` does: a process has at most one open op, so the row after an invoke in that
process's index order is its completion.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kafka_chaos.history import SYSTEM_PROCESSES

#: One history line; ``value`` stays raw JSON text here (Spark renders an object as its JSON).
OP_SCHEMA = T.StructType([
    T.StructField("index", T.LongType()),
    T.StructField("time", T.LongType()),
    T.StructField("process", T.StringType()),  # an int, "nemesis" or "monitor"
    T.StructField("type", T.StringType()),
    T.StructField("f", T.StringType()),
    T.StructField("value", T.StringType()),
    T.StructField("error", T.StringType()),
])
#: Format-1 client values (``send``/``poll``, invoke and completion).
V1_SCHEMA = T.StructType([
    T.StructField("key", T.LongType()),
    T.StructField("value", T.LongType()),
    T.StructField("offset", T.LongType()),
    T.StructField("final", T.BooleanType()),
    T.StructField("end_offset", T.LongType()),
    T.StructField("records", T.ArrayType(T.ArrayType(T.LongType()))),
])
MOP_FS = ("send", "poll", "txn")
_POLL_META = "struct<final:boolean,eof:boolean,range:map<string,array<bigint>>>"


@dataclasses.dataclass(frozen=True)
class History:
    """A loaded history. Cached tables must be released with ``unpersist()``.

    Op identity: ``op`` is an op's invoke index (it always exists); ``index`` its completion's
    index (NULL while pending); ``type`` is ``ok|fail|info|pending``; ``process`` a long.

    - ``pairs``: every op, nemesis included: ``process`` (string), ``f, op, index, type, error,
      invoke_time, time`` (completion, NULL if pending; ns), ``inv, done`` (raw JSON values).
    - ``ops``: client ops: ``process, f, op, index, type, error, invoke_time, time, inv, done,
      final`` (an ok op holding a final-read range).
    - ``sends``: one row per send micro-op: ``process, f, op, index, type, pos`` (position in
      the op), ``key, value, offset`` (from the delivery report, NULL if none).
    - ``reads``: one row per record a poll returned: ``process, f, op, index, type, final, pos,
      rec`` (position in that poll's list for the key), ``key, offset, value``.
    - ``ranges``: final reads' complete ranges: ``op, key, start, end`` (end exclusive),
      ``eof`` (this read reached the end of the partition).
    - ``events``: ``process, op, type, pos, kind`` (assigned, revoked, lost, committed, seek),
      ``key, offset`` (NULL for rebalance events).
    - ``n_ops``, ``format``, ``config`` (the run's configuration, or None).
    """

    pairs: DataFrame
    ops: DataFrame
    sends: DataFrame
    reads: DataFrame
    ranges: DataFrame
    events: DataFrame
    n_ops: int
    format: int
    config: dict | None

    def unpersist(self) -> None:
        """Drop the cached tables from executor memory."""
        for df in (self.pairs, self.ops, self.sends, self.reads):
            df.unpersist()


def hadoop_path(path: Path) -> str:
    """``path`` made absolute with Hadoop glob characters escaped (Spark globs every path)."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", str(Path(path).resolve()))


def load(spark: SparkSession, path: Path, n_ops: int, fmt: int,
         config: dict | None = None) -> History:
    """Load the history at ``path``, already checked by ``history.validate.validate`` (which
    gives ``n_ops`` and ``fmt``), into a ``History``.

    Raises ``pyspark`` errors only (the input is known to be well formed).
    """
    lines = (spark.read.text(hadoop_path(path))
             .select(F.from_json("value", OP_SCHEMA).alias("op")).select("op.*")
             # the header and a torn last line parse to NULL index; a torn line that happens to
             # parse is dropped by index
             .where(F.col("index").isNotNull() & (F.col("index") < n_ops)))
    pairs = _pairs(lines).cache()
    ops = (pairs.where(~F.col("process").isin(*SYSTEM_PROCESSES))
           .withColumn("process", F.col("process").cast("long")))
    if fmt == 1:
        sends, reads, ranges, events = _v1_tables(ops)
    else:
        sends, reads, ranges, events = _v2_tables(ops)
    final_ops = ranges.select("op").distinct().withColumn("final", F.lit(True))
    ops = (ops.join(final_ops, "op", "left")
           .withColumn("final", F.coalesce("final", F.lit(False))).cache())
    return History(pairs=pairs, ops=ops, sends=sends.cache(), reads=reads.cache(),
                   ranges=ranges, events=events, n_ops=n_ops, format=fmt, config=config)


def _pairs(lines: DataFrame) -> DataFrame:
    # Pairer (run by validation) guarantees each process alternates invoke, completion, so
    # lead() over the process's lines is the completion, or NULL while pending.
    by_process = Window.partitionBy("process").orderBy("index")
    return (lines
            .select("*", *(F.lead(c).over(by_process).alias(f"done_{c}")
                           for c in ("index", "time", "type", "error", "value")))
            .where(F.col("type") == "invoke")
            .select("process", "f",
                    F.col("index").alias("op"),
                    F.col("done_index").alias("index"),
                    F.coalesce("done_type", F.lit("pending")).alias("type"),
                    F.col("done_error").alias("error"),
                    F.col("time").alias("invoke_time"),
                    F.col("done_time").alias("time"),
                    F.col("value").alias("inv"),
                    F.col("done_value").alias("done")))


_OP_COLS = ["process", "f", "op", "index", "type"]


def _v2_tables(ops: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    mop_ops = ops.where(F.col("f").isin(*MOP_FS))
    # a completion lists every send of its invoke in order, or nothing at all (validated)
    known = F.col("done").isNotNull() & (F.col("done") != "[]")
    mops = (mop_ops
            .select(*_OP_COLS, F.posexplode(F.from_json(F.when(known, F.col("done"))
                                                         .otherwise(F.col("inv")),
                                                         "array<array<string>>")))
            .select(*_OP_COLS, "pos", F.get("col", 0).alias("kind"),
                    F.get("col", 1).alias("a"), F.get("col", 2).alias("b")))
    pair = F.when(F.col("b").startswith("["), F.from_json("b", "array<bigint>"))
    sends = (mops.where(F.col("kind") == "send")
             .select(*_OP_COLS, "pos", F.col("a").cast("long").alias("key"), pair.alias("r"),
                     "b")
             .select(*_OP_COLS, "pos", "key",
                     F.when(F.col("r").isNull(), F.col("b").cast("long"))
                     .otherwise(F.col("r")[1]).alias("value"),
                     F.col("r")[0].alias("offset")))
    polls = (mops.where((F.col("kind") == "poll") & F.col("a").isNotNull())
             .select(*_OP_COLS, "pos",
                     F.from_json("a", "map<string,array<array<bigint>>>").alias("by_key"),
                     F.from_json("b", _POLL_META).alias("meta")))
    final = F.coalesce(F.col("meta.final"), F.lit(False))
    reads = (polls.select(*_OP_COLS, "pos", final.alias("final"),
                          F.explode("by_key").alias("k", "recs"))
             .select(*_OP_COLS, "final", "pos", F.col("k").cast("long").alias("key"),
                     F.posexplode("recs").alias("rec", "r"))
             .select(*_OP_COLS, "final", "pos", "rec", "key",
                     F.col("r")[0].alias("offset"), F.col("r")[1].alias("value")))
    ranges = (polls.where(final & (F.col("type") == "ok"))
              .select("op", F.coalesce("meta.eof", F.lit(False)).alias("eof"),
                      F.explode("meta.range").alias("k", "r"))
              .select("op", F.col("k").cast("long").alias("key"),
                      F.col("r")[0].alias("start"), F.col("r")[1].alias("end"), "eof"))
    rebalance = (mops.where(F.col("kind").isin("assigned", "revoked", "lost"))
                 .select("process", "op", "type", "pos", "kind",
                         F.explode(F.from_json("a", "array<bigint>")).alias("key"),
                         F.lit(None).cast("long").alias("offset")))
    offsets = (mops.where(F.col("kind").isin("committed", "seek"))
               .select("process", "op", "type", "pos", "kind",
                       F.explode(F.from_json("a", "map<string,bigint>")).alias("k", "offset"))
               .select("process", "op", "type", "pos", "kind", F.col("k").cast("long").alias("key"),
                       "offset"))
    return sends, reads, ranges, rebalance.unionByName(offsets)


def _v1_tables(ops: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    v1 = ops.where(F.col("f").isin("send", "poll")).select(
        *_OP_COLS, F.from_json("inv", V1_SCHEMA).alias("i"),
        F.when(F.col("type") == "ok", F.from_json("done", V1_SCHEMA)).alias("d"))
    sends = v1.where(F.col("f") == "send").select(
        *_OP_COLS, F.lit(0).alias("pos"), F.col("i.key").alias("key"),
        F.col("i.value").alias("value"),
        F.when(F.col("d.offset") >= 0, F.col("d.offset")).alias("offset"))
    polls = v1.where((F.col("f") == "poll") & F.col("d").isNotNull())
    final = F.coalesce(F.col("d.final"), F.lit(False))
    reads = (polls.select(*_OP_COLS, final.alias("final"), F.lit(0).alias("pos"),
                          F.col("i.key").alias("key"), F.posexplode("d.records").alias("rec", "r"))
             .select(*_OP_COLS, "final", "pos", "rec", "key", F.col("r")[0].alias("offset"),
                     F.col("r")[1].alias("value")))
    last = F.aggregate("d.records", F.lit(-1).cast("long"),
                       lambda acc, r: F.greatest(acc, r[0])) + 1
    ranges = polls.where(final).select(
        "op", F.col("i.key").alias("key"), F.lit(0).cast("long").alias("start"),
        F.coalesce(F.col("d.end_offset"), last).alias("end"), F.lit(True).alias("eof"))
    events = ops.sparkSession.createDataFrame(
        [], "process long, op long, type string, pos int, kind string, key long, offset long")
    return sends, reads, ranges, events

