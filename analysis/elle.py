"""Bounded search for Elle's cycle anomalies (G0, G1c and their process/realtime variants).

The rules follow Elle (jepsen-io/elle; "Elle: Inferring Isolation Anomalies from Experimental
Observations", Kingsbury & Alvaro, 2020): the cycle anomaly specs of ``elle/txn.clj`` (which
edge types a cycle may use, which it must use) and the search of ``elle/graph.clj`` (strongly
connected components first, then a bounded breadth-first search for one cycle per component).
The anomalies are those Jepsen's Kafka checker (``jepsen.tests.kafka``, ``cycles!``) reports.
Its ``allowed-error-types`` always allow G0 in Kafka, since Kafka never isolates writes, so
judging validity is left to the caller: this module only finds and explains cycles.

The graph comes as three equal-length int sequences ``src``, ``dst``, ``kind``. Nodes >= 0 are
ops (history op indexes); nodes < 0 are timeline nodes, which encode realtime order in O(n)
edges (op -> timeline node at its completion, timeline nodes chained in time order, timeline
node -> each op invoked after it). A path through timeline nodes is reported as one realtime
step, so timeline nodes never appear in a cycle.

Only simple cycles are reported. Like Elle's, the search is a heuristic: it may miss a cycle
when every shortest walk it finds passes some node twice; it never reports a false one.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import operator
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

#: What the search imports when it runs, not with this module (0.25 s):
#: ``analysis.check`` imports them in a thread while the driver JVM starts.
MODULES = ("networkx", "scipy.sparse.csgraph")

WW = 1  # write-write: A's value precedes B's value in a key's version order
WR = 2  # write-read: B read a value A wrote
PROCESS = 4  # A and B are consecutive ops of one process
REALTIME = 8  # realtime order; only ever on edges that touch a timeline node

_ALL = WW | WR | PROCESS | REALTIME
_OP_TYPES = WW | WR | PROCESS  # the types that never touch a timeline node
_DATA = 16  # search-state bit: a ww or wr edge is on the path (a real dependency cycle)
_TYPE_ORDER = (WW, WR, PROCESS, REALTIME)
_TYPE_NAMES = {WW: "ww", WR: "wr", PROCESS: "process", REALTIME: "realtime"}
_CHECK_EVERY = 1024  # BFS steps between clock reads: cheap, yet a fraction of a second apart

#: name -> (allowed edge types mask, required edge types), as in Elle's ``elle/txn.clj``.
ANOMALY_SPECS: dict[str, tuple[int, tuple[int, ...]]] = {
    "G0": (WW, (WW,)),
    "G1c": (WW | WR, (WR,)),
    "G0-process": (WW | PROCESS, (PROCESS,)),
    "G1c-process": (WW | WR | PROCESS, (WR, PROCESS)),
    "G0-realtime": (WW | PROCESS | REALTIME, (REALTIME,)),
    "G1c-realtime": (_ALL, (WR, REALTIME)),
}
CYCLE_ANOMALIES = list(ANOMALY_SPECS)


@dataclasses.dataclass(frozen=True)
class CycleReport:
    """What ``find_cycles`` found; JSON-able through ``dataclasses.asdict``.

    ``cycles``: every name of ``CYCLE_ANOMALIES`` -> cycles found (at most one per strongly
    connected component of the graph restricted to that anomaly's edge types; for G1c and its
    variants, one without a ww step wherever the component holds one); a cycle is a
    list of steps ``{"from": op, "to": op, "type": "ww" | "wr" | "process" | "realtime"}``,
    chained, closed, starting at its smallest op; cycles are ordered by that op.
    ``complete``: False when the time bound stopped the search (then the lists hold what was
    found so far). ``components``: nontrivial
    SCCs of the whole graph; ``largest_component``: op nodes in the biggest one (0 if none);
    ``edges``: distinct (src, dst) pairs; ``time_s``: wall seconds spent.
    """

    cycles: dict[str, list[list[dict]]]
    complete: bool
    components: int
    largest_component: int
    edges: int
    time_s: float


class _OutOfTime(Exception):
    pass


def find_cycles(src: Any, dst: Any, kind: Any, *, time_limit_s: float = 60.0,
                reuse: bool = False) -> CycleReport:
    """Find G0, G1c, G0/G1c-process and G0/G1c-realtime cycles in a typed dependency graph.

    ``src``, ``dst``, ``kind``: equal-length sequences of ints (lists, or anything with
    ``tolist``/``to_pylist``, e.g. numpy or pyarrow arrays); row i is an edge src[i] -> dst[i]
    whose ``kind`` is a non-zero OR of ``WW``, ``WR``, ``PROCESS``, ``REALTIME``. Rows with the
    same (src, dst) are merged (kinds OR-ed); self-loops are ignored. ``time_limit_s``: wall
    seconds for the whole call (graph building and SCCs included); past it the search stops
    and the report says ``complete=False``. Components are searched smallest first.
    ``reuse``: ``src`` and ``dst`` are numpy int arrays the caller drops, which the call may
    overwrite: their renumbered copies are then not made (320 MB of 40 M int32 edges).

    Raises:
        ValueError: lengths differ, a value is not an int, a kind is not a non-zero mask of
            the four types, or an edge touching a timeline node (id < 0) is not REALTIME
            only; the message names the row.
    """
    started = time.monotonic()
    deadline = started + time_limit_s
    gc_was_on = gc.isenabled()
    # Millions of small dicts and tuples, none of them garbage: the cyclic collector would
    # rescan them over and over while they are built (twice the run time on 1M edges).
    gc.disable()
    try:
        return _find_cycles(src, dst, kind, started, deadline, reuse)
    finally:
        if gc_was_on:
            gc.enable()


def _find_cycles(src: Any, dst: Any, kind: Any, started: float, deadline: float,
                 reuse: bool) -> CycleReport:
    s, d, k = _arrays(src, dst, kind)
    loops = s == d
    if loops.any():
        s, d, k = s[~loops], d[~loops], k[~loops]
        reuse = True  # copies of our own
    edges, inside, cs, cd, ids = _components(s, d, reuse)
    del s, d
    import networkx as nx  # MODULES

    # networkx gets just the edges that can be on a cycle
    g = nx.DiGraph()
    g.add_edges_from((a, b, {"kind": m}) for (a, b), m in _merge(ids[cs[inside]], ids[cd[inside]],
                                                                 k[inside]).items())
    del cs, cd, ids, inside
    comps = _sorted_sccs(nx.strongly_connected_components(g))
    cycles: dict[str, list[list[dict]]] = {name: [] for name in CYCLE_ANOMALIES}
    complete = True
    try:
        _check(deadline)
        # Smallest components first, so that one huge component cannot use up the time
        # bound before the others have been searched.
        for comp in sorted(comps, key=len):
            cut: dict[int, list[list[int]]] = {_ALL: [comp]}
            for name, (allowed, required) in ANOMALY_SPECS.items():
                # A G1c without a ww step is searched for first in each component: a cycle
                # of wr (process, realtime) edges alone is no artefact of the write order
                # inferred from offsets, so it must not hide behind one that has a ww step
                free = allowed & ~WW if WR in required and allowed & WW else 0
                free_sccs = _cut(g, cut, free, deadline) if free else []
                for sub in _cut(g, cut, allowed, deadline):
                    found = None
                    inside = set(sub)
                    for f in (f for f in free_sccs if f[0] in inside):
                        found = _search(_adjacency(g, f, free, deadline), required, deadline)
                        if found is not None:
                            break
                    if found is None:
                        found = _search(_adjacency(g, sub, allowed, deadline), required,
                                        deadline)
                    if found is not None:
                        cycles[name].append(found)
    except _OutOfTime:
        complete = False
    for found in cycles.values():  # cycles of one anomaly are node-disjoint
        found.sort(key=lambda steps: steps[0]["from"])
    largest = max((sum(1 for n in c if n >= 0) for c in comps), default=0)
    return CycleReport(cycles, complete, len(comps), largest, edges,
                       round(time.monotonic() - started, 6))


def describe_cycle(steps: list[dict]) -> str:
    """Render one cycle (steps as in ``CycleReport.cycles``) as text, e.g.
    ``"op 12 -ww-> op 15 -wr-> op 20 -process-> op 12"``; ``""`` for no steps."""
    if not steps:
        return ""
    return f"op {steps[0]['from']}" + "".join(f" -{s['type']}-> op {s['to']}" for s in steps)


def _array(seq: Any) -> np.ndarray:
    """``seq`` as a signed int array (its own width kept: an int32 array of 40 M edges is half
    the memory of int64), or an object array of its elements when some element is not an int
    (``_arrays`` then names its row)."""
    if hasattr(seq, "to_numpy"):  # pyarrow, pandas
        seq = seq.to_numpy(zero_copy_only=False) if hasattr(seq, "to_pylist") else seq.to_numpy()
    items = seq if isinstance(seq, np.ndarray) else list(seq)
    a = np.asarray(items)
    if a.dtype.kind == "i" and a.ndim == 1:
        return a
    if a.dtype.kind == "u" and a.ndim == 1:
        return a.astype(np.int64)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _arrays(src: Any, dst: Any, kind: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated int arrays of ``find_cycles``' three sequences (see its ``Raises``)."""
    s, d, k = _array(src), _array(dst), _array(kind)
    if not len(s) == len(d) == len(k):
        raise ValueError(f"src, dst and kind have lengths {len(s)}, {len(d)}, {len(k)}: "
                         f"row {min(len(s), len(d), len(k))} is missing from the shorter")
    if s.dtype == object or d.dtype == object or k.dtype == object:
        for row, (a, b, m) in enumerate(zip(s, d, k)):
            try:
                operator.index(a), operator.index(b), operator.index(m)
            except TypeError:
                raise ValueError(f"row {row}: src, dst and kind must be ints, got "
                                 f"{a!r}, {b!r}, {m!r}") from None
        s, d, k = (np.array([int(x) for x in a], dtype=np.int64) for a in (s, d, k))
    bad = np.flatnonzero((k <= 0) | (k > _ALL))
    if len(bad):
        raise ValueError(f"row {bad[0]}: kind {k[bad[0]]} is not a non-zero mask of WW=1, "
                         "WR=2, PROCESS=4, REALTIME=8")
    bad = np.flatnonzero(((s < 0) | (d < 0)) & (k != REALTIME))
    if len(bad):
        # Such an edge could not be shown as a step between two ops.
        r = bad[0]
        raise ValueError(f"row {r}: edge {s[r]} -> {d[r]} touches a timeline node, so its "
                         f"kind must be REALTIME (8), got {k[r]}")
    return s, d, k


