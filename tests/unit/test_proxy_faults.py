"""Request faults in the proxy (``nemesis/proxy/faults.py``, ``server.py``) between a client
socket and a stand-in broker that answers every request at once and notes when it read it:
what each kind does to the requests it matches, and to nothing else. (On a real cluster:
tests/integration/test_proxy.py.)"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest
from pydantic import ValidationError

from kafka_chaos.nemesis.base import NemesisError
from kafka_chaos.nemesis.proxy import KafkaProxy, faults
from kafka_chaos.nemesis.proxy.faults import RequestFault, api_key, api_name
from kafka_chaos.nemesis.requests import RequestNemesis
from kafka_chaos.waiting import wait_until

END_TXN, FETCH = 26, 1


def _request(api: int, correlation: int, client: str = "kc-p1", pad: int = 0) -> bytes:
    body = struct.pack(">hhih", api, 0, correlation, len(client)) + client.encode()
    body += b"\x00" * pad
    return struct.pack(">i", len(body)) + body


def _recv_frame(sock: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Broker:
    """Answers each request with its correlation id; ``seen``: (monotonic s, correlation)
    of every request read, in order."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.seen: list[tuple[float, int]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return self.server.getsockname()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while (frame := _recv_frame(conn)) is not None:
                correlation = struct.unpack_from(">i", frame, 4)[0]
                self.seen.append((time.monotonic(), correlation))
                conn.sendall(struct.pack(">ii", 4, correlation))

    def correlations(self) -> list[int]:
        return [c for _, c in self.seen]


@pytest.fixture
def rig():
    broker = Broker()
    proxy = KafkaProxy({1: broker.address}, clock=time.monotonic_ns)
    proxy.start()
    host, port = proxy.bootstrap.split(":")
    client = socket.create_connection((host, int(port)), timeout=5)
    client.settimeout(3)
    yield broker, proxy, client
    client.close()
    proxy.stop()
    broker.server.close()


def _replies(client: socket.socket, n: int, timeout_s: float = 3.0) -> list[int]:
    client.settimeout(timeout_s)
    out = []
    try:
        for _ in range(n):
            frame = _recv_frame(client)
            if frame is None:
                break
            out.append(struct.unpack(">i", frame)[0])
    except socket.timeout:
        pass
    return out


def _read_by_proxy(proxy: KafkaProxy, api: int, n: int) -> None:
    """Wait until the proxy has read ``n`` requests of ``api`` (its own count)."""
    wait_until(lambda: proxy.counts()["requests"].get(str(api), 0) >= n, 5.0, 0.01,
               f"{n} request(s) of API {api} at the proxy")


def test_a_delay_holds_the_matching_request_and_those_behind_it_but_nothing_else(rig) -> None:
    broker, proxy, client = rig
    proxy.add_fault(RequestFault(fault="delay", apis=["EndTxn"], delay_ms=400))
    sent = time.monotonic()
    client.sendall(_request(FETCH, 1) + _request(END_TXN, 2) + _request(FETCH, 3))
    assert _replies(client, 3) == [1, 2, 3]
    at = dict((c, t) for t, c in broker.seen)
    # the Fetch before it passes first; the one behind it waits for it
    assert at[1] < at[2] <= at[3] and at[2] - sent >= 0.4
    [report] = proxy.end_faults()
    assert (report["matched"], report["applied"], report["by_api"]) == (1, 1, {"EndTxn": 1})
    [req] = report["requests"]
    assert req["api"] == "EndTxn" and req["client"] == "kc-p1" and req["broker"] == 1
    assert req["forwarded_ns"] - req["received_ns"] >= 400e6
    assert proxy.active_faults() == []


