"""Disk faults under a running broker, through ``DiskFaults`` (``clusters.lossyfs``): its data
disk full (a write that grows a file fails with ENOSPC), or slow (each write and fsync waits).

What Kafka does with a full disk (``docs/file-faults.md``, K3, K7): an append that fails with
an ``IOException`` marks its log directory offline, and a broker with none left halts
("Shutdown broker because all log dirs in ... have failed"). It stays down once the disk is
free: the heal frees the disk, then starts it (and at the final heal this one runs before
the process heal: ``schedule.PERFORMED_BY`` orders them so).
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.clusters.base import DiskFaults
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import pick

#: Delay of each write and fsync of a slow disk, milliseconds (a disk near its limit).
SLOW_MS = 200
#: The fault's start and end ``f`` values.
FULL, SLOW, HEAL = "disk-full", "disk-slow", "disk-heal"


class DiskNemesis(Nemesis):
    """fs:
      - ``disk-full``: each target node's data disk full; ok ``{"full": [names], "state":
        {name: {"full", "slow_ms"}}}``;
      - ``disk-slow``: each target's data disk slow (``value["slow_ms"]``, default
        ``SLOW_MS``); ok ``{"slow": [names], "state": ...}``;
      - ``disk-heal``: every disk faulted so far free and fast again, and each of those
        brokers that is not running (the full disk stopped it) started; ok ``{"healed":
        [names], "state": ..., "started": [names]}``.
    ``value``: ``{"target": see nemesis.targets.pick, "topic", "partition"}``. Raises
    ``NemesisError`` when the cluster has no disk faults (the local backend, set up with
    its lossy filesystem) or a target's filesystem does not answer.
    """

    fs = frozenset({FULL, SLOW, HEAL})
    name = "disk"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        self.faulted: set[int] = set()

    def invoke(self, f: str, value: Any) -> Any:
        if not (isinstance(self.cluster, DiskFaults) and getattr(self.cluster, "lossy_fs",
                                                                 False)):
            raise NemesisError("this cluster cannot fault its disks (the local backend, set "
                               "up with its lossy filesystem for the disk fault)")
        if f == HEAL:
            return self._heal()
        value = value or {}
        nodes = pick(self.cluster, self.rng, [n for n in self.cluster.nodes
                                              if self.cluster.is_running(n)], value)
        command = "full" if f == FULL else f"slow {int(value.get('slow_ms', SLOW_MS))}"
        state = {}
        for n in nodes:
            self.faulted.add(n.node_id)
            state[n.name] = self._set(n, command)
        return {("full" if f == FULL else "slow"): [n.name for n in nodes], "state": state}

    def _heal(self) -> dict:
        """Free and speed up every faulted disk, then start each of those brokers that is not
        running. A disk that does not answer does not keep the others faulted: it stays in
        ``faulted`` (a later heal tries it again) and is named in the ``NemesisError`` raised
        once the rest is healed."""
        state, started, failed = {}, [], []
        for n in [self.cluster.node(i) for i in sorted(self.faulted)]:
            try:
                self._set(n, "free")
                state[n.name] = self._set(n, "fast")
            except NemesisError as exc:
                failed.append(str(exc))
                continue
            self.faulted.discard(n.node_id)
            if not self.cluster.is_running(n):  # the full disk stopped it: back on a free one
                self.cluster.start(n)
                started.append(n.name)
        if failed:
            raise NemesisError("; ".join(failed))
        return {"healed": sorted(state), "state": state, "started": started}

    def _set(self, node, command: str) -> dict:
        try:
            return self.cluster.set_disk(node, command)
        except Exception as exc:  # ClusterError: the mount did not answer
            raise NemesisError(f"{node.name}'s disk did not take {command!r}: {exc}") from exc

    def teardown(self) -> Any:
        if not self.faulted:
            return None
        return self.invoke(HEAL, None)
