"""Tests of analysis.elle: the bounded cycle search for G0/G1c and their process/realtime forms."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import subprocess
import sys
import time
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.analysis import elle
from kafka_chaos.analysis.elle import (ANOMALY_SPECS, CYCLE_ANOMALIES, PROCESS, REALTIME, WR, WW,
                           describe_cycle, find_cycles)

_NAMES = {"ww": WW, "wr": WR, "process": PROCESS, "realtime": REALTIME}


def run(edges: list[tuple[int, int, int]], **kw) -> elle.CycleReport:
    src, dst, kind = zip(*edges) if edges else ((), (), ())
    return find_cycles(list(src), list(dst), list(kind), **kw)


def counts(report: elle.CycleReport) -> dict[str, int]:
    return {name: len(report.cycles[name]) for name in CYCLE_ANOMALIES}


def only(**expected: int) -> dict[str, int]:
    names = {k.replace("_", "-"): v for k, v in expected.items()}
    return {name: names.get(name, 0) for name in CYCLE_ANOMALIES}


def s(a: int, b: int, t: str) -> dict:
    return {"from": a, "to": b, "type": t}


def assert_valid(report: elle.CycleReport, edges: list[tuple[int, int, int]]) -> None:
    """Every reported cycle chains, closes, uses real edges of allowed types, has every
    required type and a ww/wr step, and shows no timeline node."""
    merged: dict[tuple[int, int], int] = {}
    for a, b, k in edges:
        merged[(a, b)] = merged.get((a, b), 0) | k
    for name, cycles in report.cycles.items():
        allowed, required = ANOMALY_SPECS[name]
        for steps in cycles:
            assert steps and steps[0]["from"] == min(x["from"] for x in steps)
            for x, y in zip(steps, steps[1:] + steps[:1]):
                assert x["to"] == y["from"] and x["from"] >= 0 and x["to"] >= 0
            types = {_NAMES[x["type"]] for x in steps}
            assert all(t & allowed for t in types) and all(r in types for r in required)
            assert types & {WW, WR}
            for x in steps:
                if x["type"] != "realtime":  # realtime steps may go through timeline nodes
                    assert merged.get((x["from"], x["to"]), 0) & _NAMES[x["type"]]


# --- one hand-built graph per anomaly type -----------------------------------------------

def test_two_disjoint_ww_cycles_are_two_g0_and_nothing_else():
    edges = [(1, 2, WW), (2, 3, WW), (3, 1, WW), (10, 11, WW), (11, 10, WW)]
    r = run(edges)
    assert counts(r) == only(G0=2)
    assert r.cycles["G0"] == [[s(1, 2, "ww"), s(2, 3, "ww"), s(3, 1, "ww")],
                              [s(10, 11, "ww"), s(11, 10, "ww")]]
    assert (r.complete, r.components, r.largest_component, r.edges) == (True, 2, 3, 5)


def test_ww_wr_cycle_is_g1c_not_g0():
    edges = [(7, 3, WW), (3, 7, WR)]
    r = run(edges)
    assert counts(r) == only(G1c=1)
    assert r.cycles["G1c"] == [[s(3, 7, "wr"), s(7, 3, "ww")]]


def test_ww_cycle_closed_by_process_edge_is_g0_process():
    r = run([(1, 2, WW), (2, 3, WW), (3, 1, PROCESS)])
    assert counts(r) == only(G0_process=1)
    assert r.cycles["G0-process"] == [[s(1, 2, "ww"), s(2, 3, "ww"), s(3, 1, "process")]]


def test_wr_process_ww_cycle_is_g1c_process_only():
    r = run([(1, 2, WR), (2, 3, PROCESS), (3, 1, WW)])
    assert counts(r) == only(G1c_process=1)
    assert r.cycles["G1c-process"] == [[s(1, 2, "wr"), s(2, 3, "process"), s(3, 1, "ww")]]


TIMELINE_PATH = [(5, -1, REALTIME), (-1, -2, REALTIME), (-2, -3, REALTIME), (-3, 9, REALTIME)]


def test_realtime_path_through_timeline_nodes_is_one_step_of_g0_realtime():
    r = run(TIMELINE_PATH + [(9, 5, WW)])
    assert counts(r) == only(G0_realtime=1)
    assert r.cycles["G0-realtime"] == [[s(5, 9, "realtime"), s(9, 5, "ww")]]
    assert describe_cycle(r.cycles["G0-realtime"][0]) == "op 5 -realtime-> op 9 -ww-> op 5"
    assert (r.components, r.largest_component) == (1, 2)  # timeline nodes not counted


def test_realtime_path_closed_by_wr_is_g1c_realtime():
    r = run(TIMELINE_PATH + [(9, 5, WR)])
    assert counts(r) == only(G1c_realtime=1)
    assert r.cycles["G1c-realtime"] == [[s(5, 9, "realtime"), s(9, 5, "wr")]]


def test_mixed_graph_counts_each_anomaly_once_per_subcomponent():
    edges = ([(1, 2, WW), (2, 1, WW)]  # G0
             + [(3, 4, WW), (4, 3, WR)]  # G1c
             + [(5, 6, WW), (6, 5, PROCESS)]  # G0-process
             + [(20, 21, WR), (21, 22, PROCESS), (22, 20, WW)]  # G1c-process
             + TIMELINE_PATH + [(9, 8, WW), (8, 5, PROCESS)])  # G0-realtime
    r = run(edges)
    assert counts(r) == only(G0=1, G1c=1, G0_process=1, G1c_process=1, G0_realtime=1)
    assert r.cycles["G0-realtime"] == [[s(5, 9, "realtime"), s(9, 8, "ww"), s(8, 5, "process")]]
    assert_valid(r, edges)
    json.dumps(dataclasses.asdict(r))


def test_cycle_with_only_process_and_realtime_edges_is_not_reported():
    r = run([(1, 2, PROCESS), (2, -1, REALTIME), (-1, 1, REALTIME)])
    assert counts(r) == only() and r.components == 1


def test_closed_walk_is_cut_to_the_simple_cycle_that_qualifies():
    # From the start edge 1 -wr-> 2 the shortest walk back to 1 holding a process edge is
    # 1 2 3 4 2 1: it passes op 2 twice; its piece 2 3 4 2 is the G1c-process cycle.
    r = run([(1, 2, WR), (2, 1, WW), (2, 3, PROCESS), (3, 4, WR), (4, 2, WW)])
    assert counts(r) == only(G1c=1, G1c_process=1)
    assert r.cycles["G1c-process"] == [[s(2, 3, "process"), s(3, 4, "wr"), s(4, 2, "ww")]]


def test_two_cycles_sharing_a_node_are_not_one_anomaly():
    # 1 2 1 has the wr, 1 3 1 the process edge: no simple cycle holds both.
    r = run([(1, 2, WR), (2, 1, WW), (1, 3, PROCESS), (3, 1, WW)])
    assert counts(r) == only(G1c=1, G0_process=1)


# --- merging, describing, validation -----------------------------------------------------

def test_parallel_rows_are_merged_and_the_missing_required_type_is_preferred():
    edges = [(1, 2, WW), (2, 1, WW), (2, 1, PROCESS), (1, 2, WR), (3, 3, WW)]
    r = run(edges)
    assert r.edges == 2  # (1, 2), (2, 1); the self-loop is dropped
    assert counts(r) == only(G0=1, G1c=1, G0_process=1, G1c_process=1)
    assert r.cycles["G0"] == [[s(1, 2, "ww"), s(2, 1, "ww")]]
    assert r.cycles["G1c"] == [[s(1, 2, "wr"), s(2, 1, "ww")]]
    assert r.cycles["G0-process"] == [[s(1, 2, "ww"), s(2, 1, "process")]]
    assert r.cycles["G1c-process"] == [[s(1, 2, "wr"), s(2, 1, "process")]]


def test_inputs_may_be_any_int_sequences():
    pa = pytest.importorskip("pyarrow")
    r = find_cycles(pa.array([1, 2]), (2, 1), range(1, 3))
    assert counts(r) == only(G1c=1)
    json.dumps(dataclasses.asdict(r))


def test_describe_cycle():
    steps = [s(12, 15, "ww"), s(15, 20, "wr"), s(20, 12, "process")]
    assert describe_cycle(steps) == "op 12 -ww-> op 15 -wr-> op 20 -process-> op 12"
    assert describe_cycle([]) == ""


@pytest.mark.parametrize("src, dst, kind, row", [
    ([1, 2, 3], [2, 3], [1, 1, 1], "row 2"),
    ([1, 2, 3], [2, 3, 1], [1, 1, 0], "row 2"),
    ([1, 2, 3], [2, 3, 1], [1, 16, 1], "row 1"),
    ([1, 2, 3], [2, 3, 1], [1, 1, -1], "row 2"),
    ([1, "x", 3], [2, 3, 1], [1, 1, 1], "row 1"),
    ([1, 2, 3], [2, 3, None], [1, 1, 1], "row 2"),
    ([1, -2, 3], [-2, 3, 1], [REALTIME, WW, 1], "row 1"),  # timeline edges are realtime only
])
def test_bad_input_names_the_row(src, dst, kind, row):
    with pytest.raises(ValueError, match=row):
        find_cycles(src, dst, kind)


# --- properties --------------------------------------------------------------------------

@st.composite
def forward_edges(draw, nodes=st.integers(-6, 25)):
    """Edges from a lower to a higher node id only: acyclic whatever the kinds."""
    out = []
    for _ in range(draw(st.integers(0, 60))):
        a, b = sorted(draw(st.lists(nodes, min_size=2, max_size=2, unique=True)))
        k = REALTIME if a < 0 or b < 0 else draw(st.integers(1, 15))
        out.append((a, b, k))
    return out


@settings(max_examples=60, deadline=None)
@given(forward_edges())
def test_acyclic_graph_has_no_cycles(edges):
    r = run(edges)
    assert counts(r) == only() and r.complete and r.components == 0


@settings(max_examples=60, deadline=None)
@given(forward_edges(), st.lists(st.integers(0, 25), min_size=2, max_size=6, unique=True),
       st.randoms(use_true_random=False))
def test_back_edge_closing_a_ww_path_is_g0(noise, path, rnd):
    path = sorted(path)
    edges = noise + [(a, b, WW) for a, b in zip(path, path[1:])] + [(path[-1], path[0], WW)]
    rnd.shuffle(edges)
    r = run(edges)
    assert r.complete and len(r.cycles["G0"]) >= 1
    assert_valid(r, edges)
    assert run(list(reversed(edges))).cycles == r.cycles  # row order does not matter


@settings(max_examples=40, deadline=None)
@given(forward_edges(), st.lists(st.integers(0, 25), min_size=2, max_size=6, unique=True),
       st.sampled_from([1, 10**6]), st.sampled_from([np.int32, np.int64]))
def test_renumbering_in_place_finds_the_same(noise, path, spread, dtype):
    """``reuse``: the arrays are renumbered in place, over a table of the ids' span or (ids
    ``spread`` far apart) by sorting them; the report is the one of the copying search."""
    path = sorted(path)
    edges = noise + [(a, b, WR) for a, b in zip(path, path[1:])] + [(path[-1], path[0], WW)]
    src, dst, kind = (np.array(c, dtype=dtype) for c in zip(*edges))
    src, dst = src * spread, dst * spread
    given_src, given_dst = src.copy(), dst.copy()
    copied = elle.find_cycles(src, dst, kind)
    assert np.array_equal(src, given_src) and np.array_equal(dst, given_dst)  # untouched
    assert dataclasses.replace(elle.find_cycles(src, dst, kind, reuse=True), time_s=0) == \
        dataclasses.replace(copied, time_s=0)
    assert len(copied.cycles["G1c"]) >= 1


def test_renumbering_past_its_dtype_copies_to_int64():
    """A span of ids wider than their dtype holds (0..127: 128 numbers, int8 holds 127) is
    numbered in int64 copies, not in place, even with ``reuse``: the arrays stay as given,
    and the cycle is found with the ids it was given."""
    s, d = np.array([1, 127, 5], dtype=np.int8), np.array([127, 1, 1], dtype=np.int8)
    kind = np.array([WW, WR, WR], dtype=np.int8)
    r = elle.find_cycles(s, d, kind, reuse=True)
    assert s.tolist() == [1, 127, 5] and d.tolist() == [127, 1, 1]  # untouched
    assert dataclasses.replace(r, time_s=0) == dataclasses.replace(
        elle.find_cycles(s, d, kind), time_s=0)
    assert r.cycles["G1c"] == [[{"from": 1, "to": 127, "type": "ww"},
                                {"from": 127, "to": 1, "type": "wr"}]], r.cycles


# --- the time bound ----------------------------------------------------------------------

def overlapping_cycles(n: int) -> list[tuple[int, int, int]]:
    """A ring of n ops (ww) with wr and process chords: one big component, many cycles."""
    rng = random.Random(n)
    edges = [(i, (i + 1) % n, WW) for i in range(n)]
    edges += [(i, (i + rng.randrange(2, 50)) % n, WR) for i in range(n)]
    edges += [(i, (i + 7) % n, PROCESS) for i in range(n)]
    return edges


def test_zero_time_bound_stops_a_large_search_quickly():
    edges = overlapping_cycles(30_000)  # 90k edges
    assert len(edges) == 90_000
    started = time.monotonic()
    r = run(edges, time_limit_s=0.0)
    assert not r.complete and counts(r) == only()
    assert r.components == 1 and r.largest_component == 30_000
    assert time.monotonic() - started < 15


def test_generous_time_bound_completes():
    edges = overlapping_cycles(200)
    r = run(edges, time_limit_s=60.0)
    assert r.complete and r.components == 1
    assert counts(r) == only(G0=1, G1c=1, G0_process=1, G1c_process=1)
    assert_valid(r, edges)


def test_bound_reached_mid_search_keeps_what_was_found(monkeypatch):
    # A fake clock that advances 1 ms per read: deterministic, whatever the machine load.
    ticks = itertools.count()
    monkeypatch.setattr(elle, "time", types.SimpleNamespace(monotonic=lambda: next(ticks) / 1e3))
    edges = [e for a in range(0, 4000, 2)
             for e in ((a, a + 1, WW), (a + 1, a, WR if a < 2000 else PROCESS))]
    full = run(edges)
    assert full.complete and counts(full) == only(G1c=1000, G0_process=1000)
    reads = next(ticks)
    r = run(edges, time_limit_s=reads / 2e3)  # runs out half-way
    assert not r.complete and r.components == 2000
    assert 0 < sum(counts(r).values()) < 2000
    assert all(r.cycles[n] == full.cycles[n][:len(r.cycles[n])] for n in CYCLE_ANOMALIES)


@pytest.mark.slow
def test_a_million_edge_history_graph_is_searched_within_its_bound():
    """Acceptance: a synthetic history-shaped graph of >= 1 M edges (the benchmark's, with
    planted G0 and G1c cycles) is searched within its bound, and says whether it was complete."""
    from bench.cycles_bench import generate

    src, dst, kind = generate(1_100_000, processes=20, keys=8, plant=8, gap=20_000, seed=1)
    bound_s = 60.0
    started = time.monotonic()
    r = elle.find_cycles(src, dst, kind, time_limit_s=bound_s)
    elapsed = time.monotonic() - started
    assert r.edges >= 1_000_000
    assert r.complete and r.time_s <= elapsed < bound_s + 30  # graph building is outside it
    assert len(r.cycles["G0"]) >= 8 and len(r.cycles["G1c"]) >= 8
    cut = elle.find_cycles(src, dst, kind, time_limit_s=0.0)
    assert cut.complete is False and cut.edges == r.edges


def test_the_search_modules_load_in_a_thread_of_the_check_not_with_the_package() -> None:
    """networkx, scipy and pyarrow.dataset (0.4 s) are imported by ``analysis.check`` while
    the driver JVM starts, not by importing the module that holds it."""
    code = ("import json, sys\n"
            "from kafka_chaos.analysis import elle, verdict\n"
            "from kafka_chaos.analysis.checkers import cycles\n"
            "names = (*elle.MODULES, *cycles.MODULES)\n"
            "before = [m for m in names if m in sys.modules]\n"
            "verdict._import_search_modules()\n"
            "print(json.dumps([before, [m for m in names if m in sys.modules], names]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    before, after, names = json.loads(out)
    assert before == [] and after == names and "networkx" in names
