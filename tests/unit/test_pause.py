"""What ``pause`` means on every backend (``clusters.base.Pausable``): it returns once the
process is frozen, or raises; and a node whose pause raised is still thawed by the heal. The
backends' own pauses on real brokers: tests/integration/test_conformance.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kafka_chaos.clusters import base
from kafka_chaos.clusters.base import Node, Pausable
from kafka_chaos.errors import ClusterError


def _state(pid: int) -> str:
    """The one-letter state of ``/proc/PID/status`` (``S`` sleeping, ``T`` stopped, ``Z``)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines()
                if x.startswith("State:"))
    return line.split()[1]


def _freeze(pid: int) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", base.freeze_script(str(pid))], timeout=30)


def test_the_ssh_backends_pause_returns_once_the_process_is_stopped():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert _state(proc.pid) != "T"
        assert _freeze(proc.pid).returncode == 0 and _state(proc.pid) == "T"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_the_ssh_backends_pause_fails_on_a_process_that_never_stops(monkeypatch):
    """A zombie takes the SIGSTOP (``kill`` succeeds) and never stops: the script used to
    exit 0 after its wait, and the pause op ended ``ok``."""
    monkeypatch.setattr(base, "FREEZE_WAIT_S", 0.3)
    proc = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while _state(proc.pid) != "Z":  # exited, not yet reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert _freeze(proc.pid).returncode == 1 and _state(proc.pid) == "Z"
    proc.wait()
    assert _freeze(proc.pid).returncode == 1  # gone: kill itself fails


class _Stuck(Pausable):
    """Three nodes; the pause of node 2 raises after its SIGSTOP was sent."""

    def __init__(self) -> None:
        self.nodes = [Node(i, f"n{i}", f"10.0.0.{i}", ("broker",)) for i in (1, 2, 3)]
        self.resumed: list[int] = []

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def is_running(self, node: Node) -> bool:
        return True

    def pause(self, node: Node) -> None:
        if node.node_id == 2:
            raise ClusterError("pausing n2: SIGSTOP sent, but n2 frozen did not hold")

    def resume(self, node: Node) -> None:
        self.resumed.append(node.node_id)

    def is_paused(self, node: Node) -> bool:
        return False


def test_a_pause_that_raised_is_thawed_by_the_heal():
    from kafka_chaos.nemesis.faults import ProcessNemesis

    cluster = _Stuck()
    nemesis = ProcessNemesis(cluster, random.Random(1))
    with pytest.raises(ClusterError, match="n2"):
        nemesis.invoke("pause", {"target": "all"})
    assert nemesis.invoke("resume", None)["resumed"] == ["n1", "n2"]
    assert cluster.resumed == [1, 2]
