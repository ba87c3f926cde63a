"""The completions a client writes when a transaction fails midway: the format's rule that an
op cut short lists what it did, then every invoked send it never reached, holds (a CI run
wrote a ``txn`` ``fail`` listing 2 of its 3 sends: the delivery of the first two timed out
before the poll, and the send after it was never reached; the history was then refused)."""

from __future__ import annotations

import random
import time

from confluent_kafka import KafkaError, KafkaException

from kafka_chaos.history import HistoryWriter
from kafka_chaos.history.validate import validate
from kafka_chaos.workloads.client import Client
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings


class _Message:
    def __init__(self, value: bytes) -> None:
        self._value = value

    def value(self) -> bytes:
        return self._value

    def offset(self) -> int:
        return -1


class _Producer:
    """A transactional producer whose every delivery times out (``_MSG_TIMED_OUT``) and
    whose abort succeeds: what a client meets when its leader stops answering mid-transaction."""

    def __init__(self) -> None:
        self.reports: list = []
        self.aborted = 0

    def init_transactions(self, timeout_s: float) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic, payload, partition, on_delivery) -> None:
        self.reports.append((on_delivery, payload))

    def flush(self, timeout_s: float) -> int:
        for on_delivery, payload in self.reports:
            on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), _Message(payload))
        self.reports.clear()
        return 0

    def abort_transaction(self, timeout_s: float) -> None:
        self.aborted += 1


def test_a_transaction_cut_short_lists_every_send_it_never_reached(tmp_path) -> None:
    settings = WorkloadSettings(txn=True)
    client = Client(0, 0, "127.0.0.1:1", settings, KeySpace("t", keys=6), random.Random(1),
                    clock=time.monotonic_ns)  # no broker: nothing is sent
    client.producer = producer = _Producer()
    # the two sends are produced, then their delivery times out before the poll; the send
    # after the poll is never reached
    invoked = [["send", 5, 91], ["send", 5, 92], ["poll"], ["send", 4, 93]]
    typ, value, error = client.invoke("txn", invoked)
    assert typ == "fail" and error == "_MSG_TIMED_OUT" and producer.aborted == 1
    assert value == [["send", 5, [None, 91]], ["send", 5, [None, 92]], ["send", 4, [None, 93]]]
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, header={"config": {}}) as w:
        w.append(0, "invoke", "txn", invoked)
        w.append(0, typ, "txn", value, error)
    assert validate(path).ops == 2


class _Consumer:
    """A consumer whose group coordinator answers ``errors`` in turn, then the committed
    offset 7 of every partition asked."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked = 0
        self.assigned: list = []

    def committed(self, tps, timeout):
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        for tp in tps:
            tp.offset = 7
        return tps

    def assign(self, tps) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in tps]


def _assigning(consumer: _Consumer) -> tuple:
    client = Client(0, 3, "127.0.0.1:1", WorkloadSettings(), KeySpace("t", keys=6),
                    random.Random(1), clock=time.monotonic_ns)
    client.consumer = consumer
    return client.invoke("assign", {"keys": [1, 4], "seek": "committed"})


def test_an_assign_asks_again_while_its_coordinator_is_loading_and_not_otherwise() -> None:
    """A coordinator still loading its ``__consumer_offsets`` partition (``NOT_COORDINATOR``
    on a fresh cluster, seen in CI) is asked again, as the Java consumer does; any other
    error ends the op ``info``, as before."""
    loading = _Consumer(KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    assert _assigning(loading)[0] == "ok" and loading.asked == 3
    assert loading.assigned == [(1, 7), (4, 7)]
    refused = _Consumer(KafkaError.GROUP_AUTHORIZATION_FAILED)
    typ, _, error = _assigning(refused)
    assert typ == "info" and "GROUP_AUTHORIZATION_FAILED" in error and refused.asked == 1
