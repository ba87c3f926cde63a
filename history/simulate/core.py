"""The simulation engine both simulated runs share: events in simulated time, the history
they write, and the state of a three-node cluster (``kafka_chaos.history.simulate``)."""

from __future__ import annotations

import heapq
import random
from pathlib import Path
from typing import Any, Callable

from kafka_chaos.history.writer import HistoryWriter

TOPIC = "kafka-chaos"
NODES = (1, 2, 3)
MS = 1_000_000
S = 1_000_000_000


def nodes_header() -> dict[str, dict[str, Any]]:
    """The header's ``nodes``: three combined broker-controllers ``n1``..``n3``."""
    return {str(n): {"name": f"n{n}", "roles": ["broker", "controller"]} for n in NODES}


class Simulation:
    """Events (callables at simulated ns, run in time order; ties in scheduling order), the
    history they write (``history.jsonl`` and its columnar copy, as the recorder writes them)
    and the simulated cluster.

    Args:
        path: the ``history.jsonl`` to create (``FileExistsError`` if it exists).
        header: the history header (``HistoryWriter`` adds ``format``).
        keys: the keys of the workload; key ``k`` is partition ``k`` of ``TOPIC``, whose
            log is ``logs[k]`` (values; ``None`` for a transaction marker's offset).
        rng: every random choice of the simulation.

    ``leader``, ``epoch`` and ``isr`` hold each partition's leader (-1: none), leader epoch
    and ISR; ``answering`` whether each node answers. Time never runs backwards: an event
    due before ``now`` (a step that advanced ``now`` itself) runs at ``now``.
    """

    def __init__(self, path: Path, header: dict[str, Any], keys: int,
                 rng: random.Random) -> None:
        self.rng = rng
        self.keys = keys
        self.now = 0
        self.lines = 0
        self.value = 0
        self.next_process = 0
        self.heap: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.logs: list[list[int | None]] = [[] for _ in range(keys)]
        self.leader = {p: NODES[p % len(NODES)] for p in range(keys)}
        self.epoch = dict.fromkeys(range(keys), 1)
        self.isr = {p: list(NODES) for p in range(keys)}
        self.answering = dict.fromkeys(NODES, True)
        self.out = HistoryWriter(path, header=header, columnar="inline",
                                 clock=lambda: self.now, flush_each=False)

    def at(self, t: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` at ``t`` ns."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn))

    def run(self) -> None:
        """Run every event, and those they schedule, in time order."""
        while self.heap:
            t, _, fn = heapq.heappop(self.heap)
            self.now = max(self.now, t)
            fn()

    def write(self, process: Any, type: str, f: str, value: Any,
              error: str | None = None) -> None:
        """Append one op at ``now``."""
        self.out.append(process, type, f, value, error)
        self.lines += 1

    def new_value(self) -> int:
        """A value never sent before (1, 2, ...)."""
        self.value += 1
        return self.value

    def new_process(self) -> int:
        """A process id never used before (0, 1, ...)."""
        self.next_process += 1
        return self.next_process - 1

    def sample(self, trigger: str, partitions: int | None = None, took_ns: int = 0) -> None:
        """A monitor sample (``cluster-state``) of the first ``partitions`` partitions (all
        keys by default), its ``ok`` ``took_ns`` after its invoke."""
        self.write("monitor", "invoke", "cluster-state", {"trigger": trigger})
        parts = [{"partition": p, "leader": self.leader[p], "leader_epoch": self.epoch[p],
                  "replicas": list(NODES), "isr": sorted(self.isr[p]), "elr": [],
                  "last_known_elr": [],
                  "offline": [n for n in NODES if not self.answering[n]]}
                 for p in range(self.keys if partitions is None else partitions)]
        self.now += took_ns
        self.write("monitor", "ok", "cluster-state", {
            "answering": {str(n): up for n, up in self.answering.items()},
            "partitions": {TOPIC: parts},
            "controller": {"leader": 1, "epoch": 1, "high_watermark": self.lines,
                           "voters": {str(n): self.lines for n in NODES}},
            "took_ms": 2})

    def final_reads(self, logs: dict[int, tuple[list[tuple[int, Any]], int]], chunk: int,
                    step_ns: int) -> None:
        """Read every key of ``logs`` (key -> its records ``(offset, value)`` and its end
        offset) to its end, as the runner's final reads do: one new process, one poll per
        ``chunk`` offsets, each ``step_ns`` long."""
        reader = self.new_process()
        for k in sorted(logs):
            recs, end = logs[k]
            for lo in range(0, max(end, 1), chunk):
                hi = min(lo + chunk, end)
                got = [[o, v] for o, v in recs if lo <= o < hi]
                self.write(reader, "invoke", "poll", [["poll"]])
                self.now += step_ns
                self.write(reader, "ok", "poll", [[
                    "poll", {str(k): got} if got else {},
                    {"final": True, "range": {str(k): [lo, hi]}, "eof": hi == end}]])

    def close(self) -> None:
        """Close the history (and its columnar copy)."""
        self.out.close()
