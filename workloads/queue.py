"""The queue workload (Jepsen's ``queue``): K worker threads, each running one process at a time.

A process runs one op at a time (``invoke``, then exactly one completion); all sends of one op
are in flight together. As in Jepsen, a process whose op ends ``info`` (or whose producer hit a
fatal error, or that was crashed) is retired: a new process id with new clients takes its place
on the same worker, so the ops of one process never overlap.
"""

from __future__ import annotations

import gc
import itertools
import random
import threading
import time

from confluent_kafka import KafkaException, Producer

from kafka_chaos.errors import ClientError
from kafka_chaos.history import HistoryWriter, OpType
from kafka_chaos.workloads.base import Driver, ProcessClient
from kafka_chaos.workloads.drivers import driver
from kafka_chaos.workloads.generator import Generator
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings


#: Seconds ``stop`` waits for the clients it drops.
DROP_WAIT_S = 5.0


class QueueWorkload:
    """Runs ``settings.clients`` workers until ``stop()``, recording every op in ``history``.

    ``counts`` (read for progress, approximate while running): ops by completion type, and
    ``acked``: sends acknowledged with an offset or ``ok``.
    """

    def __init__(self, bootstrap: str, history: HistoryWriter, settings: WorkloadSettings,
                 keys: KeySpace, seed: int = 0) -> None:
        if settings.rate <= 0 or settings.clients < 1:
            raise ValueError("rate must be > 0 and clients >= 1")
        self.bootstrap = bootstrap
        self.history = history
        self.s = settings
        self.keys = keys
        self._values = itertools.count()
        self._processes = itertools.count(settings.clients)  # ids of replacement processes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._rng = random.Random(seed)
        self._crash: set[int] = set()
        self._live: dict[int, ProcessClient] = {}
        self._txn_ids: set[str] = set()  # every transactional.id a process has opened
        self.counts = {"ok": 0, "fail": 0, "info": 0, "acked": 0}
        #: the client library the processes run on (``settings.client``)
        self.driver: Driver = driver(bootstrap, settings, keys, history.now_ns,
                                     history.path.parent)

    def client_info(self) -> dict:
        """``{"name", "version", ...}`` of the client library the processes run
        (``Driver.info``, complete after ``start``), with ``failed`` if it failed while the
        workload ran: the run's verdict cannot be valid then (``judge_run``)."""
        return self.driver.info()

    def start(self) -> None:
        """Start the workers (processes 0..K-1) and, with ``crash_interval_s``, the crasher.

        Raises the cyclic garbage collector's first threshold until ``stop()``: the workers
        allocate a few small lists per send (micro-ops), none of them cyclic, and collections
        triggered every 700 allocations cost a quarter of the workload's CPU at 100,000+
        sends/s (``bench/workload_bench.py``).
        """
        self.driver.start()
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(200_000, *self._gc_threshold[1:])
        for slot in range(self.s.clients):
            seed = self._rng.randrange(2**32)
            t = threading.Thread(target=self._loop, args=(slot, seed), daemon=True,
                                 name=f"client-{slot}")
            t.start()
            self._threads.append(t)
        if self.s.crash_interval_s > 0:
            threading.Thread(target=self._crasher, args=(self._rng.randrange(2**32),),
                             daemon=True, name="crasher").start()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the workers (each finishes its op in flight), then end every client (``end``:
        share consumers close, the rest is dropped; waiting at most ``DROP_WAIT_S``).

        With transactions, every ``transactional.id`` a process opened is fenced by a fresh
        producer (``init_transactions``), which aborts any transaction a dead process left
        open, so that ``read_committed`` final reads are not held back by it until
        ``transaction.timeout.ms``.
        """
        self._stop.set()
        wait = (self.s.delivery_timeout_ms + self.s.txn_timeout_ms) / 1000 + 10
        for t in self._threads:
            t.join(wait if timeout_s is None else timeout_s)
        if hasattr(self, "_gc_threshold"):
            gc.set_threshold(*self._gc_threshold)
        # each on a thread of its own, waited for a few seconds: librdkafka's KIP-848
        # consumer, destroyed without close after broker kills, was seen to take 25 s here
        # (the destroy finishes in the background; nothing of the run waits for it)
        drops = [threading.Thread(target=client.end, daemon=True, name=f"drop-{slot}")
                 for slot, client in list(self._live.items())]
        for t in drops:
            t.start()
        deadline = time.monotonic() + DROP_WAIT_S
        for t in drops:
            t.join(max(0.0, deadline - time.monotonic()))
        self.driver.close()
        if self.s.txn:
            with self._lock:
                ids = sorted(self._txn_ids)
            fences = [threading.Thread(target=self._fence, args=(txn_id,), daemon=True)
                      for txn_id in ids]
            for t in fences:
                t.start()
            deadline = time.monotonic() + self.s.txn_timeout_ms / 1000 + 5
            for t in fences:
                t.join(max(0.0, deadline - time.monotonic()))

    def next_process(self) -> int:
        """A process id never used by this workload (for replacements and final readers)."""
        with self._lock:
            return next(self._processes)

    def _fence(self, txn_id: str) -> None:
        p = Producer(self.s.producer_config(self.bootstrap, txn_id))
        try:
            p.init_transactions(self.s.txn_timeout_ms / 1000)
        except KafkaException:
            pass  # the transaction times out on the coordinator instead
        p.flush(0)

    def crash_all(self, timeout_s: float = 30.0) -> list[int]:
        """Crash every worker's process at its next op (a scenario's ``crash-clients``), as
        an application restarted on every host would: each replacement subscribes afresh and
        resumes from its group's committed offsets. Returns the slots whose worker took its
        crash as its next op within ``timeout_s`` (one in a long op may take longer; its
        crash still comes)."""
        slots = set(range(self.s.clients))
        with self._lock:
            self._crash.update(slots)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._stop.is_set():
            with self._lock:
                if not self._crash & slots:
                    break
            time.sleep(0.05)
        with self._lock:
            return sorted(slots - self._crash)

    def _crasher(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self._stop.wait(self.s.crash_interval_s):
            with self._lock:
                self._crash.add(rng.randrange(self.s.clients))

    def _start(self, process: int, slot: int, rng: random.Random) -> ProcessClient | None:
        """The clients of ``process``, or None when they cannot be made (the worker stops,
        and the driver's ``failed`` says why)."""
        try:
            client = self.driver.open(process, slot, rng)
        except ClientError as exc:
            self.driver.failed = self.driver.failed or str(exc)
            return None
        self._live[slot] = client
        if self.s.txn:
            with self._lock:
                self._txn_ids.add(self.s.transactional_id(process, slot))
        return client

    def _loop(self, slot: int, seed: int) -> None:
        rng = random.Random(seed)
        gen = Generator(self.s, self.keys, rng, self._values)
        process, fresh = slot, True
        client = self._start(process, slot, rng)
        interval_s = self.s.clients / self.s.rate
        next_at = time.monotonic() + rng.random() * interval_s
        while client is not None and not self._stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            next_at = max(next_at + interval_s, time.monotonic() - interval_s)
            with self._lock:
                crash = slot in self._crash
                self._crash.discard(slot)
            f, value = gen.next(client.uncommitted, fresh, crash)
            fresh = False
            self.history.append(process, OpType.INVOKE, f, value)
            typ, done, error = client.invoke(f, value)
            self.history.append(process, typ, f, done, error)
            self._count(typ, f, done)
            if typ == "info" or client.dead:
                client.drop()
                process, fresh = self.next_process(), True
                client = self._start(process, slot, rng)

    def _count(self, typ: str, f: str, done) -> None:
        acked = 0
        if f == "send" and typ == "ok":
            acked = len(done)
        elif f in ("send", "txn") and isinstance(done, list):
            acked = sum(1 for m in done if m[0] == "send" and isinstance(m[2], list)
                        and m[2][0] is not None and (typ == "ok" or f == "send"))
        with self._lock:
            self.counts[typ] += 1
            self.counts["acked"] += acked