def _components(s: np.ndarray, d: np.ndarray,
                in_place: bool) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(distinct (src, dst) pairs, mask of the edges inside a strongly connected component
    of two nodes or more, cs, cd, ids)``: only those edges can be on a cycle; ``cs``, ``cd``,
    ``ids`` as ``_renumber`` returns them. Components by scipy (compiled code: tens of
    millions of edges in seconds, where networkx needs minutes and gigabytes).

    Memory, for the 38.5 M distinct edges of a 10 M-op history: the node ids are renumbered
    in place when ``in_place`` (every id of their span, 14.7 M, of which 9.6 M are nodes:
    ``_renumber``); the graph is one CSR matrix whose duplicates scipy merges in place, and
    its float64 data, which only scipy's validation asks for, is one value broadcast to
    every edge (``docs/performance.md``).
    """
    from scipy import sparse  # MODULES
    from scipy.sparse import csgraph

    cs, cd, ids = _renumber(s, d, in_place)
    if not len(cs):
        return 0, np.zeros(0, dtype=bool), cs, cd, ids
    m = len(ids)
    # tocsr sums duplicate entries (scipy's documented conversion): nnz is then the distinct
    # edge count
    g = sparse.coo_matrix((np.ones(len(cs), dtype=bool), (cs, cd)), shape=(m, m)).tocsr()
    edges = g.nnz
    g = sparse.csr_matrix((np.broadcast_to(np.float64(1), (edges,)), g.indices, g.indptr),
                          shape=(m, m))
    _, labels = csgraph.connected_components(g, directed=True, connection="strong")
    del g
    big = np.bincount(labels) > 1
    ls = labels[cs]
    inside = ls == labels[cd]
    inside &= big[ls]
    return edges, inside, cs, cd, ids


def _renumber(s: np.ndarray, d: np.ndarray,
              in_place: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cs, cd, ids)``: ``s`` and ``d`` renumbered ``0..len(ids)-1``, ``ids[i]`` the id
    numbered i, in ``s``'s dtype. When the ids are not much sparser than the edges, every id
    of their span ``lo..hi`` gets a number, ``id - lo`` (in ``s``'s dtype when the span fits
    it); otherwise only the ids present do (``np.unique``). ``in_place``: ``cs`` and ``cd``
    are ``s`` and ``d``, overwritten, where the numbers fit their dtype."""
    lo = int(min(s.min(initial=0), d.min(initial=0)))
    hi = int(max(s.max(initial=-1), d.max(initial=-1)))
    slots = hi + 1 - lo
    if slots > 4 * len(s) + (1 << 20):  # ids sparser than the edges: no table over their span
        ids, inverse = np.unique(np.concatenate([s, d]), return_inverse=True)
        if not in_place:
            return inverse[:len(s)], inverse[len(s):], ids
        s[:], d[:] = inverse[:len(s)], inverse[len(s):]
        return s, d, ids
    # A subtraction, in place: the ids absent from the edges become isolated nodes, which the
    # component search passes in no time. Numbering only the ids present (a table over the
    # span, marked, summed and gathered) made the search of a 10 M-op history's 40 M edges
    # take 2.8 s instead of 2.2 s (medians of 6 calls, ``docs/performance.md``).
    ids = np.arange(lo, hi + 1, dtype=s.dtype)
    if slots > np.iinfo(s.dtype).max:  # numbers past the dtype: int64 copies
        cs, cd = s.astype(np.int64), d.astype(np.int64)
    else:
        cs, cd = (s, d) if in_place else (s.copy(), d.copy())
    cs -= cs.dtype.type(lo)
    cd -= cd.dtype.type(lo)
    return cs, cd, ids


