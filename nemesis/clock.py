"""Clock faults (Jepsen's ``nemesis/time``: bump, strobe, reset), through ``Skewable``.

Only the broker JVM's wall clock moves (``clusters.faketime`` says what that reaches: record
timestamps under ``LogAppendTime``, time-based retention and rolling, logged times); its
monotonic clock, which Kafka's timeouts and ISR lag run on, and the clients' clocks do not.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_chaos.clusters.base import Skewable
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import pick

#: Largest bump, seconds: Jepsen's 2^18 ms.
MAX_BUMP_S = 262.144
#: Strobe period bounds, seconds.
STROBE_PERIOD_S = (1.0, 3.0)
#: Longest strobe, seconds (the nemesis op lasts that long).
MAX_STROBE_S = 10.0


class ClockNemesis(Nemesis):
    """Move nodes' wall clocks.

    fs:
      - ``clock-bump``: each target node's clock jumps by a random offset of up to
        ``MAX_BUMP_S`` seconds either way; ok ``{"offsets_s": {name: s}}``;
      - ``clock-strobe``: each target's clock flips between true time and a random offset of up
        to ``MAX_BUMP_S`` every ``period_s`` for ``duration_s`` (up to ``MAX_STROBE_S``), then
        stays true; ok ``{"strobed": {name: s}, "period_s": p, "duration_s": d, "flips": n}``;
      - ``clock-reset``: every node skewed so far back to true time; ok ``{"reset": [names]}``.
    ``value``: ``{"target": see nemesis.targets.pick, "topic": str, "partition": int}``;
    a bump may give ``"offset_s"`` to set instead of drawing. Raises ``NemesisError`` when the
    cluster cannot skew clocks.
    """

    fs = frozenset({"clock-bump", "clock-strobe", "clock-reset"})
    name = "clock"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        self.skewed: set[int] = set()

    def _offset(self) -> float:
        return round(self.rng.uniform(0.1, MAX_BUMP_S) * self.rng.choice((-1, 1)), 3)

    def invoke(self, f: str, value: Any) -> Any:
        if not (isinstance(self.cluster, Skewable) and getattr(self.cluster, "clock", False)):
            raise NemesisError("this cluster cannot skew clocks (the local or ssh backend, set up "
                               "for the clock fault)")
        if f == "clock-reset":
            nodes = [self.cluster.node(i) for i in sorted(self.skewed)]
            for n in nodes:
                self.cluster.set_clock(n, 0.0)
            self.skewed.clear()
            return {"reset": [n.name for n in nodes]}
        value = value or {}
        nodes = pick(self.cluster, self.rng, [n for n in self.cluster.nodes
                                              if self.cluster.is_running(n)], value)
        offsets = {n: value["offset_s"] if "offset_s" in value else self._offset()
                   for n in nodes}
        if f == "clock-bump":
            for n, offset in offsets.items():
                self.cluster.set_clock(n, offset)
                self.skewed.add(n.node_id)
            return {"offsets_s": {n.name: s for n, s in offsets.items()}}
        period = round(self.rng.uniform(*STROBE_PERIOD_S), 3)
        duration = round(self.rng.uniform(2 * period, MAX_STROBE_S), 3)
        self.skewed.update(n.node_id for n in nodes)
        flips, deadline, skewed = 0, time.monotonic() + duration, False
        while time.monotonic() < deadline:
            skewed = not skewed
            for n, offset in offsets.items():
                self.cluster.set_clock(n, offset if skewed else 0.0)
            flips += 1
            time.sleep(min(period, max(0.0, deadline - time.monotonic())))
        for n in nodes:
            self.cluster.set_clock(n, 0.0)
        return {"strobed": {n.name: s for n, s in offsets.items()}, "period_s": period,
                "duration_s": duration, "flips": flips}

    def teardown(self) -> Any:
        if not self.skewed:
            return None
        return self.invoke("clock-reset", None)
