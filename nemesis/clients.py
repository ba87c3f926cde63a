"""Faults of the workload's own clients: ``crash-clients`` crashes every process of the
workload at once (Jepsen's ``crash-client-gen`` does one at a time), as an application
restarted on every host: each replacement subscribes afresh and a consumer group's members
resume from its committed offsets, not from the positions the crashed ones held in memory.
That is how a committed offset, and the leader epoch stored with it or not (KIP-320), comes
to decide where a group resumes (``--scenario truncated-commit``, KAFKA-20507)."""

from __future__ import annotations

from typing import Any, Callable

from kafka_chaos.nemesis.base import Nemesis, NemesisError


class ClientNemesis(Nemesis):
    """``crash-clients`` through ``crash_all`` (``QueueWorkload.crash_all``: the slots whose
    process crashed). Completes with ``{"crashed": [slot, ...]}``; raises ``NemesisError``
    when no process crashed within ``timeout_s``. Nothing to heal: replacements start by
    themselves."""

    fs = frozenset({"crash-clients"})
    name = "clients"

    def __init__(self, cluster, rng, crash_all: Callable[[float], list[int]],
                 timeout_s: float = 30.0) -> None:
        super().__init__(cluster, rng)
        self.crash_all, self.timeout_s = crash_all, timeout_s

    def invoke(self, f: str, value: Any) -> Any:
        crashed = self.crash_all(self.timeout_s)
        if not crashed:
            raise NemesisError(f"crash-clients: no client crashed within {self.timeout_s:g} s")
        return {"crashed": crashed}
