"""The Kafka protocol proxy (``nemesis/proxy``) on a real cluster: the workload's clients
reach the brokers only through it and a fault-free run through it is valid; its request
faults do what they say and are judged by the proxy's own record; ``delayed-end-txn``
(KAFKA-17754) on three client/version pairs; latency and bandwidth shaping, and iptables'
packet loss, measured."""

from __future__ import annotations

import json
import socket
import statistics
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_chaos.clusters import admin, dist, wire
from kafka_chaos.clusters.base import Node
from kafka_chaos.clusters.local import LocalCluster
from kafka_chaos.history import read_history
from kafka_chaos.nemesis.proxy import KafkaProxy, codec
from kafka_chaos.nemesis.proxy.faults import RequestFault
from kafka_chaos.workloads.settings import WorkloadSettings
from tests.integration.conftest import (backend_param, kafka_chaos, leftovers, prepare,
                                       results_of)

pytestmark = pytest.mark.kafka
TOPIC = "shaped"


# the longer tier's, on both backends: the full suite keeps the proxy on real brokers in
# test_request_faults_on_a_real_cluster_do_what_they_say_and_are_judged (docs/nightly.md)
@pytest.mark.long
@pytest.mark.parametrize("backend", [backend_param("local"), backend_param("docker")])
def test_a_fault_free_run_through_the_proxy_is_valid_with_every_client_behind_it(
        request, tmp_path, backend):
    """The quick start's run with ``--proxy`` and no faults, on the embedded and the docker
    backends (the proxy on this host, the brokers in containers): valid; each broker was
    reached through its own listener; the Metadata and FindCoordinator replies were
    rewritten and none that named a broker was left undecoded; every process that sent did
    so as a client the proxy saw (``client.id`` ``kc-p<process>``); nothing is left on the
    host."""
    _, args = prepare(request, backend, dist.resolve(), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--proxy", "--nemesis", "none", "--sub-via", "subscribe",
                       "--time-limit", "15", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
    counts = json.loads((run_dir / "run.json").read_text())["proxy"]
    assert set(counts["listeners"]) == set(counts["connections"]) == {"1", "2", "3"}, counts
    assert all(v.startswith("127.0.0.1:") for v in counts["listeners"].values())
    assert counts["rewritten"]["3"] > 0 and counts["rewritten"]["10"] > 0, counts
    assert counts["unparsed"] == {} and counts["upstream_failures"] == 0, counts
    assert counts["errors"] == {}, counts
    assert set(counts["capped"]) <= {str(k) for k in codec.REWRITTEN}, counts
    assert counts["requests"]["0"] > 0 and counts["requests"]["1"] > 0, counts  # Produce, Fetch
    senders = {op.process for op in read_history(run_dir / "history.jsonl")
               if isinstance(op.process, int) and op.f == "send" and op.type.value == "ok"}
    assert senders and {f"kc-p{p}" for p in senders} <= set(counts["client_ids"]), counts
    assert leftovers() == []


_WRITES = """\
name: proxy-writes
about: a dropped Produce response, then duplicated Produce requests
steps:
  - after: 4
    do: request-fault
    request: {fault: drop-response, apis: [Produce], probability: 0.3}
  - after: 5
    do: request-heal
  - after: 2
    do: request-fault
    request: {fault: duplicate, apis: [Produce], probability: 0.3}
  - after: 5
    do: request-heal
  - after: 3
"""

_TXNS = """\
name: proxy-txns
about: duplicated Produce requests of an idempotent producer, then a delayed EndTxn
steps:
  - after: 4
    do: request-fault
    request: {fault: duplicate, apis: [Produce], probability: 0.3}
  - after: 5
    do: request-heal
  - after: 2
    do: request-fault
    request: {fault: delay, apis: [EndTxn], delay_ms: 1500, probability: 0.5}
  - after: 6
    do: request-heal
  - after: 3
"""


def _ended(run_dir) -> list[dict]:
    """The reports of every request fault the run ended (its request-heal ops)."""
    return [r for op in read_history(run_dir / "history.jsonl")
            if op.process == "nemesis" and op.f == "request-heal" and op.type.value == "ok"
            for r in op.value["ended"]]


def test_request_faults_on_a_real_cluster_do_what_they_say_and_are_judged(request, tmp_path):
    """Two scripted runs through the proxy (the embedded backend, one cluster at a time).

    Without idempotence and without retries: a Produce whose response the proxy dropped
    leaves its sends ``info``, and their records are in the log (the final reads read them);
    a Produce the proxy sent twice writes its records twice: ``duplicate``, each permitted
    by the proxy's own record of that partition's copy (``proxy-duplicated-produce``), none a
    violation. Transactional (so idempotent): the copies write nothing twice, and an EndTxn
    held 1.5 s reaches its coordinator that much after the client sent it (the proxy's
    times); both runs valid."""
    _, args = prepare(request, "local", dist.resolve(), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    (tmp_path / "writes.yaml").write_text(_WRITES)
    proc = kafka_chaos("run", *args, "--proxy", "--scenario", str(tmp_path / "writes.yaml"),
                       "--no-idempotence", "--retries", "0",
                       "--out", str(tmp_path / "writes"))
    run_dir = (tmp_path / "writes" / "latest").resolve()
    results = results_of(run_dir, proc)
    assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
    dropped, doubled = _ended(run_dir)
    assert dropped["fault"] == "drop-response" and dropped["applied"] > 0, dropped
    history = read_history(run_dir / "history.jsonl")
    in_log = {v for op in history if op.f == "poll" and op.type.value == "ok"
              for m in op.value if m[0] == "poll" for recs in m[1].values() for _, v in recs}
    unknown = {m[2][1] for op in history if op.f == "send" and op.type.value == "info"
               for m in op.value if m[2][0] is None}
    assert unknown and unknown & in_log, "no send left info by a dropped response was read"
    assert doubled["fault"] == "duplicate" and doubled["applied"] > 0, doubled
    assert all(tp.startswith("kafka-chaos-") for tp in doubled["partitions"]), doubled
    dup = results["anomalies"]["duplicate"]
    assert dup["count"] > 0 and dup["outcomes"]["violation"] == 0, dup
    assert dup["rules"] == {"proxy-duplicated-produce": dup["outcomes"]["permitted"]}, dup
    assert leftovers() == []

    (tmp_path / "txns.yaml").write_text(_TXNS)
    proc = kafka_chaos("run", *args, "--proxy", "--scenario", str(tmp_path / "txns.yaml"),
                       "--txn", "--out", str(tmp_path / "txns"))
    run_dir = (tmp_path / "txns" / "latest").resolve()
    results = results_of(run_dir, proc)
    assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
    doubled, delayed = _ended(run_dir)
    assert doubled["applied"] > 0 and results["anomalies"].get("duplicate", {}).get(
        "count", 0) == 0, (doubled, results["anomalies"].get("duplicate"))
    late = [r["forwarded_ns"] - r["received_ns"] for r in delayed["requests"]
            if r["forwarded_ns"] is not None]
    assert delayed["by_api"] == {"EndTxn": delayed["applied"]} and late, delayed
    assert min(late) >= 1_500_000_000, late
    assert leftovers() == []


#: The anomalies KAFKA-17754 makes: the late EndTxn commits the first writes of the open
#: transaction, which then fails, yet they are read (G1a), the transaction itself reading
#: them as committed (precommitted-read); what it commits or aborts may also be missed
#: (lost-write, unseen) or read out of order.
_TORN = {"G1a", "precommitted-read", "lost-write", "unseen", "G1c", "G1c-process",
         "G1c-realtime", "poll-skip", "nonmonotonic-poll", "int-poll-skip"}


@pytest.mark.parametrize("client, version", [
    # the full suite tears transactions v1 in test_bisect.py (kafka-clients 3.9.1, 4.4.0)
    pytest.param("librdkafka", dist.DEFAULT_KAFKA_VERSION, marks=pytest.mark.long),
    pytest.param("java", dist.DEFAULT_KAFKA_VERSION, marks=pytest.mark.long),
    pytest.param("librdkafka", "3.9.1", marks=pytest.mark.long)])
def test_delayed_end_txn_tears_transactions_v1_and_not_v2(request, tmp_path, client, version):
    """``--scenario delayed-end-txn`` (KAFKA-17754), its precondition proven by the proxy's
    own times: a held EndTxn reached its coordinator while its client's next transaction was
    open (else the run would end unknown). librdkafka speaks transactions v1 only, on 3.9.1
    and on 4.4.0: a violation, aborted reads among its anomalies and nothing else but what
    a torn transaction makes. The Java client on 4.4.0 speaks transactions v2 (KIP-890: it
    sends no AddPartitionsToTxn, which the proxy's counts show): valid."""
    _, args = prepare(request, "local", dist.resolve(version), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--scenario", "delayed-end-txn", "--client", client,
                       "--kafka-version", version, "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["scenario"] == {"steps_done": 3, "marks": {}}, proc.stdout[-3000:]
    [delayed] = _ended(run_dir)
    assert delayed["by_api"] == {"EndTxn": delayed["applied"]} and delayed["applied"] > 0
    found = {name for name, a in results["anomalies"].items()
             if a.get("count") and a.get("outcomes", {}).get("violation")}
    if client == "java":
        assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
        assert "24" not in facts["proxy"]["requests"], facts["proxy"]["requests"]
    else:
        assert proc.returncode == 1 and results["valid"] is False, proc.stdout[-3000:]
        assert "G1a" in found and found <= _TORN, found
        assert facts["proxy"]["requests"]["24"] > 0
    assert leftovers() == []


def _round_trips(endpoint: str, n: int = 15) -> float:
    """The median time (s) of ``n`` ApiVersions asked of ``endpoint``, each on a fresh
    connection."""
    took = []
    for _ in range(n):
        start = time.monotonic()
        wire.api_versions(endpoint)
        took.append(time.monotonic() - start)
    return statistics.median(took)


def _bytes_per_s(bootstrap: str, seconds: float, size: int = 2000) -> float:
    """Value bytes a bare producer (the workload's producer configuration) gets
    acknowledged per second, producing as fast as it can for ``seconds``. Its batches are
    kept to 64 KiB and its request timeout to 30 s: librdkafka's 1 MB batches, five in
    flight, would wait longer than the workload's 3 s on a 400 kB/s link, and time out."""
    config = WorkloadSettings().producer_config(bootstrap)
    p = Producer({**config, "batch.size": 65536, "request.timeout.ms": 30000,
                  "delivery.timeout.ms": 120000})
    acked = [0]

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[0] += len(msg.value())

    payload = b"x" * size
    p.produce(TOPIC, payload, on_delivery=on_delivery)
    p.flush(30)  # connected, metadata known: the clock starts now
    acked[0] = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(TOPIC, payload, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    elapsed = time.monotonic() - start
    rate = acked[0] / elapsed
    p.flush(30)
    return rate


#: Counts the UDP datagrams reaching port 9999 until none came for 2 s (at most 30 s).
_RECEIVER = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 9999))
s.settimeout(8); n = 0; end = time.monotonic() + 30
while time.monotonic() < end:
    try:
        s.recv(64)
    except socket.timeout:
        break
    n += 1; s.settimeout(2)
print(n)
"""


def _datagrams_arriving(cluster: LocalCluster, node: Node, n: int = 4000) -> float:
    """The share of ``n`` UDP datagrams sent from this host that reach ``node`` (counted by
    a receiver in its network namespace)."""
    got: list[str] = []
    receiver = threading.Thread(target=lambda: got.append(
        cluster.exec(node, [sys.executable, "-c", _RECEIVER], timeout_s=40).out))
    receiver.start()
    time.sleep(2)  # the receiver has bound its port
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(n):
            s.sendto(b"%d" % i, (node.host, 9999))
            if i % 100 == 0:
                time.sleep(0.005)  # no socket buffer overflows: only the rule drops
    receiver.join(45)
    return int(got[0].strip()) / n


def _commit_through(bootstrap: str, direct: str, group: str, n: int) -> int | None:
    """Consume ``n`` records of partition 0 with ``group`` through ``bootstrap``, commit the
    position, and return the leader epoch the group's committed offset has as the broker
    stores it (asked directly, at ``direct``; None: stored without one)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got = 0
        while got < n:
            msg = c.poll(5)
            assert msg is not None and msg.error() is None, msg and msg.error()
            got += 1
        c.commit(asynchronous=False)
    finally:
        c.close()
    reader = Consumer({"bootstrap.servers": direct, "group.id": group})
    try:
        [tp] = reader.committed([TopicPartition(TOPIC, 0)], timeout=10)
    finally:
        reader.close()
    assert tp.offset == n, tp
    return tp.leader_epoch


@pytest.mark.long  # the full suite: test_proxy_faults.py's pacing on real sockets
def test_latency_and_bandwidth_through_the_proxy_are_what_was_set(tmp_path):
    """Network shaping without netem, on real brokers: a ``delay`` of every API (a link's
    latency, 100 ms) adds 80-120 ms to an ApiVersions round trip through the proxy; a
    ``bandwidth`` of 400,000 bytes/s holds a bare producer's acknowledged value bytes to
    80-100 % of it (the batches' and requests' own bytes take the rest), where without it
    the producer gets well above that. Packet loss where the proxy is not (iptables'
    ``statistic`` match, the ``loss`` nemesis): with ``loss=0.3`` on what a broker receives
    from this host, 64-76 % of datagrams arrive (all do before and after), and the heal
    leaves no rule. A ``forget-leader-epoch`` fault (KAFKA-20507): a group's offset
    committed through it is stored without the leader epoch the client sent (KIP-320),
    which the same commit without the fault keeps."""
    cluster = LocalCluster(dist.resolve(), tmp_path / "nodes", brokers=3)
    proxy = None
    try:
        cluster.setup()
        admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
        admin.create_topic(cluster.bootstrap_servers, TOPIC, 1, 3)
        admin.wait_ready(cluster.bootstrap_servers, 3, [TOPIC], timeout_s=60)
        proxy = KafkaProxy.for_cluster(cluster)
        proxy.start()
        endpoint = proxy.bootstrap.split(",")[0]
        base = _round_trips(endpoint)
        proxy.add_fault(RequestFault(fault="delay", apis=["*"], delay_ms=100))
        shaped = _round_trips(endpoint)
        [report] = proxy.end_faults()
        assert 0.08 <= shaped - base <= 0.12, (base, shaped)
        assert report["by_api"] == {"ApiVersions": 15}, report["by_api"]

        free = _bytes_per_s(proxy.bootstrap, 4)
        proxy.add_fault(RequestFault(fault="bandwidth", apis=["*"], bytes_per_s=400_000))
        limited = _bytes_per_s(proxy.bootstrap, 8)
        [report] = proxy.end_faults()
        assert free > 600_000, free
        assert 320_000 <= limited <= 400_000, limited
        assert report["by_api"]["Produce"] > 0, report["by_api"]

        kept = _commit_through(proxy.bootstrap, cluster.bootstrap_servers, "kept", 20)
        proxy.add_fault(RequestFault(fault="forget-leader-epoch",
                                     apis=["OffsetCommit", "TxnOffsetCommit"]))
        forgotten = _commit_through(proxy.bootstrap, cluster.bootstrap_servers, "lost", 20)
        [report] = proxy.end_faults()
        print(f"committed leader epoch: {kept} kept, {forgotten} through the fault; "
              f"{report['forgotten']}")
        assert kept is not None and kept >= 0 and forgotten is None, (kept, forgotten)
        assert report["by_api"] == {"OffsetCommit": 1} and report["unchanged"] == 0
        assert report["forgotten"] == {str(kept): 1}, report

        node = cluster.brokers[0]
        clients = Node(0, "clients", cluster.client_host(), ())
        before = _datagrams_arriving(cluster, node)
        cluster.drop(node, [clients], inbound_only=True, loss=0.3)
        lossy = _datagrams_arriving(cluster, node)
        cluster.heal_network()
        after = _datagrams_arriving(cluster, node)
        print(f"datagrams arriving: {before:.4f} before, {lossy:.4f} at loss 0.3, "
              f"{after:.4f} healed")
        assert before == after == 1.0 and 0.64 <= lossy <= 0.76, (before, lossy, after)
        assert cluster.rules_left() == []
    finally:
        if proxy is not None:
            proxy.stop()
        cluster.teardown()
    assert leftovers() == []
