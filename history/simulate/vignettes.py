"""A simulated history of N ops with a chosen number of seeded anomalies of each type.

    from kafka_chaos.history.simulate import generate_vignettes
    expected = generate_vignettes(out_dir, 1_000_000, anomalies=3, seed=1)

(``bench/history_gen.py`` is its command line.) Writes ``OUT_DIR/history.jsonl`` (format 2,
``docs/history-format.md``) and its columnar copy ``OUT_DIR/history.parquet/``
(``history.columnar``, as the recorder writes it), and ``OUT_DIR/expected.json``: the anomaly
counts the analysis must find, exactly.

The background is a discrete-event simulation of a run that keeps every promise: producers
sending batches of 1-4 values (``send`` ops; ~4 % ``fail``, ~2 % ``info`` with part of their
sends acknowledged, the process then retired), transactional producers (``txn`` ops that poll
and send; ~4 % aborted, ~2 % ``info``, committed or not; a commit leaves a marker, an offset
without a record, in each partition it wrote), consumers polling every background
key from their positions (re-assigning to the beginning now and then), a nemesis killing and
restarting a node every ``FAULT_INTERVAL_S`` (simulated), the monitor sampling every 500 ms,
then final reads of every key in chunks of 10,000 records. Each op takes effect at one instant
between its invoke and its completion (its *linearization point*), so every dependency edge
goes forward in that order: the background alone holds no anomaly and no cycle.

Seeded anomalies are *vignettes*: a few ops of their own processes on keys of their own,
written at random times among the background's (``VIGNETTES``: what each plants and every
anomaly it brings along, e.g. an int-send-skip is also a G0 cycle). Vignettes whose cycles
need an op invoked after another completed leave no time for any other invoke between the
two (1 ns), so no background op joins their strongly connected component.
"""

from __future__ import annotations

import bisect
import json
import random
from pathlib import Path
from typing import Callable

from kafka_chaos.history.simulate.core import MS as _MS
from kafka_chaos.history.simulate.core import S as _S
from kafka_chaos.history.simulate.core import NODES, Simulation, nodes_header

FAULT_INTERVAL_S = 10.0
CHUNK = 10_000
CONFIG = {"acks": "all", "idempotence": True, "txn": True, "retries": 2147483647,
          "max_in_flight": 5, "min_insync_replicas": 2, "replication_factor": 3,
          "unclean_leader_election": False, "isolation_level": "read_committed",
          "sub_via": "assign", "auto_commit": False, "auto_offset_reset": "earliest",
          "kafka_version": "4.4.0", "brokers": 3, "seed": 0}

#: vignette name -> every anomaly one instance of it brings (counts).
VIGNETTES: dict[str, dict[str, int]] = {
    "lost-write": {"lost-write": 1},
    "unseen": {"unseen": 1},
    "duplicate": {"duplicate": 1},
    "inconsistent-offsets": {"inconsistent-offsets": 1},
    # a process's later op lands first: ww back along the process (and realtime) order
    "nonmonotonic-send": {"nonmonotonic-send": 1, "G0-process": 1, "G0-realtime": 1},
    "int-nonmonotonic-send": {"int-nonmonotonic-send": 1},
    # another producer's record between two sends of one op: a ww cycle of the two ops
    "int-send-skip": {"int-send-skip": 1, "G0": 1},
    "poll-skip": {"poll-skip": 1},
    "nonmonotonic-poll": {"nonmonotonic-poll": 1},
    "int-poll-skip": {"int-poll-skip": 1},
    "int-nonmonotonic-poll": {"int-nonmonotonic-poll": 1},
    "G1a": {"G1a": 1},
    "precommitted-read": {"precommitted-read": 1},
    "G0": {"G0": 1},
    "G1c": {"G1c": 1},
    # the process edge comes with a realtime edge: a completed op, then the next one
    "G0-process": {"G0-process": 1, "G0-realtime": 1},
    "G1c-process": {"G1c-process": 1, "G1c-realtime": 1},
    "G0-realtime": {"G0-realtime": 1},
    "G1c-realtime": {"G1c-realtime": 1},
    "group-skip": {"group-skip": 1},
    "group-redelivery": {"group-redelivery": 1},
}


