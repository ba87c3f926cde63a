"""The op generator of the queue workload (Jepsen ``jepsen.tests.kafka``: ``txn-generator``,
``interleave-subscribes``, ``crash-client-gen``), seeded: one per worker thread."""

from __future__ import annotations

import itertools
import random
from typing import Any

from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings


class Generator:
    """Chooses the next op of a worker's current process.

    Args:
        settings, keys: what to generate and over which keys.
        rng: this worker's seeded random source.
        values: the run's shared counter; every sent value is unique in the run, which is what
            lets the checkers tell one write from another (Jepsen's ``queue`` workload).
    """

    def __init__(self, settings: WorkloadSettings, keys: KeySpace, rng: random.Random,
                 values: itertools.count) -> None:
        self.s = settings
        self.keys = keys
        self.rng = rng
        self.values = values
        self._crash_next = False

    def next(self, uncommitted: dict[str, int], fresh: bool, crash: bool) -> tuple[str, Any]:
        """``(f, invoke value)`` of the next op.

        ``fresh``: the process just started, so it first assigns or subscribes; ``crash``: a
        crash was scheduled for this worker; ``uncommitted``: offsets the process polled and
        has not committed (a manual ``commit`` follows a poll in ``subscribe`` mode).
        """
        s, rng = self.s, self.rng
        if s.sub_via == "share":
            return self._share(crash)
        if crash:
            return "crash", None
        if fresh or rng.random() < s.sub_p:
            return self._sub()
        if uncommitted and s.sub_via == "subscribe" and not (s.auto_commit or s.txn):
            return "commit", {"offsets": dict(uncommitted)}
        n = rng.randint(s.mops_min, s.mops_max)
        if s.txn:
            return "txn", [["poll"] if rng.random() < s.poll_p else self._send()
                           for _ in range(n)]
        if rng.random() < s.poll_p:
            return "poll", [["poll"]]
        return "send", [self._send() for _ in range(n)]

    def _share(self, crash: bool) -> tuple[str, Any]:
        """A share process's next op: a crash first acquires records and acknowledges none
        (``hold``), so that the crash leaves them locked (KIP-932's lock expiry)."""
        if crash:
            self._crash_next = True
            return "share", {"group": self.s.share_group, "hold": True}
        if self._crash_next:
            self._crash_next = False
            return "crash", None
        if self.rng.random() < self.s.poll_p:
            return "share", {"group": self.s.share_group}
        n = self.rng.randint(self.s.mops_min, self.s.mops_max)
        return "send", [self._send() for _ in range(n)]

    def _send(self) -> list:
        return ["send", int(self.rng.random() * self.keys.keys), next(self.values)]

    def _sub(self) -> tuple[str, dict]:
        keys = sorted(self.rng.sample(range(self.keys.keys), self.rng.randint(1, self.keys.keys)))
        if self.s.sub_via == "subscribe":
            return "subscribe", {"keys": keys, "group": self.s.group}
        return "assign", {"keys": keys,
                          "seek": self.rng.choice(["beginning", "committed"])}