def test_a_delayed_request_is_forwarded_after_its_client_has_gone(rig) -> None:
    """KAFKA-17754's shape: the client gives up on its EndTxn and closes; the broker still
    gets the EndTxn, late, after the client's next request on a new connection, which the
    report names as having overtaken it."""
    broker, proxy, client = rig
    proxy.add_fault(RequestFault(fault="delay", apis=["EndTxn"], delay_ms=500))
    client.sendall(_request(END_TXN, 9))
    _read_by_proxy(proxy, END_TXN, 1)
    client.close()
    host, port = proxy.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as again:
        again.sendall(_request(24, 10))  # AddPartitionsToTxn: the next transaction
        assert _replies(again, 1) == [10]
    assert broker.correlations() == [10]
    wait_until(lambda: broker.correlations() == [10, 9], 5.0, 0.01, "the late EndTxn")
    [report] = proxy.end_faults()
    [req] = report["requests"]
    assert req["forwarded_ns"] is not None
    assert list(req["overtaken_by"]) == ["AddPartitionsToTxn"]
    assert req["received_ns"] < req["overtaken_by"]["AddPartitionsToTxn"] < req["forwarded_ns"]


def test_drops_of_a_request_or_of_its_reply_and_a_duplicate(rig) -> None:
    broker, proxy, client = rig
    fid = proxy.add_fault(RequestFault(fault="drop-request", apis=[END_TXN]))
    client.sendall(_request(END_TXN, 1) + _request(FETCH, 2))
    assert _replies(client, 1) == [2] and broker.correlations() == [2]
    proxy.end_faults(fid)
    proxy.add_fault(RequestFault(fault="drop-response", apis=["end_txn"]))
    client.sendall(_request(END_TXN, 3) + _request(FETCH, 4))
    assert _replies(client, 1) == [4] and broker.correlations() == [2, 3, 4]
    proxy.end_faults()
    proxy.add_fault(RequestFault(fault="duplicate", apis=["EndTxn"]))
    client.sendall(_request(END_TXN, 5) + _request(FETCH, 6))
    assert _replies(client, 2) == [5, 6]
    assert _replies(client, 1, timeout_s=0.3) == []  # the copy's reply is swallowed
    assert broker.correlations()[3:] == [5, -1, 6]
    [report] = proxy.end_faults()
    assert report["applied"] == 1 and report["fault"] == "duplicate"


def test_a_reorder_swaps_a_request_with_the_next_or_lets_it_go_alone(rig) -> None:
    broker, proxy, client = rig
    proxy.add_fault(RequestFault(fault="reorder", apis=["EndTxn"], reorder_wait_ms=300))
    client.sendall(_request(END_TXN, 1))
    _read_by_proxy(proxy, END_TXN, 1)  # held, waiting for the next request
    client.sendall(_request(FETCH, 2))
    assert sorted(_replies(client, 2)) == [1, 2] and broker.correlations() == [2, 1]
    client.sendall(_request(END_TXN, 3))  # no next request: forwarded when the wait ends
    assert _replies(client, 1) == [3]
    [report] = proxy.end_faults()
    assert [r["reordered"] for r in report["requests"]] == [True, False]


def test_a_hold_forwards_when_the_fault_ends_and_filters_are_honoured(rig) -> None:
    broker, proxy, client = rig
    proxy.add_fault(RequestFault(fault="hold", apis=["EndTxn"], clients=["kc-p1"]))
    client.sendall(_request(END_TXN, 1, client="kc-p2") + _request(END_TXN, 2))
    assert _replies(client, 1) == [1]
    _read_by_proxy(proxy, END_TXN, 2)
    assert _replies(client, 1, timeout_s=0.2) == [] and broker.correlations() == [1]
    [report] = proxy.end_faults()
    assert _replies(client, 1) == [2] and broker.correlations() == [1, 2]
    assert (report["matched"], report["applied"]) == (1, 1)
    assert report["requests"][0]["forwarded_ns"] is not None


