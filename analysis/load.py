"""Load a ``history.jsonl`` into Spark DataFrames shaped for the checkers.

Each line is parsed twice: once per op with ``value`` kept as raw JSON text (nemesis values are
arbitrary JSON and must not be forced into a schema), then client values with ``VALUE_SCHEMA``.
Invokes are paired with completions per process, as ``history.pair_ops`` does: a process has at
most one open op, so the row after an invoke in that process's index order is its completion.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.validate import CLIENT_FS, validate
from history import NEMESIS

#: One history line; ``value`` stays raw JSON text here (Spark renders an object as its JSON).
OP_SCHEMA = T.StructType([
    T.StructField("index", T.LongType()),
    T.StructField("time", T.LongType()),
    T.StructField("process", T.StringType()),  # an int, or "nemesis"
    T.StructField("type", T.StringType()),
    T.StructField("f", T.StringType()),
    T.StructField("value", T.StringType()),
    T.StructField("error", T.StringType()),
])

#: The union of all client value shapes (``send``/``poll``, invoke and completion).
VALUE_SCHEMA = T.StructType([
    T.StructField("key", T.LongType()),
    T.StructField("value", T.LongType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("offset", T.LongType()),
    T.StructField("final", T.BooleanType()),
    T.StructField("end_offset", T.LongType()),
    T.StructField("records", T.ArrayType(T.ArrayType(T.LongType()))),
])


@dataclasses.dataclass(frozen=True)
class History:
    """A loaded history. ``pairs`` and ``reads`` are cached; call ``unpersist()`` when done.

    ``ops``: one row per line: ``index, time, process (string), type, f, value (JSON text), error``.

    ``pairs``: one row per operation of the nemesis or a client ``send``/``poll``: ``process``
    (string), ``f, invoke_index, index`` (the completion's, NULL if pending), ``type``
    (ok|fail|info|pending), ``error, key, value`` (from a client invoke), ``done_v`` (the
    completion's parsed value; NULL for the nemesis).

    ``sends``: one row per client send: ``process (long), invoke_index, index`` (the completion's
    index, NULL if pending), ``type`` (ok|fail|info|pending), ``error, key, value`` (from the
    invoke), ``partition, offset`` (from an ok completion, else NULL; a missing or negative
    offset, meaning "not reported", is NULL too).

    ``polls``: one row per client poll: ``process, invoke_index, index, type, error, key,
    partition, final`` (false unless an ok completion says true), ``end_offset, records``
    (``[[offset, value], ...]``, NULL unless ok).

    ``reads``: one row per record of an ok poll: ``poll_index`` (completion index), ``process,
    key, partition, final, offset, value``.
    """

    ops: DataFrame
    pairs: DataFrame
    sends: DataFrame
    polls: DataFrame
    reads: DataFrame
    n_ops: int

    def unpersist(self) -> None:
        """Drop the cached DataFrames from executor memory."""
        for df in (self.pairs, self.reads):
            df.unpersist()


def hadoop_path(path: Path) -> str:
    """``path`` made absolute with Hadoop glob characters escaped (Spark globs every path)."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", str(Path(path).resolve()))


def load(spark: SparkSession, path: Path, n_ops: int | None = None) -> History:
    """Validate the history at ``path`` and load it into a ``History`` of DataFrames.

    Validation (``analysis.validate.validate``) runs first, in Python, so Spark only parses
    lines already known to be well formed; a torn final line is dropped by both. A caller that
    already ran ``validate`` passes its result as ``n_ops`` to skip the second pass.

    Raises:
        HistoryError: malformed history; the message names the 1-based line.
        OSError: the file cannot be read.
    """
    if n_ops is None:
        n_ops = validate(path)
    ops = (spark.read.text(hadoop_path(path))
           .select(F.from_json("value", OP_SCHEMA).alias("op")).select("op.*")
           # A torn last line parses to NULL; one that happens to parse is dropped by index.
           .where(F.col("index").isNotNull() & (F.col("index") < n_ops)))

    is_nemesis = F.col("process") == NEMESIS
    # Nemesis ops are paired too (they are counted), but their values are never parsed.
    relevant = (ops.where(is_nemesis | F.col("f").isin(*CLIENT_FS))
                .select("index", "process", "type", "f", "error",
                        F.when(~is_nemesis, F.from_json("value", VALUE_SCHEMA)).alias("v")))
    # pair_ops (run by validate) guarantees a process alternates invoke, completion of the same
    # f, so lead() over the process's ops is the completion, or NULL while it is still pending.
    by_process = Window.partitionBy("process").orderBy("index")
    pairs = (relevant
             .select("*", *(F.lead(c).over(by_process).alias(f"done_{c}")
                            for c in ("index", "type", "error", "v")))
             .where(F.col("type") == "invoke")
             .select("process", "f",
                     F.col("index").alias("invoke_index"),
                     F.col("done_index").alias("index"),
                     F.coalesce("done_type", F.lit("pending")).alias("type"),
                     F.col("done_error").alias("error"),
                     F.col("v.key").alias("key"),
                     F.col("v.value").alias("value"),
                     "done_v")
             .cache())
    ok = F.col("type") == "ok"

    def if_ok(c: Column) -> Column:
        return F.when(ok, c)

    def client(f: str) -> DataFrame:
        return (pairs.where(~is_nemesis & (F.col("f") == f))
                .withColumn("process", F.col("process").cast("long")))

    sends = client("send").select(
        "process", "invoke_index", "index", "type", "error", "key", "value",
        if_ok(F.col("done_v.partition")).alias("partition"),
        if_ok(F.when(F.col("done_v.offset") >= 0, F.col("done_v.offset"))).alias("offset"))
    polls = client("poll").select(
        "process", "invoke_index", "index", "type", "error", "key",
        if_ok(F.col("done_v.partition")).alias("partition"),
        (ok & F.coalesce(F.col("done_v.final"), F.lit(False))).alias("final"),
        if_ok(F.col("done_v.end_offset")).alias("end_offset"),
        if_ok(F.col("done_v.records")).alias("records"))
    reads = (polls.where(ok)
             .select(F.col("index").alias("poll_index"), "process", "key", "partition", "final",
                     F.explode("records").alias("rec"))
             .select("poll_index", "process", "key", "partition", "final",
                     F.col("rec")[0].alias("offset"), F.col("rec")[1].alias("value"))
             .cache())
    return History(ops=ops, pairs=pairs, sends=sends, polls=polls, reads=reads, n_ops=n_ops)