class _Gen(Simulation):
    """The simulation of a run that keeps every promise, plus the vignettes' final logs."""

    def __init__(self, path: Path, n_ops: int, keys: int, seed: int) -> None:
        header = {"kafka_chaos": "0.2.0", "kafka_version": "4.4.0", "config": CONFIG,
                  "keys": {}, "nodes": nodes_header()}
        super().__init__(path, header, keys, random.Random(seed))
        self.budget = n_ops
        self.final: dict[int, tuple[list[tuple[int, int]], int]] = {}  # vignette key -> log
        self.quiet: list[tuple[int, int]] = []  # [from, to] ns: no background invoke there
        self.done = False
        self.next_key = keys

    def new_key(self) -> int:
        self.next_key += 1
        return self.next_key - 1

    def in_quiet(self, t: int) -> bool:
        i = bisect.bisect_right(self.quiet, (t, 2**62)) - 1
        return i >= 0 and self.quiet[i][0] <= t <= self.quiet[i][1]

    # -- background --------------------------------------------------------------------------

    def start_background(self, producers: int, txn_producers: int, consumers: int) -> None:
        for _ in range(producers):
            self.at(self.rng.randrange(5 * _MS), lambda p=self.new_process(): self.produce(p))
        for _ in range(txn_producers):
            p = self.new_process()
            self.at(self.rng.randrange(5 * _MS), lambda p=p: self.assign(p, self.transact))
        for _ in range(consumers):
            p = self.new_process()
            self.at(self.rng.randrange(5 * _MS), lambda p=p: self.assign(p, self.consume))
        self.at(_S // 2, self.sample)
        self.at(int(FAULT_INTERVAL_S * _S), lambda: self.fault(True))

    def busy(self, lines: int) -> bool:
        """Take ``lines`` from the budget; False (and the workload ends) when it is spent."""
        if self.done or self.lines + lines > self.budget:
            self.done = True
            return False
        return True

    def invoke_at(self, t: int, fn: Callable[[], None]) -> None:
        while self.in_quiet(t):
            t += 2
        self.at(t, fn)

    def think(self) -> int:
        return self.now + 1 + int(self.rng.expovariate(1 / (2 * _MS)))

    def produce(self, p: int) -> None:
        if not self.busy(2):
            return
        sends = [[self.rng.randrange(self.keys), self.new_value()]
                 for _ in range(self.rng.randint(1, 4))]
        self.write(p, "invoke", "send", [["send", k, v] for k, v in sends])
        lat = 1 + int(self.rng.lognormvariate(15.0, 0.6))
        r = self.rng.random()
        outcome = "fail" if r < 0.04 else "info" if r < 0.06 else "ok"
        result: list = []

        def apply() -> None:
            for k, v in sends:
                if outcome == "fail" or (outcome == "info" and self.rng.random() < 0.5):
                    result.append(["send", k, [None, v]])
                else:
                    self.logs[k].append(v)
                    result.append(["send", k, [len(self.logs[k]) - 1, v, self.now]])

        def complete() -> None:
            if outcome == "ok":
                self.write(p, "ok", "send", result)
            else:
                self.write(p, outcome, "send", result,
                           "NOT_ENOUGH_REPLICAS" if outcome == "fail" else "_MSG_TIMED_OUT")
            nxt = self.new_process() if outcome == "info" else p
            self.invoke_at(self.think(), lambda: self.produce(nxt))
        self.at(self.now + self.rng.randrange(1, lat), apply)
        self.at(self.now + lat, complete)

    def assign(self, p: int, then: Callable[[int, list[int]], None]) -> None:
        if not self.busy(2):
            return
        value = {"keys": list(range(self.keys)), "seek": "beginning"}
        self.write(p, "invoke", "assign", value)

        def done() -> None:
            self.write(p, "ok", "assign", value)
            position = [0] * self.keys
            self.invoke_at(self.think(), lambda: then(p, position))
        self.at(self.now + _MS // 2, done)

    def read(self, position: list[int], limit: int) -> dict[str, list[list[int]]]:
        """Up to ``limit`` records of each key from ``position`` (moved past them and past
        transaction markers, which are no records)."""
        out = {}
        for k in range(self.keys):
            log = self.logs[k]
            o, recs = position[k], []
            while o < len(log) and len(recs) < limit:
                if log[o] is not None:
                    recs.append([o, log[o]])
                o += 1
            position[k] = o
            if recs:
                out[str(k)] = recs
        return out

    def consume(self, p: int, position: list[int]) -> None:
        if self.rng.random() < 0.01:
            return self.assign(p, self.consume)
        if not self.busy(2):
            return
        self.write(p, "invoke", "poll", [["poll"]])
        lat = 1 + int(self.rng.lognormvariate(14.5, 0.5))
        got: list = []
        self.at(self.now + self.rng.randrange(1, lat),
                lambda: got.append(self.read(position, self.rng.randint(1, 2))))

        def complete() -> None:
            self.write(p, "ok", "poll", [["poll", got[0]]])
            self.invoke_at(self.think(), lambda: self.consume(p, position))
        self.at(self.now + lat, complete)

    def transact(self, p: int, position: list[int]) -> None:
        if not self.busy(2):
            return
        n = self.rng.randint(1, 4)
        mops: list[list] = [["poll"]] if self.rng.random() < 0.5 else []
        mops += [["send", self.rng.randrange(self.keys), self.new_value()] for _ in range(n)]
        self.write(p, "invoke", "txn", mops)
        lat = 1 + int(self.rng.lognormvariate(15.5, 0.5))
        r = self.rng.random()
        outcome = "fail" if r < 0.04 else "info" if r < 0.06 else "ok"
        commit = outcome == "ok" or (outcome == "info" and self.rng.random() < 0.5)
        saved = list(position)
        result: list = []

        def apply() -> None:
            written = set()
            for m in mops:
                if m[0] == "poll":
                    result.append(["poll", self.read(position, self.rng.randint(1, 2))])
                elif commit:
                    self.logs[m[1]].append(m[2])
                    written.add(m[1])
                    result.append(["send", m[1], [len(self.logs[m[1]]) - 1, m[2], self.now]])
                else:
                    result.append(["send", m[1], [None, m[2]]])
            for k in sorted(written):  # the commit marker takes an offset of each partition
                self.logs[k].append(None)

        def complete() -> None:
            if outcome == "ok":
                self.write(p, "ok", "txn", result)
            else:
                self.write(p, outcome, "txn", result,
                           "ABORTED" if outcome == "fail" else "_MSG_TIMED_OUT")
            if outcome == "fail":  # an aborted transaction's consumer seeks back
                position[:] = saved
            if outcome == "info":
                nxt = self.new_process()
                self.invoke_at(self.think(), lambda: self.assign(nxt, self.transact))
            else:
                self.invoke_at(self.think(), lambda: self.transact(p, position))
        self.at(self.now + self.rng.randrange(1, lat), apply)
        self.at(self.now + lat, complete)

    def sample(self, trigger: str = "period", partitions: int | None = 1,
               took_ns: int = 0) -> None:
        if self.done:
            return
        super().sample(trigger, partitions, took_ns)
        self.at(self.now + _S // 2, self.sample)

    def fault(self, kill: bool) -> None:
        if self.done:
            return
        node = NODES[self.rng.randrange(len(NODES))]
        if kill:
            self.write("nemesis", "invoke", "kill", {"target": "one"})
            self.write("nemesis", "ok", "kill", {"killed": [f"n{node}"]})
        else:
            self.write("nemesis", "invoke", "start", None)
            self.write("nemesis", "ok", "start", {"started": [f"n{node}"]})
        self.at(self.now + int(FAULT_INTERVAL_S * _S), lambda: self.fault(not kill))

    # -- the end -----------------------------------------------------------------------------

    def finish(self) -> None:
        self.write("nemesis", "invoke", "heal-all", None)
        self.write("nemesis", "ok", "heal-all", {"kill": [], "partition": {"healed": True}})
        logs = {k: ([(o, v) for o, v in enumerate(log) if v is not None], len(log))
                for k, log in enumerate(self.logs)}
        logs.update(self.final)
        self.final_reads(logs, CHUNK, _MS)


# -- vignettes --------------------------------------------------------------------------------
# Each returns its lines as (ns after its start, process, type, f, value) and sets the final
# log of its keys. ``K`` allocates a fresh key, ``V`` a fresh value, ``P`` a fresh process.

def _lines(g: _Gen, name: str) -> list[tuple]:
    K, V, P = g.new_key, g.new_value, g.new_process
    ms = _MS
    ok = lambda t, p, f, v: (t, p, "ok", f, v)  # noqa: E731
    inv = lambda t, p, f, v: (t, p, "invoke", f, v)  # noqa: E731
    snd = lambda k, v, o: ["send", k, [o, v]]  # noqa: E731
    poll = lambda k, recs: ["poll", {str(k): [list(r) for r in recs]}]  # noqa: E731

    def assign(t, p, keys):
        v = {"keys": keys, "seek": "beginning"}
        return [inv(t, p, "assign", v), ok(t + ms // 2, p, "assign", v)]

    if name in ("lost-write", "unseen", "duplicate", "int-nonmonotonic-send"):
        k, p, a, b, c = K(), P(), V(), V(), V()
        if name == "lost-write":  # acked at 0, 1, 2; offset 1 gone from the log
            g.final[k] = ([(0, a), (2, c)], 3)
            vals, offs = [a, b, c], [0, 1, 2]
        elif name == "unseen":  # the log was truncated below the second one
            g.final[k] = ([(0, a)], 1)
            vals, offs = [a, b], [0, 1]
        elif name == "duplicate":  # a retry appended it twice
            g.final[k] = ([(0, a), (1, a)], 2)
            vals, offs = [a], [0]
        else:  # one op's sends reordered by retries
            g.final[k] = ([(0, b), (1, a)], 2)
            vals, offs = [a, b], [1, 0]
        return [inv(0, p, "send", [["send", k, v] for v in vals]),
                ok(2 * ms, p, "send", [snd(k, v, o) for v, o in zip(vals, offs)])]
    if name == "inconsistent-offsets":  # a poll saw a at 0; the log now has b there
        k, p1, p2, c, a, b = K(), P(), P(), P(), V(), V()
        g.final[k] = ([(0, b)], 1)
        return [inv(0, p1, "send", [["send", k, a]]),
                (2 * ms, p1, "info", "send", [snd(k, a, None)]),
                *assign(3 * ms, c, [k]),
                inv(4 * ms, c, "poll", [["poll"]]), ok(5 * ms, c, "poll", [poll(k, [(0, a)])]),
                inv(6 * ms, p2, "send", [["send", k, b]]),
                ok(7 * ms, p2, "send", [snd(k, b, 0)])]
    if name in ("nonmonotonic-send", "G0-realtime"):  # the later op lands first (offset 0)
        k, p1, a, b = K(), P(), V(), V()
        p2 = p1 if name == "nonmonotonic-send" else P()
        g.final[k] = ([(0, b), (1, a)], 2)
        return [inv(0, p1, "send", [["send", k, a]]), ok(2 * ms, p1, "send", [snd(k, a, 1)]),
                inv(2 * ms + 1, p2, "send", [["send", k, b]]),
                ok(4 * ms, p2, "send", [snd(k, b, 0)])]
    if name == "int-send-skip":  # c lands between a and b
        k, p1, p2, a, b, c = K(), P(), P(), V(), V(), V()
        g.final[k] = ([(0, a), (1, c), (2, b)], 3)
        return [inv(0, p1, "send", [["send", k, a], ["send", k, b]]),
                inv(ms, p2, "send", [["send", k, c]]),
                ok(3 * ms, p1, "send", [snd(k, a, 0), snd(k, b, 2)]),
                ok(4 * ms, p2, "send", [snd(k, c, 1)])]
    if name in ("poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll"):
        k, p, c, a, b, d = K(), P(), P(), V(), V(), V()
        g.final[k] = ([(0, a), (1, b), (2, d)], 3)
        recs = {"poll-skip": [[(0, a)], [(2, d)]],
                "nonmonotonic-poll": [[(0, a), (1, b)], [(1, b)]],
                "int-poll-skip": [[(0, a), (2, d)]],
                "int-nonmonotonic-poll": [[(1, b), (0, a)]]}[name]
        out = [inv(0, p, "send", [["send", k, v] for v in (a, b, d)]),
               ok(ms, p, "send", [snd(k, a, 0), snd(k, b, 1), snd(k, d, 2)]),
               *assign(2 * ms, c, [k])]
        for i, r in enumerate(recs):
            out += [inv((4 + 2 * i) * ms, c, "poll", [["poll"]]),
                    ok((5 + 2 * i) * ms, c, "poll", [poll(k, r)])]
        return out
    if name == "G1a":  # a failed send whose value is in the log
        k, p, a = K(), P(), V()
        g.final[k] = ([(0, a)], 1)
        return [inv(0, p, "send", [["send", k, a]]),
                (2 * ms, p, "fail", "send", [snd(k, a, None)])]
    if name == "precommitted-read":  # a transaction reads its own write
        k, p, a = K(), P(), V()
        g.final[k] = ([(0, a)], 1)
        return [inv(0, p, "txn", [["send", k, a], ["poll"]]),
                ok(2 * ms, p, "txn", [snd(k, a, 0), poll(k, [(0, a)])])]
    if name == "G0":  # two concurrent ops write two keys in opposite orders
        k1, k2, p1, p2, a1, a2, b1, b2 = K(), K(), P(), P(), V(), V(), V(), V()
        g.final[k1] = ([(0, a1), (1, b1)], 2)
        g.final[k2] = ([(0, b2), (1, a2)], 2)
        return [inv(0, p1, "send", [["send", k1, a1], ["send", k2, a2]]),
                inv(ms, p2, "send", [["send", k1, b1], ["send", k2, b2]]),
                ok(3 * ms, p1, "send", [snd(k1, a1, 0), snd(k2, a2, 1)]),
                ok(4 * ms, p2, "send", [snd(k1, b1, 1), snd(k2, b2, 0)])]
    if name == "G1c":  # t2 reads t1's write; t2's write precedes t1's on another key
        k1, k2, p1, p2, x, z, y = K(), K(), P(), P(), V(), V(), V()
        g.final[k1] = ([(0, x)], 1)
        g.final[k2] = ([(0, y), (1, z)], 2)
        return [inv(0, p1, "txn", [["send", k1, x], ["send", k2, z]]),
                *assign(0, p2, [k1]),
                inv(ms, p2, "txn", [["poll"], ["send", k2, y]]),
                ok(3 * ms, p2, "txn", [poll(k1, [(0, x)]), snd(k2, y, 0)]),
                ok(4 * ms, p1, "txn", [snd(k1, x, 0), snd(k2, z, 1)])]
    if name == "G0-process":  # a ->process b ->ww c ->ww a; c spans both
        k1, k2, p, pc, va, vb, c1, c2 = K(), K(), P(), P(), V(), V(), V(), V()
        g.final[k2] = ([(0, c2), (1, va)], 2)
        g.final[k1] = ([(0, vb), (1, c1)], 2)
        return [inv(0, pc, "send", [["send", k2, c2], ["send", k1, c1]]),
                inv(ms, p, "send", [["send", k2, va]]), ok(2 * ms, p, "send", [snd(k2, va, 1)]),
                inv(2 * ms + 1, p, "send", [["send", k1, vb]]),
                ok(3 * ms, p, "send", [snd(k1, vb, 0)]),
                ok(4 * ms, pc, "send", [snd(k2, c2, 0), snd(k1, c1, 1)])]
    if name in ("G1c-process", "G1c-realtime"):  # w ->wr a ->(process|realtime) b ->ww w
        k1, k2, pw, pa, x, w2, vb = K(), K(), P(), P(), V(), V(), V()
        pb = pa if name == "G1c-process" else P()
        g.final[k1] = ([(0, x)], 1)
        g.final[k2] = ([(0, vb), (1, w2)], 2)
        return [*assign(0, pa, [k1]),
                inv(ms, pw, "send", [["send", k1, x], ["send", k2, w2]]),
                inv(2 * ms, pa, "poll", [["poll"]]), ok(3 * ms, pa, "poll", [poll(k1, [(0, x)])]),
                inv(3 * ms + 1, pb, "send", [["send", k2, vb]]),
                ok(4 * ms, pb, "send", [snd(k2, vb, 0)]),
                ok(5 * ms, pw, "send", [snd(k1, x, 0), snd(k2, w2, 1)])]
    if name in ("group-skip", "group-redelivery"):
        k, p, c1, c2, a, b, d = K(), P(), P(), P(), V(), V(), V()
        group = {"keys": [k], "group": f"g{k}"}
        g.final[k] = ([(0, a), (1, b), (2, d)], 3)
        out = [inv(0, p, "send", [["send", k, v] for v in (a, b, d)]),
               ok(ms, p, "send", [snd(k, a, 0), snd(k, b, 1), snd(k, d, 2)]),
               inv(2 * ms, c1, "subscribe", group), ok(3 * ms, c1, "subscribe", group),
               inv(4 * ms, c1, "poll", [["poll"]]),
               ok(5 * ms, c1, "poll", [["assigned", [k]], poll(k, [(0, a)])])]
        if name == "group-skip":  # committed past offset 1, which no member delivered
            return out + [inv(6 * ms, c1, "commit", {"offsets": {str(k): 2}}),
                          ok(7 * ms, c1, "commit", {"offsets": {str(k): 2}})]
        return out + [inv(6 * ms, c2, "subscribe", group), ok(7 * ms, c2, "subscribe", group),
                      inv(8 * ms, c2, "poll", [["poll"]]),
                      ok(9 * ms, c2, "poll", [["assigned", [k]], poll(k, [(0, a)])])]
    raise ValueError(f"no vignette {name!r}")


def plant(g: _Gen, name: str, start: int) -> int:
    """Schedule one vignette's lines from ``start`` ns; returns the lines it takes."""
    lines = _lines(g, name)
    for t, p, typ, f, value in lines:
        error = {"fail": "NOT_ENOUGH_REPLICAS", "info": "_MSG_TIMED_OUT"}.get(typ)
        g.at(start + t, lambda p=p, typ=typ, f=f, value=value, error=error:
             g.write(p, typ, f, value, error))
    # no background invoke between an op's completion and an invoke 1 ns later
    times = sorted(t for t, *_ in lines)
    for a, b in zip(times, times[1:]):
        if b - a == 1:
            g.quiet.append((start + a, start + b))
    return len(lines)


def generate(out: Path, n_ops: int, anomalies: int = 3, seed: int = 1, keys: int = 8,
             producers: int = 6, txn_producers: int = 2, consumers: int = 2) -> dict[str, int]:
    """Write the history and its columnar copy into ``out`` (created; no history there yet)
    with ``anomalies`` instances of each vignette (``VIGNETTES``) among about ``n_ops`` lines
    (``producers``, ``txn_producers`` and ``consumers`` processes on ``keys`` background
    keys); returns the expected anomaly counts (also written to ``expected.json``). Raises
    ``FileExistsError`` when ``out`` holds a history."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    g = _Gen(out / "history.jsonl", n_ops, keys, seed)
    expected: dict[str, int] = {}
    # what the background costs per simulated second, to spread vignettes over the run
    rate = (producers + txn_producers + consumers) * 2 / (2.5 * _MS) * _S
    span = int(n_ops / rate * _S)
    vignette_lines = 0
    for name, brings in VIGNETTES.items():
        for _ in range(anomalies):
            vignette_lines += plant(g, name, g.rng.randrange(span // 10, max(span, 1)))
            for kind, n in brings.items():
                expected[kind] = expected.get(kind, 0) + n
    g.quiet.sort()
    g.budget = n_ops - vignette_lines - 4 * (keys + len(g.final)) - 2 * (keys + 1)
    g.start_background(producers, txn_producers, consumers)
    g.run()
    g.finish()
    g.close()
    (out / "expected.json").write_text(json.dumps(dict(sorted(expected.items())), indent=1))
    return expected
