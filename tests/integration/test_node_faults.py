"""Faults on one real cluster, each read back from Kafka: clocks (brokers under libfaketime,
their skew read from what they stamp on records with ``message.timestamp.type=LogAppendTime``:
the leader's wall clock), leadership moves and a rolling restart (the metadata)."""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from kafka_chaos.clusters import admin, dist
from kafka_chaos.clusters.backends import BackendOptions, get
from kafka_chaos.nemesis.clock import ClockNemesis
from kafka_chaos.nemesis.faults import ProcessNemesis
from kafka_chaos.nemesis.leaders import LeaderNemesis
from kafka_chaos.nemesis.schedule import unhealed
from tests import procs
from tests.integration.conftest import leftovers

pytestmark = pytest.mark.kafka


def _settled(client, done, timeout_s: float = 10.0) -> dict:
    """``clock``'s partition states once ``done(states)`` holds, or as last read after
    ``timeout_s``: the nemesis confirms a move on one broker's metadata, and the broker this
    client asks may apply the controller's record a moment later."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = {s.partition: s for s in admin.partitions(client, "clock")}
        if done(now) or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def _led(client) -> dict:
    """``clock``'s partition states once all three have a leader: the broker a new client asks
    may not have applied the topic's records yet (a full CI run of 2026-12-01 read no
    partitions of ``clock`` there)."""
    now = _settled(client, lambda now: len(now) == 3 and all(s.leader >= 0
                                                             for s in now.values()))
    assert len(now) == 3, now
    return now


def _skews(bootstrap: str, partitions: int) -> dict[int, float]:
    """Per partition: the leader's LogAppendTime stamp minus our clock, seconds."""
    stamps: dict[int, float] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    for p in range(partitions):
        producer.produce("clock", b"x", partition=p, on_delivery=lambda err, msg: err is None
                         and stamps.__setitem__(msg.partition(), msg.timestamp()[1] / 1000
                                                - time.time()))
    producer.flush(20)
    assert len(stamps) == partitions, stamps
    return stamps


def _shows(bootstrap: str, partition: int, want_s: float, timeout_s: float = 5.0) -> bool:
    """Whether the leader of ``partition`` stamps records ``want_s`` off true time within
    ``timeout_s`` (libfaketime rereads the offset file when its one-second cache expires)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if abs(_skews(bootstrap, partition + 1)[partition] - want_s) < 2:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers under libfaketime; topic ``clock``: 3 partitions, 3 replicas each."""
    cluster = get("local").create(dist.resolve(), tmp_path_factory.mktemp("nodes"), 3, 0, {},
                                  BackendOptions(clock=True))
    try:
        cluster.setup()
        admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
        client = admin.client(cluster.bootstrap_servers)
        for future in client.create_topics([NewTopic("clock", 3, 3, config={
                "message.timestamp.type": "LogAppendTime"})]).values():
            future.result(30)
        admin.wait_ready(cluster.bootstrap_servers, 3, ["clock"], timeout_s=60)
        yield cluster
    finally:
        cluster.teardown()
    assert leftovers() == []


def test_bump_strobe_and_reset_move_one_brokers_clock_only(cluster):
    client = admin.client(cluster.bootstrap_servers)
    leaders = {p: s.leader for p, s in _led(client).items()}
    target = cluster.node(leaders[0])
    _skews(cluster.bootstrap_servers, 3)  # connections up: later stamps are prompt
    assert all(abs(s) < 2 for s in _skews(cluster.bootstrap_servers, 3).values())

    nemesis = ClockNemesis(cluster, random.Random(4))
    done = nemesis.invoke("clock-bump", {"target": [target.node_id], "offset_s": 3600.0})
    assert done == {"offsets_s": {target.name: 3600.0}}
    assert _shows(cluster.bootstrap_servers, 0, 3600)
    skews = _skews(cluster.bootstrap_servers, 3)
    for p, leader in leaders.items():
        want = 3600 if leader == target.node_id else 0
        assert abs(skews[p] - want) < 2, (p, leader, skews)

    # a drawn bump, either way, within Jepsen's bound
    done = nemesis.invoke("clock-bump", {"target": [target.node_id]})
    offset = done["offsets_s"][target.name]
    assert 0 < abs(offset) <= 262.144
    assert _shows(cluster.bootstrap_servers, 0, offset)

    nemesis.invoke("clock-reset", None)
    assert _shows(cluster.bootstrap_servers, 0, 0)
    seen: list[float] = []
    strobe: dict = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1",
                         "linger.ms": 0})

    def sample():
        while not strobe:
            producer.produce("clock", b"x", partition=0, on_delivery=lambda err, msg: (
                err is None and seen.append(msg.timestamp()[1] / 1000 - time.time())))
            producer.flush(5)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    strobe.update(nemesis.invoke("clock-strobe", {"target": [target.node_id]}))
    sampler.join()
    producer.flush(5)
    delta = strobe["strobed"][target.name]
    assert strobe["flips"] >= 2, strobe
    flipped = [abs(s - delta) < 2 for s in seen if abs(s - delta) < 2 or abs(s) < 2]
    assert len(flipped) > 0.8 * len(seen), seen  # only true time or the strobe's offset
    assert True in flipped and False in flipped[flipped.index(True):], (strobe, seen)
    assert _shows(cluster.bootstrap_servers, 0, 0)  # a strobe ends at true time

    assert nemesis.teardown() == {"reset": [target.name]}
    assert _shows(cluster.bootstrap_servers, 0, 0)
    assert all(abs(s) < 2 for s in _skews(cluster.bootstrap_servers, 3).values())

    # a restarted broker is under libfaketime again, at the offset left for it
    nemesis.invoke("clock-bump", {"target": [target.node_id], "offset_s": -600.0})
    cluster.kill(target)
    cluster.start(target)
    # it led partition 0 first (its preferred replica): lead it again once back in the ISR
    deadline = time.monotonic() + 90
    while admin.elect(client, "clock", [0], "preferred").get(0) not in (
            None, "ELECTION_NOT_NEEDED") or not _shows(cluster.bootstrap_servers, 0, -600, 1):
        assert time.monotonic() < deadline, "the restarted broker never led with its skew"
        time.sleep(1)
    nemesis.teardown()
    assert unhealed(cluster, {}) == []


