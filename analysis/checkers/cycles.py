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

The data edges (``ww``, ``wr``) come from the ``Versions`` tables without a shuffle (they are
partitioned by key); the order edges are computed on the driver with numpy from the nodes (a
few int64 columns per op), where a global sort in Spark would run on one core anyway.
``analysis.elle.find_cycles`` finds the strongly connected components (scipy) and, bounded in
time, one cycle per component and anomaly type (networkx). Each step of a reported cycle is
explained as data: ``key``, ``value`` (and ``next_value`` for ``ww``), looked up for just those
steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis import elle
from kafka_chaos.analysis.checkers.versions import BY_VALUE, NODE_TYPES, Versions, writers_join
from kafka_chaos.analysis.load import MOP_FS, History, is_type
from kafka_chaos.analysis.remote import is_url

#: Default bound of the cycle search, seconds (``analysis.check`` passes its own).
TIME_LIMIT_S = 120.0
#: What ``node_table`` imports when it runs, not with this module (it imports pandas: 0.2 s):
#: ``analysis.check`` imports it in a thread while the driver JVM starts.
MODULES = ("pyarrow.dataset",)


def nodes(h: History) -> DataFrame:
    """``op, process, ok, invoke_time, time``: the ops the dependency graph relates (``ok``:
    it completed ok)."""
    return (h.ops.where(F.col("f").isin(*MOP_FS) & ~F.col("final")
                        & F.col("type").isin(*NODE_TYPES))
            .select("op", "process", (F.col("type") == "ok").alias("ok"), "invoke_time",
                    "time"))


def node_table(h: History, id_type: str = "int") -> pa.Table:
    """``nodes(h)`` as an Arrow table: ``op`` (Spark SQL type ``id_type``: ``int`` or
    ``long``, Arrow int32 or int64), ``process`` (int64), ``ok`` (bool), ``invoke_time``,
    ``time`` (int64 ns).

    A copy on this machine (a path, not a URL) is read here with pyarrow, filtered row group
    by row group as ``nodes`` filters, in this thread (both cores are busy with Spark's
    tasks by then): no Spark job. Spark's ``toArrow`` of the 4.8 M nodes of a 10 M-op history
    took 6.9 s of task time, this 0.7 s of CPU (``docs/performance.md``). A copy at a URL
    (``hdfs://``, ``s3a://``) is read by Spark, which has the connectors. Raises ``OSError``
    (pyarrow) or Spark's errors."""
    path = h.tables.get("ops")
    if path is None or is_url(path):
        return nodes(h).select(F.col("op").cast(id_type), "process", "ok", "invoke_time",
                               "time").toArrow()
    import pyarrow.dataset as pads  # MODULES

    field = pads.field
    # ``~final`` is NULL for a NULL ``final``: the row is dropped, as Spark's ``where`` drops it
    where = (field("pid").is_valid() & field("f").isin(list(MOP_FS)) & ~field("final")
             & field("type").isin(list(NODE_TYPES)))
    ids = pa.int32() if id_type == "int" else pa.int64()
    return pads.dataset(path, format="parquet").to_table(
        columns={"op": field("op").cast(ids), "process": field("pid"),
                 "ok": field("type") == "ok", "invoke_time": field("invoke_time"),
                 "time": field("time")},
        filter=where, use_threads=False)


def _node_writer() -> F.Column:
    return F.when(is_type("w_type", *NODE_TYPES), F.col("w_op"))


def ww_edges(v: Versions) -> DataFrame:
    """``src, dst``: writers of consecutive version-order positions of a key, earlier ->
    later (every writer at a position to every writer at the next one; a pair may come more
    than once, ``elle.find_cycles`` keeps distinct pairs).

    A join of the claims' writers on (position, key) to those of the position after, sorted
    by position first: Spark sorts by a prefix of the first column, and a partition holds one
    key or a few. Gathering each position's writers into a set, sorted by key and position,
    and pairing each set with the one before by ``lag`` cost 2.7-2.9 s at 10 M ops, this
    1.9 s (alone, ``docs/performance.md``).
    """
    w = _node_writer()
    at = v.obs.select("idx", "key", w.alias("src")).where(F.col("src").isNotNull())
    after = (v.obs.select((F.col("idx") - 1).alias("idx"), "key", w.alias("dst"))
             .where(F.col("dst").isNotNull()))
    return (at.join(after.hint("merge"), ["idx", "key"])
            .where(F.col("src") != F.col("dst")).select("src", "dst"))


