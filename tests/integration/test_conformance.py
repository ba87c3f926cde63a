"""The backend conformance suite: one set of checks, run against every cluster backend.

Modelled on Hypothesis' database-agreement tests (one suite, every implementation): each
ability is observed from outside through Kafka or TCP, never assumed from a return value.
Kafka 3.9 with a dedicated controller, so one bring-up also covers the older version and
controller-only nodes.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kafka_chaos import attach
from kafka_chaos.clusters import admin, backends, dist
from kafka_chaos.clusters.errors import (ClusterError, DistributionError, EnvironmentUnsupported,
                                         Refused)
from kafka_chaos.clusters.external import ExternalCluster
from kafka_chaos.config import RunConfig
from kafka_chaos.nemesis.files import FileNemesis
from kafka_chaos.workloads.keys import KeySpace
from tests.integration.conftest import backend_param, leftovers, prepare

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, n: int) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000})
    offsets: list[int] = []
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=0,
                  on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
    p.flush(20)
    return offsets


def _attached_kip_848_refused(cluster, tmp_path) -> None:
    """Attached to this Kafka 3.9 cluster, ``--group-protocol consumer`` and ``--sub-via
    share`` are refused before any topic is created: its brokers report ``group.version``
    and ``share.version`` 0 (KIP-848 and KIP-932 off)."""
    attached = ExternalCluster(cluster.bootstrap_servers, None, tmp_path / "attached")
    attached.setup()
    created: list[str] = []
    for flags, feature in (({"sub_via": "subscribe", "group_protocol": "consumer"},
                            "group.version"), ({"sub_via": "share"}, "share.version")):
        cfg = RunConfig(backend="external", bootstrap_servers=cluster.bootstrap_servers,
                        **flags)
        with pytest.raises(Refused, match=rf"broker n\d at \S+ reports {feature} 0: "):
            attach.create_topics(cfg, attached, KeySpace("kip848", 2), created, print)
    assert created == [] and "kip848" not in admin.client(
        cluster.bootstrap_servers).list_topics(timeout=10).topics


def _answers(endpoint: str, timeout_s: float = 3.0) -> bool:
    """True if the broker at ``endpoint`` (only it) answers a Metadata request in time."""
    try:
        admin.client(endpoint, timeout_s).list_topics(timeout=timeout_s)
        return True
    except KafkaException:
        return False


def _until(check, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def _reaches(cluster, src, dst) -> bool:
    """TCP from ``src``'s host to ``dst``'s broker listener, run on ``src`` itself."""
    probe = f"echo > /dev/tcp/{dst.host}/{dst.broker_port}"
    return cluster.exec(src, ["timeout", "3", "bash", "-c", probe]).exit == 0


def _udp_arrives(cluster, src, dst) -> bool:
    """Datagrams from ``src`` to a closed port of ``dst`` reach ``dst``'s UDP layer: its
    ``NoPorts`` counter (``/proc/net/snmp``, per network namespace) grows. TCP cannot show a
    one-way cut: a handshake needs both directions."""
    def no_ports() -> int:
        rows = [line.split() for line in cluster.exec(dst, ["cat", "/proc/net/snmp"]).out
                .splitlines() if line.startswith("Udp:")]
        return int(rows[1][rows[0].index("NoPorts")])

    before = no_ports()
    for _ in range(3):
        cluster.exec(src, ["bash", "-c", f"echo x > /dev/udp/{dst.host}/9"])
    return _until(lambda: no_ports() > before, 2)


def _stamp_skew(bootstrap: str) -> float:
    stamps = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
    producer.produce("ts", b"x", on_delivery=lambda err, msg: err is None and stamps.append(
        msg.timestamp()[1] / 1000 - time.time()))
    producer.flush(10)
    return stamps[0] if stamps else float("nan")


def _a_dropped_members_group_is_deleted_once_its_session_ends(cluster) -> None:
    """``admin.delete_groups`` (what a run on an attached cluster does at its end): a classic
    group whose only member was destroyed without leaving is ``NON_EMPTY_GROUP`` until the
    member's 6 s session ends, then deleted; a group of another prefix stays."""
    def member(group: str) -> None:
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                      "session.timeout.ms": 6000, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.subscribe(["t"])

        def assigned() -> bool:
            c.poll(0.5)  # the join and the assignment are served here
            return bool(c.assignment())

        assert _until(assigned)
        c.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
        # dropped without close: no LeaveGroup, its member stays until the session ends

    member("kc-del-g")
    member("other-g")
    started = time.monotonic()
    assert admin.delete_groups(cluster.bootstrap_servers, "kc-del-", timeout_s=30) == (
        ["kc-del-g"], {})
    assert time.monotonic() - started >= 2, "deleted at once: was the member ever there?"
    a = admin.client(cluster.bootstrap_servers)
    left = {g.group_id for g in a.list_consumer_groups().result(15).valid}
    assert "kc-del-g" not in left and "other-g" in left, left


