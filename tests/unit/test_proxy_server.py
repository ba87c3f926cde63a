"""The proxy's own life, without a broker: a listener that cannot be bound is one clear
error and nothing is left running; a broker that refuses the proxy's connection closes the
client's and is counted. (Through real brokers: tests/integration/test_proxy.py.)"""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from kafka_chaos.nemesis.proxy import KafkaProxy, ProxyError
from kafka_chaos.waiting import wait_until


def _refused_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _new_proxy_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """The proxy's event-loop threads (named ``kafka-proxy``) running now and not in
    ``before``."""
    return [t for t in threading.enumerate() if t.name == "kafka-proxy" and t not in before]


def test_a_listener_that_cannot_be_bound_is_an_error_and_nothing_runs() -> None:
    before = set(threading.enumerate())
    proxy = KafkaProxy({1: ("127.0.0.1", 9092)}, listen_host="192.0.2.1")  # not ours
    with pytest.raises(ProxyError, match="the Kafka proxy"):
        proxy.start()
    assert _new_proxy_threads(before) == []


def test_a_broker_that_refuses_closes_the_clients_connection_and_is_counted() -> None:
    before = set(threading.enumerate())
    proxy = KafkaProxy({1: ("127.0.0.1", _refused_port())})
    proxy.start()
    assert len(_new_proxy_threads(before)) == 1
    try:
        host, port = proxy.bootstrap.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as client:
            client.settimeout(5)
            assert client.recv(1) == b""  # closed by the proxy
        counts = proxy.counts()
        assert counts["connections"] == {"1": 1} and counts["upstream_failures"] == 1
        assert counts["listeners"] == {"1": proxy.bootstrap}
    finally:
        proxy.stop()
    assert _new_proxy_threads(before) == []


def test_a_frame_the_proxy_cannot_read_ends_that_connection_and_is_counted() -> None:
    """A request too short to hold a header: the proxy closes that client's connection and
    counts the exception in ``errors`` (run.json), not in asyncio's log alone."""
    with socket.socket() as broker:  # accepts and says nothing: the frame never reaches it
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        proxy = KafkaProxy({1: broker.getsockname()})
        proxy.start()
        try:
            host, port = proxy.bootstrap.split(":")
            with socket.create_connection((host, int(port)), timeout=5) as client:
                client.settimeout(5)
                client.sendall(b"\x00\x00\x00\x02\x00\x03")
                assert client.recv(1) == b""  # closed by the proxy
            # counted right after the close, on the proxy's own loop
            wait_until(lambda: proxy.counts()["errors"], 5.0, 0.05, "the error counted")
            assert proxy.counts()["errors"] == {"error": 1}  # struct.error
        finally:
            proxy.stop()


def test_a_call_its_caller_stopped_waiting_for_is_cancelled_by_the_stop() -> None:
    """A call on the proxy's loop outlives its caller's wait (an ``end_faults`` cut short by
    Ctrl-C): the stop cancels it, rather than leaving the loop with a task destroyed pending
    ("Task was destroyed but it is pending", seen at an interrupt on 2026-12-01)."""
    cancelled = threading.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    proxy = KafkaProxy({1: ("127.0.0.1", _refused_port())})
    proxy.start()
    try:
        with pytest.raises(ProxyError):
            proxy._call(waits(), timeout_s=0.2)
        assert not cancelled.is_set()
    finally:
        proxy.stop()
    assert cancelled.is_set()