def _merge(src: np.ndarray, dst: np.ndarray, kind: np.ndarray) -> dict[tuple[int, int], int]:
    merged: dict[tuple[int, int], int] = {}
    for a, b, m in zip(src.tolist(), dst.tolist(), kind.tolist()):
        merged[(a, b)] = merged.get((a, b), 0) | m
    return merged


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise _OutOfTime


def _sorted_sccs(sccs: Iterable[Iterable[int]]) -> list[list[int]]:
    comps = [sorted(c) for c in sccs if len(c) > 1]
    # By smallest op: timeline ids run backwards in time, so they would order oddly.
    return sorted(comps, key=lambda c: (min((n for n in c if n >= 0), default=0), c[0]))


def _cut(g: nx.DiGraph, cut: dict[int, list[list[int]]], allowed: int,
         deadline: float) -> list[list[int]]:
    """Nontrivial SCCs of one component with only the allowed edge types, memoised in ``cut``
    (mask -> SCCs; starts as ``{_ALL: [component]}``). Cut in two stages (all -> op-only
    types -> fewer), so the op-only subgraph of a big component is built once, not 4 times."""
    if allowed not in cut:
        parent = _ALL if allowed & REALTIME or allowed == _OP_TYPES else _OP_TYPES
        cut[allowed] = _sorted_sccs(x for c in _cut(g, cut, parent, deadline)
                                    for x in _restricted_sccs(g, c, allowed, deadline))
    return cut[allowed]


