"""The local backend for real: KRaft brokers in namespaces, process control, iptables cuts."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from clusters import admin, dist
from clusters.errors import DistributionError
from clusters.local import LocalCluster, recorded_state
from tests.integration.conftest import leftovers

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, n: int) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000})
    offsets: list[int] = []
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=0,
                  on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
    p.flush(20)
    return offsets


def _proc_state(pid: int) -> str:
    time.sleep(0.2)
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_kafka_39_with_dedicated_controller_kill_and_partition(tmp_path):
    """3.9.x works; a dedicated controller quorum; kill/start and an iptables cut really bite."""
    kafka = dist.resolve("3.9.1")
    cluster = LocalCluster(kafka, tmp_path / "nodes", brokers=3, controllers=1)
    try:
        cluster.setup()
        assert [n.roles for n in cluster.nodes] == [("broker",)] * 3 + [("controller",)]
        admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
        a = admin.client(cluster.bootstrap_servers)
        admin.create_topic(a, "t", 1, 3)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)
        assert _produce(cluster.bootstrap_servers, "t", 5) == [0, 1, 2, 3, 4]
        # the ElectLeaders (UNCLEAN) call works end to end; a led partition needs no election
        assert admin.elect_unclean(a, "t", [0]) == {0: "ELECTION_NOT_NEEDED"}
        assert recorded_state()["alive"] == {"1": True, "2": True, "3": True, "4": True}

        leader = cluster.node(admin.partitions(a, "t")[0].leader)
        cluster.kill(leader)
        assert not cluster.is_running(leader)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = admin.partitions(a, "t")[0]
            if state.leader not in (-1, leader.node_id):
                break
            time.sleep(0.5)
        assert state.leader not in (-1, leader.node_id), "no new leader after SIGKILL"
        cluster.start(leader)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)

        # pause freezes the JVM (state T), resume thaws it
        n3 = cluster.node(3)
        pid = cluster._procs[3].pid
        cluster.pause(n3)
        assert _proc_state(pid) == "T"
        cluster.resume(n3)
        assert _proc_state(pid) in ("S", "R")

        # isolate node 1 from every peer: from its namespace, peers become unreachable
        n1, n2 = cluster.node(1), cluster.node(2)
        assert cluster.exec(n1, ["bash", "-c", f"echo > /dev/tcp/{n2.host}/9092"]).exit == 0
        cluster.drop(n1, [p for p in cluster.nodes if p != n1])
        assert cluster.exec(n1, ["timeout", "3", "bash", "-c",
                                 f"echo > /dev/tcp/{n2.host}/9092"]).exit != 0
        cluster.heal_network()
        assert cluster.exec(n1, ["bash", "-c", f"echo > /dev/tcp/{n2.host}/9092"]).exit == 0
    finally:
        cluster.teardown()
    assert leftovers() == []


def test_unknown_kafka_version_is_a_clear_error():
    with pytest.raises(DistributionError, match="could not be resolved"):
        dist.resolve("3.0.99")
    with pytest.raises(DistributionError, match="MAJOR.MINOR.PATCH"):
        dist.resolve("latest")