def test_a_bandwidth_paces_every_api_of_the_link_and_latency_pipelines(rig) -> None:
    """10 requests of 5,000 bytes at 100,000 bytes/s take at least 0.45 s to pass (the first
    goes at once); a delay on every API (a link's latency) delays each request once, not each
    behind the last. Bounds that a loaded machine keeps: a lower bound, and the pipelining
    told apart from a queue by the gap one request's delay after another would leave."""
    broker, proxy, client = rig
    proxy.add_fault(RequestFault(fault="bandwidth", apis=["*"], bytes_per_s=100_000))
    start = time.monotonic()
    client.sendall(b"".join(_request(FETCH if i % 2 else END_TXN, i, pad=5000 - 16)
                            for i in range(10)))
    assert _replies(client, 10) == list(range(10))
    took = broker.seen[-1][0] - start
    assert took >= 0.45, took
    proxy.end_faults()
    proxy.add_fault(RequestFault(fault="delay", apis=["*"], delay_ms=300))
    client.sendall(b"".join(_request(FETCH, 20 + i) for i in range(5)))
    assert _replies(client, 5) == [20, 21, 22, 23, 24]
    [report] = proxy.end_faults()
    held = [(r["received_ns"], r["forwarded_ns"]) for r in report["requests"]]
    assert len(held) == 5 and all(f - r >= 300e6 for r, f in held), held
    # one after another, the last would go at least 4 delays after the first
    assert held[-1][1] - held[0][1] < 4 * 300e6, held


def test_a_probability_applies_to_a_share_drawn_from_the_seed() -> None:
    def applied(seed: int) -> list[int]:
        broker = Broker()
        proxy = KafkaProxy({1: broker.address}, seed=seed)
        proxy.start()
        try:
            host, port = proxy.bootstrap.split(":")
            with socket.create_connection((host, int(port)), timeout=5) as client:
                proxy.add_fault(RequestFault(fault="drop-response", apis=["Fetch"],
                                             probability=0.5))
                client.sendall(b"".join(_request(FETCH, i) for i in range(40)))
                wait_until(lambda: len(broker.seen) == 40, 5.0, 0.01, "40 Fetch requests")
                got = set(_replies(client, 40, timeout_s=0.5))
            [report] = proxy.end_faults()
            assert report["applied"] == 40 - len(got)
            return sorted(set(range(40)) - got)
        finally:
            proxy.stop()
            broker.server.close()

    first = applied(7)
    assert 5 < len(first) < 35 and applied(7) == first


def test_faults_are_validated_naming_the_field() -> None:
    assert api_key("EndTxn") == api_key("end_txn") == api_key(26) == 26
    assert api_name(68) == "ConsumerGroupHeartbeat"
    with pytest.raises(ValidationError, match="'Prodcue' is no Kafka API"):
        RequestFault(fault="delay", apis=["Prodcue"])
    with pytest.raises(ValidationError, match="probability"):
        RequestFault(fault="delay", probability=0)
    with pytest.raises(NemesisError, match="request-fault: delay_ms: Input should be"):
        RequestNemesis.spec({"request": {"fault": "delay", "delay_ms": -1}})
    with pytest.raises(NemesisError, match="names no fault"):
        RequestNemesis.spec({"target": "leader"})
    assert RequestNemesis.spec({"target": "duplicate"}).keys >= {0, 26, 28}


def test_a_reports_values_are_read_while_they_can_be_and_bounded(monkeypatch) -> None:
    """Decimal values of the Produce requests a fault applied to are listed per partition;
    one unreadable batch, or more than ``MAX_VALUES`` in all, leaves that partition's
    values unknown (None), never partial."""
    monkeypatch.setattr(faults, "MAX_VALUES", 4)
    applied = faults.Applied(RequestFault(fault="duplicate"), 1, random.Random(0), 0)
    applied.note(0, "kc-p1", 1, 10, {"t-0": [b"1", b"2"], "t-1": [b"5"]})
    applied.note(0, "kc-p1", 1, 20, {"t-1": [b"6"], "t-2": None})
    applied.note(0, "kc-p1", 1, 30, {"t-0": [b"3"]})
    report = applied.report(40)
    assert report["values"] == {"t-0": None, "t-1": [5, 6], "t-2": None}
    assert report["partitions"] == {"t-0": [10, 30, 2], "t-1": [10, 20, 2], "t-2": [20, 20, 1]}
    assert report["applied"] == 3 and report["by_api"] == {"Produce": 3}
