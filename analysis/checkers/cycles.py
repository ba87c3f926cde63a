"""Elle-style dependency cycles: ``G0``, ``G1c`` and their ``-process`` / ``-realtime`` variants.

The edges are built here in Spark, between ops that sent or polled (not final reads, not
``fail``ed ops: those did not happen), as in Jepsen's ``jepsen.tests.kafka`` (``ww-graph``,
``wr-graph``, ``cycles!``) plus Elle's process and realtime orders:

- ``ww``: the writers of consecutive positions of a key's version order, earlier -> later;
- ``wr``: the writer of the last value an op read of a key -> that reader (Jepsen's "highest
  read": earlier reads are implied through the ``ww`` chain);
- ``process``: consecutive ops of one process;
- ``realtime``: an ``ok`` op -> every op invoked after it completed, through a chain of timeline
  nodes (one per completion, in time order) so the edges stay O(ops). ``info`` ops never
  complete, so no realtime edge leaves them.

``analysis.elle.find_cycles`` (networkx) finds the strongly connected components and, bounded in
time, one cycle per component and anomaly type. Each step of a reported cycle is explained as
data: ``key``, ``value`` (and ``next_value`` for ``ww``) from the edge tables.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafka_chaos.analysis import elle
from kafka_chaos.analysis.checkers.versions import Versions, observations
from kafka_chaos.analysis.load import MOP_FS, History

#: Default bound of the cycle search, seconds (``analysis.check`` passes its own).
TIME_LIMIT_S = 120.0


def nodes(h: History) -> DataFrame:
    """``op, process, type, invoke_time, time``: the ops the dependency graph relates."""
    return (h.ops.where(F.col("f").isin(*MOP_FS) & ~F.col("final")
                        & F.col("type").isin("ok", "info", "pending"))
            .select("op", "process", "type", "invoke_time", "time"))


def ww_edges(h: History, v: Versions, node_ops: DataFrame) -> DataFrame:
    """``src, dst, key, value, next_value``: writers of consecutive version-order positions."""
    at = (observations(h, v.acked).select("key", "offset", "value").distinct()
          .join(v.order, ["key", "offset"])
          .join(v.writers.join(node_ops.select(F.col("op").alias("writer")), "writer"),
                ["key", "value"])
          .select("key", "idx", "value", "writer"))
    a, b = at.alias("a"), at.alias("b")
    return (a.join(b, (F.col("a.key") == F.col("b.key"))
                   & (F.col("b.idx") == F.col("a.idx") + 1))
            .where(F.col("a.writer") != F.col("b.writer"))
            .select(F.col("a.writer").alias("src"), F.col("b.writer").alias("dst"),
                    F.col("a.key").alias("key"), F.col("a.value").alias("value"),
                    F.col("b.value").alias("next_value")))


def wr_edges(h: History, v: Versions, node_ops: DataFrame) -> DataFrame:
    """``src, dst, key, value``: writer of the last value each op read of a key -> that op."""
    last = (h.reads.join(node_ops.select("op"), "op")
            .groupBy("op", "key").agg(F.max(F.struct("pos", "rec", "value")).alias("last"))
            .select("op", "key", F.col("last.value").alias("value")))
    writers = v.writers.join(node_ops.select(F.col("op").alias("writer")), "writer")
    return (last.join(writers, ["key", "value"])
            .where(F.col("writer") != F.col("op"))
            .select(F.col("writer").alias("src"), F.col("op").alias("dst"), "key", "value"))


def order_edges(node_ops: DataFrame) -> DataFrame:
    """``src, dst, kind``: process order, and realtime order through timeline nodes (ids < 0)."""
    by_proc = Window.partitionBy("process").orderBy("op")
    process = (node_ops.select(F.lag("op").over(by_proc).alias("src"), F.col("op").alias("dst"))
               .where(F.col("src").isNotNull()).withColumn("kind", F.lit(elle.PROCESS)))
    # one event row per ok completion (kind 1) and per invoke (kind 0); at equal times the
    # invoke sorts first, so "completed before invoked" stays strict
    events = (node_ops.where(F.col("type") == "ok")
              .select(F.col("time").alias("t"), F.lit(1).alias("k"), "op")
              .unionByName(node_ops.select(F.col("invoke_time").alias("t"), F.lit(0).alias("k"),
                                           "op")))
    seen = Window.orderBy("t", "k", "op").rowsBetween(Window.unboundedPreceding, 0)
    ranked = events.withColumn("n", F.sum("k").over(seen)).cache()
    # the j-th completion (1-based) is timeline node -j
    done = ranked.where(F.col("k") == 1)
    to_timeline = done.select("op", (-F.col("n")).alias("t")).toDF("src", "dst")
    chain = done.select((-F.col("n")).alias("src"), (-F.col("n") - 1).alias("dst"))
    last = done.agg(F.max("n")).first()[0] or 0
    chain = chain.where(F.col("src") > -last)
    from_timeline = (ranked.where((F.col("k") == 0) & (F.col("n") > 0))
                     .select((-F.col("n")).alias("src"), F.col("op").alias("dst")))
    realtime = (to_timeline.unionByName(chain).unionByName(from_timeline)
                .withColumn("kind", F.lit(elle.REALTIME)))
    return process.unionByName(realtime)


def cycles(h: History, v: Versions,
           time_limit_s: float = TIME_LIMIT_S) -> tuple[dict[str, dict[str, Any]], dict]:
    """Find the cycle anomalies. Returns ``(anomalies, search)``.

    ``anomalies``: ``{name: {"count", "examples"}}`` for every name of
    ``elle.CYCLE_ANOMALIES``; an example is ``{"ops": [...], "steps": [{"from", "to", "type",
    "key", "value", "next_value"}, ...], "text": "..."}``.
    ``search``: ``{"complete", "components", "largest_component", "edges", "time_s"}``; when
    ``complete`` is false the search hit ``time_limit_s`` and absent cycles prove nothing.
    """
    node_ops = nodes(h).cache()
    try:
        ww = ww_edges(h, v, node_ops)
        wr = wr_edges(h, v, node_ops)
        edges = (ww.select("src", "dst", F.lit(elle.WW).alias("kind"))
                 .unionByName(wr.select("src", "dst", F.lit(elle.WR).alias("kind")))
                 .unionByName(order_edges(node_ops)))
        table = edges.toArrow()
        report = elle.find_cycles(table.column("src").to_pylist(), table.column("dst").to_pylist(),
                                  table.column("kind").to_pylist(), time_limit_s=time_limit_s)
        del table
        out = {name: {"count": len(found), "examples": found[:5]}
               for name, found in report.cycles.items()}
        _explain(out, ww, wr)
    finally:
        node_ops.unpersist()
    search = {k: getattr(report, k) for k in ("complete", "components", "largest_component",
                                              "edges", "time_s")}
    return out, search


def _explain(out: dict[str, dict[str, Any]], ww: DataFrame, wr: DataFrame) -> None:
    """Replace each example cycle (a list of steps) by ``{"ops", "steps", "text"}`` with the
    key and values behind every ww/wr step, looked up for just those steps."""
    pairs = {(s["from"], s["to"]) for found in out.values() for cyc in found["examples"]
             for s in cyc if s["type"] in ("ww", "wr")}
    facts: dict[tuple[str, int, int], dict] = {}
    if pairs:
        wanted = ww.sparkSession.createDataFrame(sorted(pairs), "src long, dst long")
        for kind, df in (("ww", ww), ("wr", wr.withColumn("next_value", F.lit(None)))):
            rows = (df.join(F.broadcast(wanted), ["src", "dst"])
                    .groupBy("src", "dst").agg(F.min(F.struct("key", "value", "next_value"))
                                               .alias("x")).collect())
            for r in rows:
                facts[(kind, r["src"], r["dst"])] = r["x"].asDict()
    for found in out.values():
        found["examples"] = [_explained(cyc, facts) for cyc in found["examples"]]


def _explained(cycle: list[dict], facts: dict) -> dict:
    steps = [{**s, **facts.get((s["type"], s["from"], s["to"]), {})} for s in cycle]
    return {"ops": [s["from"] for s in steps], "steps": steps, "text": elle.describe_cycle(steps)}
