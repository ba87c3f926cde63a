"""Nemesis packages and the seeded scheduler that runs them (Jepsen ``nemesis/combined``).

A package names the ``f`` that starts a fault, the ``f`` that ends it, the targets to draw from
and a colour for plots. The scheduler alternates: wait ``interval_s``, start a random fault from
the chosen packages, wait ``interval_s``, end it. Every nemesis op is recorded in the history as
process ``"nemesis"``; ``finish()`` always ends with every fault healed.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any, Callable

from history import NEMESIS, HistoryWriter, OpType
from nemesis.base import Composed, Nemesis
from nemesis.faults import PartitionNemesis, ProcessNemesis

#: name -> start f, stop f, targets drawn from, plot colour.
PACKAGES: dict[str, dict[str, Any]] = {
    "kill": {"start": "kill", "stop": "start", "targets": ["one", "leader"], "color": "#E9A4A0"},
    "pause": {"start": "pause", "stop": "resume", "targets": ["one", "leader"], "color": "#C5A0E9"},
    "partition": {"start": "partition", "stop": "heal",
                  "targets": ["isolate-one", "halves", "leader-replication"], "color": "#A0C8E9"},
}


def parse_packages(spec: str) -> list[str]:
    """``"kill,partition"`` -> ``["kill", "partition"]``; ``"none"`` or ``""`` -> ``[]``.

    Raises ``ValueError`` naming the unknown package.
    """
    names = [s.strip() for s in spec.split(",") if s.strip() and s.strip() != "none"]
    for name in names:
        if name not in PACKAGES:
            raise ValueError(f"--nemesis: unknown fault {name!r}; choose from "
                             f"{', '.join(PACKAGES)} or none")
    return names


def build_nemesis(cluster, packages: list[str], rng: random.Random,
                  extra: tuple[Nemesis, ...] = ()) -> Composed:
    """One composed nemesis able to run ``packages`` (plus ``extra`` nemeses) on ``cluster``."""
    parts: list[Nemesis] = list(extra)
    if {"kill", "pause"} & set(packages):
        parts.append(ProcessNemesis(cluster, rng))
    if "partition" in packages:
        parts.append(PartitionNemesis(cluster, rng))
    return Composed(parts)


class Scheduler:
    """Runs faults on a background thread until ``finish()``.

    Args:
        nemesis: the composed nemesis.
        history: where nemesis ops are recorded.
        packages: names from ``PACKAGES``.
        interval_s: seconds between fault start and stop, and between faults.
        rng: seeded source of every choice (fault, target).
        topic: topic whose partition-0 leader the ``leader`` targets aim at.
        log: called with a one-line description of each completed nemesis op (for the user).
    """

    def __init__(self, nemesis: Composed, history: HistoryWriter, packages: list[str],
                 interval_s: float, rng: random.Random, topic: str,
                 log: Callable[[str], None] = lambda message: None) -> None:
        self.log = log
        self.nemesis = nemesis
        self.history = history
        self.packages = packages
        self.interval_s = interval_s
        self.rng = rng
        self.topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="nemesis")
        self._lock = threading.Lock()  # one nemesis op at a time, finish() included

    def start(self) -> None:
        """Start the fault thread (nothing to start when no package was chosen)."""
        if self.packages:
            self._thread.start()

    def run_op(self, f: str, value: Any) -> Any:
        """Invoke ``f`` now and record it; an exception completes the op as ``info``."""
        with self._lock:
            self.history.append(NEMESIS, OpType.INVOKE, f, value)
            try:
                done = self.nemesis.invoke(f, value)
            except Exception as exc:  # NemesisError or a backend error: the op is indeterminate
                self.history.append(NEMESIS, OpType.INFO, f, value, f"{type(exc).__name__}: {exc}")
                self.log(f"nemesis {f} failed: {exc}")
                return None
            self.history.append(NEMESIS, OpType.OK, f, done)
            self.log(f"nemesis {f}: {json.dumps(done)}")
            return done

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            pkg = PACKAGES[self.rng.choice(self.packages)]
            target = self.rng.choice(pkg["targets"])
            self.run_op(pkg["start"], {"target": target, "topic": self.topic, "partition": 0})
            if self._stop.wait(self.interval_s):
                break
            self.run_op(pkg["stop"], None)

    def finish(self) -> Any:
        """Stop scheduling and heal everything (Jepsen's final generator). Never raises."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(120)
        with self._lock:
            try:
                self.history.append(NEMESIS, OpType.INVOKE, "heal-all", None)
            except ValueError:
                pass  # history already closed (error path): healing matters more
            healed = self.nemesis.teardown()
            try:
                self.history.append(NEMESIS, OpType.OK, "heal-all", healed)
            except ValueError:
                pass
        return healed