def _edges(g: nx.DiGraph, nodes: list[int], allowed: int,
           deadline: float) -> Iterator[tuple[int, int, int]]:
    """``(u, v, allowed types)`` for the edges among ``nodes`` that have an allowed type."""
    inside = set(nodes)
    for i, u in enumerate(nodes):
        if i % _CHECK_EVERY == 0:
            _check(deadline)
        if u >= 0 or allowed & REALTIME:  # timeline nodes only have realtime edges
            for v, a in g.succ[u].items():
                if a["kind"] & allowed and v in inside:
                    yield u, v, a["kind"] & allowed


def _restricted_sccs(g: nx.DiGraph, comp: list[int], allowed: int,
                     deadline: float) -> list[set[int]]:
    """SCCs of the subgraph induced by ``comp`` with only the allowed edge types."""
    import networkx as nx  # MODULES

    h = nx.DiGraph()
    h.add_edges_from((u, v) for u, v, _ in _edges(g, comp, allowed, deadline))
    sccs = list(nx.strongly_connected_components(h))
    _check(deadline)
    return sccs


def _adjacency(g: nx.DiGraph, sub: list[int], allowed: int,
               deadline: float) -> dict[int, list[tuple[int, int]]]:
    """node -> sorted [(successor in ``sub``, its allowed types)]: what the search walks."""
    adj: dict[int, list[tuple[int, int]]] = {u: [] for u in sub}
    for u, v, m in _edges(g, sub, allowed, deadline):
        adj[u].append((v, m))
    for out in adj.values():
        out.sort()
    return adj


