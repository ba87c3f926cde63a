"""The nemesis protocol (after Jepsen's ``jepsen.nemesis``) and ``compose``.

Required methods: ``fs`` (the ``f``s handled), ``invoke(f, value)`` returning the completion
value. Optional: ``teardown`` (heal everything this nemesis did; must be idempotent and must not
raise for a fault that is already healed). ``end()`` tells an op that waits for a condition of
the cluster before it acts (a lone leader) that the run is over: it stops waiting, does
nothing more, and says so in its completion.
"""

from __future__ import annotations

import abc
import random
import threading
from typing import Any, Callable

from kafka_chaos.clusters.base import Cluster
from kafka_chaos.errors import NemesisError


class Nemesis(abc.ABC):
    """A fault injector bound to one cluster."""

    fs: frozenset[str] = frozenset()
    #: The history's clock (ns since the run's start; ``HistoryWriter.now_ns``), set by the
    #: scheduler: an op that can say when, within its own span, it acted records it so.
    clock: Callable[[], int] | None = None
    #: What ``Composed.teardown`` reports this nemesis's heal under: the fault it injects, in
    #: the words of ``--nemesis`` (``process``, ``partition``, ...); its class name if empty.
    name: str = ""

    def __init__(self, cluster: Cluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        #: Set by ``end()``: ops that wait for a condition stop waiting.
        self.ending = threading.Event()

    def end(self) -> None:
        """The run is over (Jepsen's final generator begins): an op in flight that waits for a
        condition returns at its next poll instead of running out its wait; ``teardown`` then
        heals as ever. The scheduler calls it before it waits for that op."""
        self.ending.set()

    @abc.abstractmethod
    def invoke(self, f: str, value: Any) -> Any:
        """Do ``f`` to the cluster; return a JSON-able description of what was done."""

    def teardown(self) -> Any:
        """Heal every fault this nemesis left; returns what was healed (JSON-able)."""
        return None


class Composed(Nemesis):
    """Routes each ``f`` to the one nemesis that handles it (Jepsen ``nemesis/compose``).

    Raises ``NemesisError`` at construction when two nemeses claim the same ``f``.
    """

    def __init__(self, nemeses: list[Nemesis]) -> None:
        self.nemeses = nemeses
        self._by_f: dict[str, Nemesis] = {}
        for n in nemeses:
            for f in n.fs:
                if f in self._by_f:
                    raise NemesisError(f"two nemeses handle f={f!r}")
                self._by_f[f] = n
        self.fs = frozenset(self._by_f)

    def invoke(self, f: str, value: Any) -> Any:
        if f not in self._by_f:
            raise NemesisError(f"no nemesis handles f={f!r}")
        return self._by_f[f].invoke(f, value)

    def end(self) -> None:
        for n in self.nemeses:
            n.end()

    def teardown(self) -> Any:
        healed = {}
        for n in self.nemeses:
            key = n.name or type(n).__name__
            try:
                healed[key] = n.teardown()
            except Exception as exc:  # one failed heal must not stop the others
                healed[key] = f"error: {exc}"
        return healed
