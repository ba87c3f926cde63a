"""The producer ("queue") workload: K client processes send unique integers to keys.

Each key is one partition of one topic (``partition = key``). Every send is an ``invoke`` then
exactly one completion (``ok`` with the offset from the delivery report, ``fail`` only when
``outcomes.classify`` proves it did not happen, else ``info``). As in Jepsen, a process whose op
ends ``info`` is retired: a new process id with a fresh producer takes its place, so the ops of one
process never overlap.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Producer

from history import HistoryWriter, OpType
from workloads.outcomes import classify


@dataclasses.dataclass(frozen=True)
class ProducerSettings:
    """Client settings of the workload (librdkafka names in comments).

    Attributes:
        topic: topic written to; it has ``keys`` partitions.
        keys: number of keys (= partitions).
        clients: number of concurrent client processes (K).
        rate: target sends per second over all processes (> 0).
        acks: ``"0"``, ``"1"`` or ``"all"`` (``acks``).
        idempotence: ``enable.idempotence`` (KIP-98: producer id + epoch + sequence).
        retries: ``retries``.
        max_in_flight: ``max.in.flight.requests.per.connection``.
        delivery_timeout_ms: ``delivery.timeout.ms`` (message.timeout.ms in librdkafka).
        request_timeout_ms: ``request.timeout.ms``.
    """

    topic: str = "kafka-chaos"
    keys: int = 3
    clients: int = 4
    rate: float = 100.0
    acks: str = "all"
    idempotence: bool = False
    retries: int = 2147483647
    max_in_flight: int = 5
    delivery_timeout_ms: int = 10000
    request_timeout_ms: int = 3000

    def producer_config(self, bootstrap: str) -> dict:
        """The librdkafka configuration of one process's producer."""
        return {
            "bootstrap.servers": bootstrap,
            "acks": self.acks,
            "enable.idempotence": self.idempotence,
            "retries": self.retries,
            "max.in.flight.requests.per.connection": self.max_in_flight,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "request.timeout.ms": self.request_timeout_ms,
            "linger.ms": 0,
            "socket.timeout.ms": self.request_timeout_ms,
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0,
        }


class ProducerWorkload:
    """Runs K send loops on threads until ``stop()``; records every op in ``history``.

    Thread-safety: the history writer serialises lines; values come from one shared counter so
    every value is unique in the run.
    """

    def __init__(self, bootstrap: str, history: HistoryWriter, settings: ProducerSettings,
                 seed: int = 0) -> None:
        if settings.rate <= 0 or settings.clients < 1 or settings.keys < 1:
            raise ValueError("rate must be > 0, clients and keys >= 1")
        self.bootstrap = bootstrap
        self.history = history
        self.settings = settings
        self._values = itertools.count()
        self._processes = itertools.count(settings.clients)  # ids for replacement processes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._rng = random.Random(seed)
        self.counts = {"ok": 0, "fail": 0, "info": 0}

    def start(self) -> None:
        """Start the K worker threads (processes 0..K-1)."""
        for worker in range(self.settings.clients):
            seed = self._rng.randrange(2**32)
            t = threading.Thread(target=self._loop, args=(worker, seed), daemon=True,
                                 name=f"client-{worker}")
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask the workers to stop and wait for them (each finishes its op in flight)."""
        self._stop.set()
        wait = (self.settings.delivery_timeout_ms / 1000 + 10) if timeout_s is None else timeout_s
        for t in self._threads:
            t.join(wait)

    def next_process(self) -> int:
        """A process id never used by this workload (for replacements and final readers)."""
        with self._lock:
            return next(self._processes)

    def _loop(self, process: int, seed: int) -> None:
        rng = random.Random(seed)
        s = self.settings
        producer = Producer(s.producer_config(self.bootstrap))
        interval_s = s.clients / s.rate
        next_at = time.monotonic() + rng.random() * interval_s
        while not self._stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            next_at = max(next_at + interval_s, time.monotonic() - interval_s)
            key = rng.randrange(s.keys)
            with self._lock:
                value = next(self._values)
            outcome = self._send(producer, process, key, value)
            with self._lock:
                self.counts[outcome] += 1
            if outcome == "info":
                # the old producer may still deliver the record later: purge, drop, start afresh
                producer.purge()
                producer.flush(0)
                process = self.next_process()
                producer = Producer(s.producer_config(self.bootstrap))
        producer.flush(1)

    def _send(self, producer: Producer, process: int, key: int, value: int) -> str:
        s = self.settings
        inv = {"key": key, "value": value}
        self.history.append(process, OpType.INVOKE, "send", inv)
        report: list = []
        try:
            producer.produce(s.topic, key=str(key).encode(), value=str(value).encode(),
                             partition=key, on_delivery=lambda err, msg: report.append((err, msg)))
        except BufferError:
            self.history.append(process, OpType.FAIL, "send", inv, "QUEUE_FULL")
            return "fail"
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            outcome = classify(err, s.retries)
            self.history.append(process, OpType(outcome), "send", inv, err.name())
            return outcome
        deadline = time.monotonic() + s.delivery_timeout_ms / 1000 + 5
        while not report and time.monotonic() < deadline:
            producer.poll(0.05)
        if not report:
            self.history.append(process, OpType.INFO, "send", inv, "NO_DELIVERY_REPORT")
            return "info"
        err, msg = report[0]
        if err is None:
            self.history.append(process, OpType.OK, "send",
                                {**inv, "partition": msg.partition(), "offset": msg.offset()})
            return "ok"
        outcome = classify(err, s.retries)
        self.history.append(process, OpType(outcome), "send", inv, err.name())
        return outcome