def _search(adj: dict[int, list[tuple[int, int]]], required: tuple[int, ...],
            deadline: float) -> list[dict] | None:
    """One cycle in an SCC holding every required type and a ww or wr edge, or None: a BFS
    over (node, types seen) from each required-type edge in turn, shortest first."""
    moves, gain, goal = _moves(required)
    for u in sorted(adj):
        if u < 0:  # every cycle with a realtime step also has an op -> timeline edge
            continue
        for w, m in adj[u]:
            t0 = next((r for r in required if m & r), 0)
            if not t0:
                continue
            walk = _bfs(adj, moves, u, w, t0, gain(t0), goal, deadline)
            if walk is not None:
                cycle = _simple_cycle(walk, gain, goal)
                if cycle is not None:
                    return _steps(cycle)
    return None


@functools.cache
def _moves(required: tuple[int, ...]):
    """The search's state machine for one anomaly: ``moves[mask][seen]`` lists
    ``(new seen, type used)``, one per distinct outcome, preferred type first (a missing
    required type, then ww, wr, process, realtime); ``gain(type)`` -> seen bits it adds."""
    req = sum(required)

    def gain(t: int) -> int:
        return (t & req) | (_DATA if t & (WW | WR) else 0)

    moves: list[list[list[tuple[int, int]]]] = [[[] for _ in range(32)] for _ in range(16)]
    for m in range(16):
        for seen in range(32):
            prefs = [r for r in required if not seen & r] + list(_TYPE_ORDER)
            for t in dict.fromkeys(t for t in prefs if m & t):
                nxt = seen | gain(t)
                if all(nxt != n for n, _ in moves[m][seen]):
                    moves[m][seen].append((nxt, t))
    return moves, gain, req | _DATA


def _bfs(adj: dict[int, list[tuple[int, int]]], moves: list, u: int, w: int, t0: int,
         seen0: int, goal: int, deadline: float) -> list[tuple[int, int, int]] | None:
    # States packed as node * 32 + seen (exact for negative nodes too): ints hash fast.
    first, target = w * 32 + seen0, u * 32 + goal
    parent: dict[int, tuple[int, int] | None] = {first: None}
    queue = deque([first])
    steps = 0
    while queue:
        steps += 1
        if steps % _CHECK_EVERY == 0:
            _check(deadline)
        key = queue.popleft()
        node, seen = key >> 5, key & 31
        for nxt_node, m in adj[node]:
            for nxt_seen, t in moves[m][seen]:
                nxt = nxt_node * 32 + nxt_seen
                if nxt in parent:
                    continue
                parent[nxt] = (key, t)
                if nxt == target:
                    walk = []
                    while parent[nxt] is not None:
                        prev, t = parent[nxt]
                        walk.append((prev >> 5, nxt >> 5, t))
                        nxt = prev
                    return [(u, w, t0)] + walk[::-1]
                queue.append(nxt)
    return None


def _simple_cycle(walk: list[tuple[int, int, int]], gain, goal: int):
    """The shortest simple cycle of a closed walk's decomposition that still holds every
    required type: the product-state BFS may pass a node twice with different types seen."""
    pieces, path, stack, pos = [], [walk[0][0]], [], {walk[0][0]: 0}
    for edge in walk:
        stack.append(edge)
        b = edge[1]
        if b in pos:
            p = pos[b]
            pieces.append(stack[p:])
            del stack[p:]
            for n in path[p + 1:]:
                del pos[n]
            del path[p + 1:]
        else:
            pos[b] = len(path)
            path.append(b)
    ok = [c for c in pieces if functools.reduce(int.__or__, (gain(t) for *_, t in c)) == goal]
    return min(ok, key=len) if ok else None


def _steps(cycle: list[tuple[int, int, int]]) -> list[dict]:
    """Op-to-op steps, a run through timeline nodes made one realtime step, smallest op first."""
    i = next(i for i, (a, _, _) in enumerate(cycle) if a >= 0)
    steps, run_from = [], 0
    for a, b, t in cycle[i:] + cycle[:i]:
        if b < 0:
            run_from = a if a >= 0 else run_from
        elif a < 0:
            steps.append({"from": run_from, "to": b, "type": "realtime"})
        else:
            steps.append({"from": a, "to": b, "type": _TYPE_NAMES[t]})
    j = min(range(len(steps)), key=lambda k: steps[k]["from"])
    return steps[j:] + steps[:j]