@pytest.mark.parametrize("name", [backend_param(n) for n in backends.OWN])
def test_backend_conformance(request, tmp_path, name):
    """Kafka 3.9.1 with a dedicated controller: start/stop/kill/pause/resume take effect, a
    follower's segment cut by the file nemesis is refilled after its restart, a cut stops TCP
    and heal restores it (and the rules are read back), a one-way cut drops one direction only,
    a skewed clock shows in the leader's record stamps (local, ssh), logs are collected,
    teardown leaves nothing the backend can find."""
    backend = backends.get(name)
    kafka = dist.resolve("3.9.1")
    # ssh: through `sudo -n` for iptables and exec, as for a non-root SSH user, with a Kafka
    # installed on the hosts (kafka_home) rather than uploaded (the runs upload it)
    options, _ = prepare(request, name, kafka, [["broker"]] * 3 + [["controller"]],
                         tmp_path / "inventory.yaml", sudo=True,
                         kafka_home=str(kafka.libs.parent))
    # the backends that can preload libfaketime run every JVM under it
    options = dataclasses.replace(options, clock=name in ("local", "ssh"))
    backend.check_environment(options, 3, 1)
    if name == "local" and subprocess.run(["pgrep", "-x", "dockerd"],
                                          capture_output=True).returncode == 0:
        # the local backend must work under the rules dockerd imposes on the host (CI runs one)
        forward = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
        assert "-P FORWARD DROP" in forward.stdout
    cluster = backend.create(kafka, tmp_path / "nodes", 3, 1, {}, options)
    try:
        cluster.setup()
        assert [n.roles for n in cluster.nodes] == [("broker",)] * 3 + [("controller",)]
        assert cluster.bootstrap_servers == ",".join(n.client_endpoint for n in cluster.brokers)
        admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
        a = admin.client(cluster.bootstrap_servers)
        admin.create_topic(cluster.bootstrap_servers, "t", 1, 3)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)
        assert _produce(cluster.bootstrap_servers, "t", 5) == [0, 1, 2, 3, 4]
        if name == "local":
            _attached_kip_848_refused(cluster, tmp_path)
            # a topic a broker does not know yet is asked again until the timeout, then named
            started = time.monotonic()
            with pytest.raises(ClusterError, match="no-such-topic failed: .*[Uu]nknown topic"):
                admin.topic_config(a, "no-such-topic", "cleanup.policy", timeout_s=2.0)
            assert time.monotonic() - started >= 1.5
            _a_dropped_members_group_is_deleted_once_its_session_ends(cluster)
        # the ElectLeaders (UNCLEAN) call works end to end; a led partition needs no election
        assert admin.elect_unclean(a, "t", [0]) == {0: "ELECTION_NOT_NEEDED"}
        state = backend.status(options)
        assert state is not None and state["alive"] == {"1": True, "2": True, "3": True,
                                                         "4": True}

        # kill: the process is gone and the controller elects another leader
        leader = cluster.node(admin.partitions(a, "t")[0].leader)
        cluster.kill(leader)
        assert not cluster.is_running(leader) and not _answers(leader.client_endpoint)
        assert _until(lambda: admin.partitions(a, "t")[0].leader not in (-1, leader.node_id)), \
            "no new leader after SIGKILL"
        cluster.start(leader)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)
        assert _answers(leader.client_endpoint)

        # a file fault reaches the node's own files (on this host, or over SFTP): a follower's
        # active segment is cut while it is down; its recovery and the leader fill it again
        lead = admin.partitions(a, "t")[0].leader
        follower = next(n for n in cluster.brokers if n.node_id != lead)
        done = FileNemesis(cluster, random.Random(2)).invoke(
            "truncate", {"target": [follower.node_id], "topic": "t", "partition": 0,
                         "file": "segment"})
        cut = done["damaged"][follower.name]
        assert done["killed"] == [follower.name] and not cluster.is_running(follower)
        path = f"{cluster.data_dir(follower)}/{cut['file']}"
        files = cluster.files(follower)
        assert len(files.read(path)) == cut["size"][1] < cut["size"][0], cut
        cluster.start(follower)
        assert _until(lambda: len(admin.partitions(a, "t")[0].isr) == 3, 60)
        assert _until(lambda: len(files.read(path)) >= cut["size"][0]), cut

        # stop (SIGTERM): a clean shutdown, the broker leaves the cluster's metadata
        n2 = cluster.node(2)
        cluster.stop(n2)
        assert not cluster.is_running(n2)
        assert _until(lambda: 2 not in admin.broker_ids(a))
        cluster.start(n2)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)

        # pause freezes the JVM: alive, but it answers nothing until resumed
        n3 = cluster.node(3)
        assert not cluster.is_paused(n3)
        cluster.pause(n3)
        assert cluster.is_running(n3) and cluster.is_paused(n3)
        assert not _answers(n3.client_endpoint)
        cluster.resume(n3)
        assert not cluster.is_paused(n3)
        assert _until(lambda: _answers(n3.client_endpoint), 20)
        # a paused node can still be killed (pause and kill nemeses may meet on one node)
        cluster.pause(n3)
        cluster.kill(n3)
        assert not cluster.is_running(n3)
        cluster.start(n3)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["t"], timeout_s=60)

        # isolate node 1 from every peer: from node 1, peers' listeners become unreachable
        n1 = cluster.node(1)
        assert _reaches(cluster, n1, n2)
        cluster.drop(n1, [p for p in cluster.nodes if p != n1])
        assert not _reaches(cluster, n1, n2) and len(cluster.rules_left()) == 6
        cluster.heal_network()
        assert _reaches(cluster, n1, n2) and cluster.rules_left() == []
        # one way: n2 drops what it receives from n1, n1 still hears n2
        assert _udp_arrives(cluster, n1, n2) and _udp_arrives(cluster, n2, n1)
        cluster.drop(n2, [n1], inbound_only=True)
        assert not _udp_arrives(cluster, n1, n2) and _udp_arrives(cluster, n2, n1)
        cluster.heal_network()
        assert _udp_arrives(cluster, n1, n2)

        # a skewed clock shows in what the broker stamps (LogAppendTime: the leader's clock)
        if options.clock:
            for future in a.create_topics([NewTopic("ts", 1, 3, config={
                    "message.timestamp.type": "LogAppendTime"})]).values():
                future.result(30)
            admin.wait_ready(cluster.bootstrap_servers, 3, ["ts"], timeout_s=60)
            lead = cluster.node(admin.partitions(a, "ts")[0].leader)
            cluster.set_clock(lead, -3600.0)
            assert cluster.clock_offset(lead) == -3600.0
            assert _until(lambda: abs(_stamp_skew(cluster.bootstrap_servers) + 3600) < 5, 10)
            cluster.set_clock(lead, 0.0)
            assert _until(lambda: abs(_stamp_skew(cluster.bootstrap_servers)) < 5, 10)

        # logs are collected where the run directory can keep them
        for node in cluster.nodes:
            logs = cluster.log_files(node)
            assert logs and all(p.is_file() for p in logs), node.name
            text = "".join(p.read_text(errors="replace") for p in logs)
            assert "Kafka Server started" in text, node.name
    finally:
        cluster.teardown()
    assert backend.status(options) is None and backend.cleanup(options) == []
    assert leftovers() == []


def test_unknown_backend_and_kafka_version_are_clear_errors():
    with pytest.raises(EnvironmentUnsupported,
                       match="unknown cluster backend 'nope': choose one of local, docker, ssh"):
        backends.get("nope")
    with pytest.raises(DistributionError, match="Maven Central has no Kafka 3.0.99; nearest"):
        dist.resolve("3.0.99")
    with pytest.raises(DistributionError, match="MAJOR.MINOR.PATCH"):
        dist.resolve("latest")
