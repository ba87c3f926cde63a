"""Load a history's columnar copy (``history.columnar``) into Spark DataFrames for the checkers.

Both history formats have the same tables in the copy, so every checker sees one shape. Nothing
here parses JSON: the copy holds typed columns, and the records of a poll are two lists exploded
here, so Spark reads Parquet and never text.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kafka_chaos.analysis.remote import is_url

MOP_FS = ("send", "poll", "txn")
#: ``type`` and ``f`` of ``sends`` and ``reads`` are codes: the index of the name here. Small
#: ints sort and hash faster than strings (the sorted, shuffled reads of a 1 M-op history:
#: 3.4 s -> 2.2 s, ``docs/performance.md``).
TYPES = ("ok", "fail", "info", "pending")
FS = MOP_FS


def _code(col: str, names: tuple[str, ...]) -> Column:
    out = None
    for i, name in enumerate(names):
        out = (F.when(F.col(col) == name, F.lit(i)) if out is None
               else out.when(F.col(col) == name, F.lit(i)))
    return out.cast("byte").alias(col)


def is_type(col: str, *names: str) -> Column:
    """``col`` (a ``type`` code) is one of ``names``."""
    return F.col(col).isin(*(TYPES.index(n) for n in names))


def is_f(col: str, *names: str) -> Column:
    """``col`` (an ``f`` code of ``sends``/``reads``) is one of ``names``."""
    return F.col(col).isin(*(FS.index(n) for n in names))


def type_name(col: str) -> Column:
    """The name of a ``type`` code, for examples."""
    return F.element_at(F.array(*(F.lit(n) for n in TYPES)), F.col(col).cast("int") + 1)

_TYPES = {"int64": T.LongType(), "int32": T.IntegerType(), "string": T.StringType(),
          "bool": T.BooleanType()}


@dataclasses.dataclass(frozen=True)
class History:
    """A loaded history (lazy DataFrames; nothing is cached here).

    Op identity: ``op`` is an op's invoke index (it always exists); ``index`` its completion's
    index (NULL while pending); ``type`` is ``ok|fail|info|pending``.

    - ``pairs``: every op, nemesis and monitor included: ``op, index, process`` (string),
      ``pid`` (long; NULL for the nemesis and the monitor), ``f, type, error, invoke_time,
      time`` (ns; NULL if pending), ``inv, done`` (the values as JSON text, NULL for micro-op
      lists), ``final`` (an ``ok`` final read).
    - ``ops``: client ops: ``pairs`` with ``process`` the long ``pid``.
    - ``sends``: one row per send micro-op: ``op, index, process, f, type, pos`` (position in
      the op), ``key, value, offset`` (from the delivery report, NULL if none), ``ack_ns``
      (when that report was served, ns since the run's start; NULL if none or not recorded).
    - ``reads``: one row per record a poll returned: ``op, process, f, type, final, pos, rec``
      (position in that poll's list for the key), ``key, offset, value``.
    - ``read_values``: one row per value a poll returned, final reads' included: ``type,
      key, value``: the values' lists alone exploded, whose offsets are then never read (the
      proof of ``info`` transactions needs no more).
    - in ``sends``, ``reads`` and ``read_values``, ``type`` and ``f`` are codes (``TYPES``,
      ``FS``; ``is_type``, ``is_f``, ``type_name``).
    - ``ranges``: final reads' complete ranges: ``op, key, start, end`` (end exclusive),
      ``eof`` (this read reached the end of the partition).
    - ``events``: ``process, op, type, pos, kind`` (assigned, revoked, lost, committed, seek),
      ``key, offset`` (NULL for rebalance events).
    - ``n_ops`` (op lines), ``format`` (1 or 2), ``config`` (the run's configuration, or None),
      ``rows`` (row counts of the copy's tables: ``ops, sends, reads, ranges, events``; a
      ``reads`` row is one poll's records of one key), ``counts`` (client ops by ``f`` and
      ``type``: ``{f: {type: n}}``), ``records_read`` (records all polls returned),
      ``sends_by_key`` (send micro-ops per key, ``{key: n}``; None for a copy made before
      the copy counted them); ``tables``: table name -> the path or URL of its Parquet file;
      ``header``: the format-2 header (``keys``, ``nodes``, ``config``), None for format 1.
    """

    pairs: DataFrame
    ops: DataFrame
    sends: DataFrame
    reads: DataFrame
    read_values: DataFrame
    ranges: DataFrame
    events: DataFrame
    n_ops: int
    format: int
    config: dict | None
    rows: dict[str, int]
    counts: dict[str, dict[str, int]]
    records_read: int
    sends_by_key: dict[int, int] | None = None
    tables: dict[str, str] = dataclasses.field(default_factory=dict)
    header: dict | None = None


def hadoop_path(path: Path | str) -> str:
    """A local ``path`` made absolute with Hadoop glob characters escaped (Spark globs every
    path); a URL (``scheme://...``) is returned as it is."""
    if is_url(path):
        return path
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", str(Path(path).resolve()))


def spark_schema(arrow_schema: Any) -> T.StructType:
    """The Spark schema of a table of ``history.columnar.SCHEMAS`` (so no footer is read to
    infer it: one Spark job less per table)."""
    fields = []
    for field in arrow_schema:
        name = str(field.type)
        if name.startswith("list<"):
            typ = T.ArrayType(_TYPES[str(field.type.value_type)])
        else:
            typ = _TYPES[name]
        fields.append(T.StructField(field.name, typ))
    return T.StructType(fields)


def load(spark: SparkSession, tables: dict[str, str], meta: dict[str, Any],
         config: dict | None = None) -> History:
    """The ``History`` of a columnar copy.

    Args:
        tables: table name -> the path or URL of its Parquet file (every name of
            ``history.columnar.TABLES``).
        meta: the copy's ``meta.json``.
        config: the run configuration to use when the copy's header has none (format 1).

    Raises ``pyspark`` errors only (a complete copy is well formed).
    """
    from kafka_chaos.history.columnar import SCHEMAS

    df = {name: spark.read.schema(spark_schema(SCHEMAS[name])).parquet(hadoop_path(path))
          for name, path in tables.items()}
    pairs = df["ops"]
    ops = (pairs.where(F.col("pid").isNotNull())
           .withColumn("process", F.col("pid")))
    sends = df["sends"].select("op", "index", "process", _code("f", FS), _code("type", TYPES),
                               "pos", "key", "value", "offset", "ack_ns")
    reads = (df["reads"]
             .select("op", "process", _code("f", FS), _code("type", TYPES), "final", "pos", "key",
                     F.posexplode(F.arrays_zip("offsets", "values")).alias("rec", "r"))
             .select("op", "process", "f", "type", "final", "pos", "rec", "key",
                     F.col("r.offsets").alias("offset"), F.col("r.values").alias("value")))
    read_values = df["reads"].select(_code("type", TYPES), "key",
                                     F.explode("values").alias("value"))
    if meta.get("header") is not None:  # a format-2 header's configuration always wins
        config = meta["header"].get("config")
    return History(pairs=pairs, ops=ops, sends=sends, reads=reads, read_values=read_values,
                   ranges=df["ranges"], events=df["events"], n_ops=meta["ops"],
                   format=meta["format"], config=config, rows=dict(meta.get("rows", {})),
                   counts=meta.get("op_counts", {}), records_read=meta.get("records", 0),
                   sends_by_key=_sends_by_key(meta), tables=dict(tables),
                   header=meta.get("header"))


def _sends_by_key(meta: dict[str, Any]) -> dict[int, int] | None:
    by_key = meta.get("sends_by_key")
    return None if by_key is None else {int(k): int(n) for k, n in by_key.items()}


def load_copy(spark: SparkSession, copy: Any, config: dict | None = None) -> History:
    """``load`` of a local ``history.columnar.Copy``."""
    from kafka_chaos.history.columnar import TABLES

    return load(spark, {t: str(copy.table(t)) for t in TABLES}, copy.meta, config)