def test_leadership_moves_to_an_in_sync_follower_and_back(cluster):
    client = admin.client(cluster.bootstrap_servers)
    before = _led(client)
    nemesis = LeaderNemesis(cluster, random.Random(2))
    moved = nemesis.invoke("move-leader", {"topic": "clock", "partition": 1,
                                           "target": "in-sync-follower"})
    old, new = moved["leader"]
    assert old == before[1].leader and new != old and new in before[1].isr
    assert moved["replicas"] == [list(before[1].replicas),
                                 [new] + [i for i in before[1].replicas if i != new]]
    now = _settled(client, lambda now: now[1].leader == new)
    assert now[1].leader == new and list(now[1].replicas) == moved["replicas"][1]
    assert now[0].leader == before[0].leader  # only the partition asked for
    assert nemesis.teardown() == {"restored": {"clock-1": {
        "replicas": list(before[1].replicas), "leader": before[1].leader}}}
    now = _settled(client, lambda now: now[1].leader == before[1].leader)
    assert [now[p].leader for p in range(3)] == [before[p].leader for p in range(3)]


def _broker_pids(cluster) -> dict[int, list[int]]:
    """node id -> the pids of the broker JVMs running its ``server.properties`` (as ``ps``
    shows them: ``ip netns exec`` execs the JVM, so the pid is the JVM's)."""
    return {n.node_id: procs.children(str(cluster.node_dir(n) / "server.properties"))
            for n in cluster.nodes}


def test_a_rolling_restart_waits_for_each_broker_to_rejoin(cluster):
    pids = _broker_pids(cluster)
    assert all(len(p) == 1 for p in pids.values()), pids
    done = ProcessNemesis(cluster, random.Random(1)).invoke(
        "roll", {"target": "all", "topic": "clock", "partition": 0})
    assert done["rolled"] == ["n1", "n2", "n3"] and set(done["waited_s"]) == {"n1", "n2", "n3"}
    after = _broker_pids(cluster)
    assert all(len(p) == 1 and p != pids[i] for i, p in after.items()), (pids, after)
    states = _led(admin.client(cluster.bootstrap_servers)).values()
    assert all(set(s.isr) == set(s.replicas) for s in states), states
    log = (cluster.node_dir(cluster.node(1)) / "logs" / "server.log").read_text()
    assert "Request Handler on Broker 1] shutting down" in log  # SIGTERM: a clean shutdown


def test_a_client_partition_cuts_the_clients_from_a_leader_that_stays_leader(cluster):
    from kafka_chaos.clusters import wire
    from kafka_chaos.nemesis.faults import PartitionNemesis

    client = admin.client(cluster.bootstrap_servers)
    leader = cluster.node(_led(client)[2].leader)
    others = [n for n in cluster.brokers if n != leader]
    nemesis = PartitionNemesis(cluster, random.Random(5))
    done = nemesis.invoke("partition", {"target": "clients-leader", "topic": "clock",
                                        "partition": 2})
    assert done == {"isolated": [["clients"], [leader.name]], "port": leader.broker_port,
                    "clients": cluster.client_host()}
    assert not wire.answers(leader.client_endpoint, 1.0)
    assert all(wire.answers(n.client_endpoint, 1.0) for n in others)
    time.sleep(3)
    [p2] = [p for p in wire.describe_topic_partitions(others[0].client_endpoint, ["clock"])[
        "clock"] if p["partition"] == 2]
    assert p2["leader"] == leader.node_id and sorted(p2["isr"]) == [1, 2, 3]  # brokers agree
    failed = []
    producer = Producer({"bootstrap.servers": others[0].client_endpoint,
                         "message.timeout.ms": 3000})
    producer.produce("clock", b"x", partition=2, on_delivery=lambda err, msg: failed.append(err))
    producer.flush(10)
    assert failed and failed[0] is not None  # no client reaches the leader
    assert cluster.rules_left()
    nemesis.invoke("heal", None)
    assert wire.answers(leader.client_endpoint, 1.0) and cluster.rules_left() == []
