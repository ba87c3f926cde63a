"""The disk nemesis's bookkeeping (``nemesis.disk``) on a stand-in for the cluster's disks:
what a heal frees, starts and reports when one disk does not answer. The disks themselves
are real in ``tests/integration/test_lossy.py``."""

from __future__ import annotations

import random

import pytest

from kafka_chaos.clusters.base import DiskFaults, Node
from kafka_chaos.nemesis.base import NemesisError
from kafka_chaos.nemesis.disk import DiskNemesis


class _Disks(DiskFaults):
    lossy_fs = True

    def __init__(self, dead: set[str]) -> None:
        self.nodes = [Node(i, f"n{i}", "10.0.0.1", ("broker", "controller")) for i in (1, 2, 3)]
        self.dead = dead  # disks that do not answer
        self.disks: dict[str, str] = {}
        self.running = {n.name for n in self.nodes}

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def is_running(self, node: Node) -> bool:
        return node.name in self.running

    def start(self, node: Node) -> None:
        self.running.add(node.name)

    def set_disk(self, node: Node, command: str) -> dict:
        if node.name in self.dead:
            raise OSError("the mount did not answer")
        self.disks[node.name] = command
        return {"full": command == "full", "slow_ms": 0}


def test_a_heal_frees_every_disk_it_can_and_names_the_one_it_cannot() -> None:
    disks = _Disks(dead=set())
    nemesis = DiskNemesis(disks, random.Random(1))
    nemesis.invoke("disk-full", {"target": [1, 2]})
    assert disks.disks == {"n1": "full", "n2": "full"}
    disks.running.discard("n2")  # Kafka halted it on the full disk
    disks.dead.add("n1")
    with pytest.raises(NemesisError, match="n1's disk did not take 'free'"):
        nemesis.teardown()
    assert disks.disks["n2"] == "fast" and "n2" in disks.running  # freed, started
    assert nemesis.faulted == {1}  # n1 is left for the next heal
    disks.dead.clear()
    assert nemesis.teardown() == {"healed": ["n1"], "state": {
        "n1": {"full": False, "slow_ms": 0}}, "started": []}
    assert nemesis.faulted == set() and nemesis.teardown() is None