def wr_edges(h: History, v: Versions) -> DataFrame:
    """``src, dst``: the writer of the last value each op read of a key -> that op.

    The reads are sorted by process, key, op, so each op's last read of a key is found
    without another sort or a hash table of every (key, op); its writer comes from ``obs``,
    already sorted by value and key for the join (``versions.BY_VALUE``).
    """
    reads = v.reads.where(is_type("type", *NODE_TYPES))
    last = (reads.groupBy("process", "key", "op")
            .agg(F.max_by("value", F.col("pos").cast("long") * 2**32 + F.col("rec"))
                 .alias("value")))
    writers = v.obs.select("key", "value", _node_writer().alias("src"))
    return (last.join(writers.hint(writers_join(h)), BY_VALUE)
            .where(F.col("src").isNotNull() & (F.col("src") != F.col("op")))
            .select("src", F.col("op").alias("dst")))


def order_edges(op: np.ndarray, process: np.ndarray, ok: np.ndarray, invoke_time: np.ndarray,
                time: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, kind)`` of the process and realtime orders of the nodes (equal-length
    arrays: op index, process, completed ok, invoke and completion times in ns). ``src`` and
    ``dst`` have ``op``'s dtype (int32 halves the memory of a 10 M-op history's 19 M order
    edges), ``kind`` is int8.

    Process order: consecutive ops of one process. Realtime order through timeline nodes
    (ids < 0): one event per ``ok`` completion and per invoke, sorted by time (an invoke
    first at equal times, so "completed before invoked" stays strict); the j-th completion
    (1-based) is timeline node -j, chained to -(j+1); an op -> its completion's node, and each
    node -> every op invoked after it and before the next completion.
    """
    ids = op.dtype
    by_process = np.lexsort((op, process))
    p, q = process[by_process], op[by_process]
    del by_process
    same = p[1:] == p[:-1]
    proc_src, proc_dst = q[:-1][same], q[1:][same]
    del p, q, same
    n_ok = int(ok.sum())
    t = np.concatenate([time[ok], invoke_time])
    k = np.concatenate([np.ones(n_ok, dtype=np.int8), np.zeros(len(op), dtype=np.int8)])
    who = np.concatenate([op[ok], op])
    order = np.lexsort((who, k, t))
    del t
    k, who = k[order], who[order]
    del order
    n = np.cumsum(k, dtype=ids)
    done = k == 1
    later = (k == 0) & (n > 0)
    chain = -np.arange(1, max(n_ok, 1), dtype=ids)
    src = np.concatenate([proc_src, who[done], chain, -n[later]])
    dst = np.concatenate([proc_dst, -n[done], chain - 1, who[later]])
    kind = np.full(len(src), elle.REALTIME, dtype=np.int8)
    kind[:len(proc_src)] = elle.PROCESS
    return src, dst, kind


def _column(table: Any, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def data_edges(h: History, v: Versions, id_type: str = "int") -> DataFrame:
    """``src, dst`` (of ``id_type``), ``kind`` (byte: ``elle.WW`` or ``elle.WR``): the
    ``ww_edges`` and ``wr_edges``, collected in one job."""
    def typed(df: DataFrame, kind: int) -> DataFrame:
        return df.select(F.col("src").cast(id_type), F.col("dst").cast(id_type),
                         F.lit(kind).cast("byte").alias("kind"))
    return typed(ww_edges(v), elle.WW).unionByName(typed(wr_edges(h, v), elle.WR))


def cycles(h: History, v: Versions,
           time_limit_s: float = TIME_LIMIT_S) -> tuple[dict[str, dict[str, Any]], dict]:
    """Find the cycle anomalies. Returns ``(anomalies, search)``.

    ``anomalies``: ``{name: {"count", "ww_free", "examples"}}`` for every name of
    ``elle.CYCLE_ANOMALIES``; ``ww_free`` counts the cycles without a ww step, which come
    first among the examples; an example is ``{"ops": [...], "steps": [{"from", "to", "type",
    "key", "value", "next_value"}, ...], "ww": bool, "text": "..."}``.
    ``search``: ``{"complete", "components", "largest_component", "edges", "time_s"}``; when
    ``complete`` is false the search hit ``time_limit_s`` and absent cycles prove nothing.

    Memory: the edges reach this process as int32 node ids and int8 kinds (9 bytes an edge;
    a 10 M-op history has about 40 M), int64 only for a history of 2**30 op lines or more;
    the search renumbers them in place (``elle.find_cycles``'s ``reuse``).
    """
    id_type = "int" if h.n_ops < 2**30 else "long"  # op indexes are line numbers
    # the order edges first: the nodes and the sorts over them are gone before the data
    # edges arrive (the other way round they were this process's peak: 1.07 GiB at 10 M ops)
    n = node_table(h, id_type)
    o_src, o_dst, o_kind = order_edges(*(_column(n, c) for c in (
        "op", "process", "ok", "invoke_time", "time")))
    del n
    pa.default_memory_pool().release_unused()
    data = data_edges(h, v, id_type).toArrow()
    src = np.concatenate([_column(data, "src"), o_src])
    del o_src
    dst = np.concatenate([_column(data, "dst"), o_dst])
    del o_dst
    kind = np.concatenate([_column(data, "kind"), o_kind])
    del data, o_kind
    pa.default_memory_pool().release_unused()  # the Arrow pool keeps what it freed
    report = elle.find_cycles(src, dst, kind, time_limit_s=time_limit_s, reuse=True)
    del src, dst, kind
    out = {}
    for name, found in report.cycles.items():
        # the cycles without a ww step first: no rule permits them (promises, ww-cycles)
        free = [c for c in found if not _has_ww(c)]
        out[name] = {"count": len(found), "ww_free": len(free),
                     "examples": (free + [c for c in found if _has_ww(c)])[:5]}
    _explain(out, v)
    search = {k: getattr(report, k) for k in ("complete", "components", "largest_component",
                                              "edges", "time_s")}
    return out, search


def _explain(out: dict[str, dict[str, Any]], v: Versions) -> None:
    """Replace each example cycle (a list of steps) by ``{"ops", "steps", "text"}`` with the
    key and values behind every ww/wr step, looked up for just those steps."""
    steps = [s for found in out.values() for cyc in found["examples"] for s in cyc]
    ww = {(s["from"], s["to"]) for s in steps if s["type"] == "ww"}
    wr = {(s["from"], s["to"]) for s in steps if s["type"] == "wr"}
    facts: dict[tuple[str, int, int], dict] = {}
    if ww:
        writers = sorted({op for pair in ww for op in pair})
        at: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (key, idx) -> [(writer, value)]
        for r in (v.obs.where(F.col("w_op").isin(writers))
                  .select("key", "idx", "value", "w_op").distinct().collect()):
            at.setdefault((r["key"], r["idx"]), []).append((r["w_op"], r["value"]))
        for (key, idx), here in at.items():
            for a, value in here:
                for b, next_value in at.get((key, idx + 1), []):
                    if (a, b) in ww:
                        fact = {"key": key, "value": value, "next_value": next_value}
                        old = facts.get(("ww", a, b))
                        if old is None or tuple(fact.values()) < tuple(old.values()):
                            facts[("ww", a, b)] = fact
    if wr:
        readers = sorted({b for _, b in wr})
        last: dict[tuple[int, int], tuple] = {}  # (reader, key) -> (pos, rec, value)
        reads = v.reads.where(F.col("op").isin(readers))
        for r in reads.select("op", "key", "pos", "rec", "value").collect():
            mine = (r["pos"], r["rec"], r["value"])
            if last.get((r["op"], r["key"]), (-1,)) < mine:
                last[(r["op"], r["key"])] = mine
        # the writers of just those values: a scan, where a join sorted or hashed every writer
        values = sorted({value for _, _, value in last.values()})
        writer = {(r["key"], r["value"]): r["w_op"]
                  for r in (v.obs.where(F.col("value").isin(values))
                            .select("key", "value", "w_op").distinct().collect())}
        for (reader, key), (_, _, value) in sorted(last.items()):
            w = writer.get((key, value))
            if (w, reader) in wr and ("wr", w, reader) not in facts:
                facts[("wr", w, reader)] = {"key": key, "value": value, "next_value": None}
    for found in out.values():
        found["examples"] = [_explained(cyc, facts) for cyc in found["examples"]]


def _has_ww(cycle: list[dict]) -> bool:
    return any(s["type"] == "ww" for s in cycle)


def _explained(cycle: list[dict], facts: dict) -> dict:
    steps = [{**s, **facts.get((s["type"], s["from"], s["to"]), {})} for s in cycle]
    return {"ops": [s["from"] for s in steps], "steps": steps, "ww": _has_ww(cycle),
            "text": elle.describe_cycle(steps)}
