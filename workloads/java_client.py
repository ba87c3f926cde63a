"""The Java client driver (``--client java``): the queue workload's processes on the JVM, with
``kafka-clients`` of a chosen version, writing the same history as ``workloads/client.py``.

One JVM per run (``JavaDriver``) holds every process, each on a thread of its own, and speaks
JSON lines (``workloads/java/kafkachaos/Worker.java``); a ``JavaClient`` is one process, with
the same face as ``Client``, so the workers, the generator and every checker stay as they are.
The Java classes are compiled once per source text and kafka-clients version, against the
jars of that Kafka version (``clusters.dist``), into the cache (``build``; ``setup.sh`` does
it for the default version through ``kafka-chaos fetch-kafka``).

The error table of the Java client is ``Outcomes.java`` (each row with its javadoc source);
final reads stay on librdkafka (``workloads/final_reads.py``): they are the checker's reads.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from kafka_chaos.clusters import dist
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.errors import JavaClientError
from kafka_chaos.workloads import share
from kafka_chaos.workloads.base import Completion, Driver
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings

SOURCES = Path(__file__).parent / "java" / "kafkachaos"
#: The log configurations of the driver's JVM (``log4j2.properties``, ``log4j.properties``).
CONF = Path(__file__).parent / "java" / "conf"
MAIN = "kafkachaos.Worker"


def build(version: str) -> tuple[Path, dist.KafkaDist]:
    """The compiled driver classes for kafka-clients ``version`` and the Kafka distribution
    whose jars it runs with: ``(classes directory, KafkaDist)``. Compiled with ``javac``
    (``--release 17``) at the first call for a source text and version, then cached under
    ``cache_root()/java-client/``. Raises ``DistributionError`` (no such version, no Java) or
    ``JavaClientError`` (no javac, a compile error)."""
    kafka = dist.resolve(version)
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    out = dist.cache_root() / "java-client" / f"{version}-{digest.hexdigest()[:12]}"
    if (out / "kafkachaos" / "Worker.class").exists():
        return out, kafka
    javac = shutil.which("javac")
    if javac is None:
        raise JavaClientError("javac not found: --client java compiles its driver with the "
                              "JDK (apt-get install openjdk-17-jdk-headless)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        proc = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", tmp, "-cp", kafka.classpath,
             *map(str, sources)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise JavaClientError(f"javac of the Java client driver against kafka-clients "
                                  f"{version} failed: {proc.stderr.strip()[-1500:]}")
        if not out.exists():  # else a concurrent build got there first
            Path(tmp).rename(out)
    return out, kafka


class JavaDriver(Driver):
    """The client driver of kafka-clients (``workloads.drivers``): one JVM runs every process
    of the run (``java/kafkachaos/*.java``).

    Args (``Driver``'s):
        bootstrap, settings, keys: where and how every process connects, and the key map;
            ``settings.client_version`` is the kafka-clients version (a Kafka release on
            Maven Central).
        clock: ns on the history's clock (``HistoryWriter.now_ns``). The JVM's
            ``System.nanoTime`` and Python's ``time.monotonic_ns`` read the same clock on
            Linux (CLOCK_MONOTONIC); ``start`` checks that and keeps the offset that turns a
            delivery report's time into an ``ack_ns`` (None, and no ``ack_ns``, if not).
        logs: the folder of ``java-client.log``, where the clients' own logs (warnings and
            errors, at most 2 x 20 MB) go; the JVM's stderr goes beside it (``.stderr``).

    ``version`` (kafka-clients' own), ``idempotence`` and ``default_idempotence`` (what the
    producer resolves ``enable.idempotence`` to with and without the run's setting, KIP-679)
    are known after ``start``. Raises ``JavaClientError`` when the JVM does not answer.
    """

    def __init__(self, bootstrap: str, settings: WorkloadSettings, keys: KeySpace,
                 clock: Callable[[], int], logs: Path) -> None:
        super().__init__(bootstrap, settings, keys, clock, logs)
        self.wanted, self.log = settings.client_version, logs / "java-client.log"
        self.version = self.idempotence = self.default_idempotence = None
        self.offset_ns: int | None = None
        self._ids = itertools.count()
        self._answers: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._proc: subprocess.Popen | None = None
        self._write = threading.Lock()
        self._closing = False
        #: why the driver failed while the workload ran (its JVM ended, a process could not
        #: be created): the run's verdict cannot be valid then (``judge_run``)
        self.failed: str | None = None

    def start(self) -> None:
        """Compile (if needed) and start the JVM, then send the settings (``hello``)."""
        classes, kafka = build(self.wanted)
        java = dist.check_java()
        # the clients' logs through log4j2 (4.x) or reload4j (3.x) into a bounded file; the
        # JVM's own stderr (a crash report) beside it
        with open(self.log.with_suffix(".stderr"), "ab") as err:
            self._proc = subprocess.Popen(
                [java, "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 *(f"-D{k}={v}" for k, v in sorted(self.s.java_system.items())),
                 f"-Dkafka_chaos.log={self.log}",
                 f"-Dlog4j2.configurationFile={CONF / 'log4j2.properties'}",
                 f"-Dlog4j.configuration=file:{CONF / 'log4j.properties'}",
                 "-cp", f"{classes}:{kafka.classpath}", MAIN],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        threading.Thread(target=self._read, daemon=True, name="java-client").start()
        before = time.monotonic_ns()
        hello = self.call({"op": "hello", "producer": self.s.java_producer_config(
            self.bootstrap), "consumer": self.s.java_consumer_config(self.bootstrap),
            "share": self.s.java_share_config(self.bootstrap),
            "keys": [list(self.keys.tp(k)) for k in range(self.keys.keys)],
            "settings": {"txn": self.s.txn, "retries": self.s.retries,
                         "poll_timeout_ms": self.s.poll_timeout_ms,
                         "request_timeout_ms": self.s.request_timeout_ms,
                         "auto_offset_reset": self.s.auto_offset_reset, "ids": self.s.ids,
                         "share_acks": [list(a) for a in share.ACKS],
                         "share_linger_ms": self.s.share_lock_ms + 1000}},
            timeout_s=120)
        after = time.monotonic_ns()
        if before <= hello["nano"] <= after:  # the JVM reads Python's monotonic clock
            # read before the history's clock: the offset errs late by the time between, so
            # an ack_ns stays an upper bound of the acknowledgement (what it must be); the
            # least of a few pairs: a thread switch between two reads (up to 5 ms) would put
            # an ack_ns after its op's completion
            self.offset_ns = min(-time.monotonic_ns() + self.clock() for _ in range(5))
        self.version = hello["version"]
        self.idempotence = hello["idempotence"]
        self.default_idempotence = hello["default_idempotence"]

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            answer = orjson.loads(line)
            with self._cond:
                self._answers[answer["id"]] = answer
                self._cond.notify_all()
        with self._cond:  # the JVM ended: nobody waits for an answer that cannot come
            self._answers[-1] = {}
            self._cond.notify_all()
        if not self._closing and self.failed is None:
            self.failed = f"the Java client JVM ended (log: {self.log})"

    def call(self, request: dict, timeout_s: float) -> dict:
        """Send ``request`` and wait up to ``timeout_s`` for its answer. Raises
        ``JavaClientError`` when the JVM ended, did not answer in time, or failed it."""
        i = next(self._ids)
        line = orjson.dumps({**request, "id": i}) + b"\n"
        assert self._proc is not None and self._proc.stdin is not None
        try:
            with self._write:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise JavaClientError(f"the Java client JVM has ended (log: {self.log})") from exc
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while i not in self._answers:
                if -1 in self._answers:
                    raise JavaClientError(f"the Java client JVM has ended (log: {self.log})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise JavaClientError(f"the Java client JVM did not answer "
                                          f"{request['op']} in {timeout_s:.0f} s")
                self._cond.wait(left)
            answer = self._answers.pop(i)
        if "failed" in answer:
            raise JavaClientError(f"Java client {request['op']}: {answer['failed']}")
        return answer

    @classmethod
    def connection(cls, security: ClientSecurity) -> dict[str, Any]:
        """Also the same settings as kafka-clients takes them, and the JVM's system
        properties they need (``ClientSecurity.java``, ``java_system``)."""
        return {**super().connection(security), "java_connection": security.java(),
                "java_system": security.java_system()}

    def open(self, process: int, slot: int, rng: random.Random) -> "JavaClient":
        return JavaClient(self, process, slot, rng)

    def info(self) -> dict[str, Any]:
        """Also what the producer resolved ``enable.idempotence`` to with and without the
        run's setting (KIP-679), known after ``start``."""
        return {"name": "java", "version": self.version, "idempotence": self.idempotence,
                "default_idempotence": self.default_idempotence,
                **({"failed": self.failed} if self.failed else {})}

    def close(self) -> None:
        """End the JVM: stdin closes, every process left ends (``Proc.end``: share consumers
        close, the rest is dropped); killed after 20 s."""
        self._closing = True
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class JavaClient:
    """One process on the Java client, with ``workloads.client.Client``'s face: ``invoke``
    never raises, ``dead`` retires the process, ``uncommitted`` feeds the generator's
    commits, ``drop`` crashes it. ``rng`` decides which transactions are aborted on purpose
    (``abort_p``)."""

    def __init__(self, driver: JavaDriver, process: int, slot: int, rng: random.Random) -> None:
        self.driver, self.process, self.slot, self.rng = driver, process, slot, rng
        self.dead = False
        self.uncommitted: dict[str, int] = {}
        s = driver.s
        # the longest an op may take: a transaction's flushes, offsets and three commit tries
        self._timeout_s = (s.delivery_timeout_ms + 5 * s.txn_timeout_ms) / 1000 + 30
        self._unopened: str | None = None
        try:
            driver.call({"op": "open", "process": process,
                         "txn_id": s.transactional_id(process, slot)}, timeout_s=60)
        except JavaClientError as exc:  # its ops end info; the driver has failed
            self._unopened = str(exc)[:200]
            driver.failed = driver.failed or f"process {process} could not start: {exc}"

    def invoke(self, f: str, value: Any) -> Completion:
        """Run op ``f`` with invoke ``value``; return ``(type, completion value, error)``."""
        if self._unopened is not None:
            self.dead = True
            return "info", value, self._unopened
        abort = f == "txn" and self.rng.random() < self.driver.s.abort_p
        seed = self.rng.getrandbits(31) if f == "share" else 0  # its acknowledgements
        try:
            a = self.driver.call({"op": "invoke", "process": self.process, "f": f,
                                  "value": value, "abort": abort, "seed": seed},
                                 self._timeout_s)
        except JavaClientError as exc:  # indeterminate, as any exception in invoke (Jepsen)
            self.dead = True
            return "info", value, str(exc)[:200]
        self.dead = a["dead"]
        self.uncommitted = a["uncommitted"]
        return a["type"], self._ack_times(f, a["value"]), a["error"]

    def _ack_times(self, f: str, value: Any) -> Any:
        """Delivery report times (System.nanoTime) as ``ack_ns`` on the history's clock, or
        left out (``[offset, value]``) when the clocks could not be matched."""
        if f not in ("send", "txn") or not isinstance(value, list):
            return value
        offset = self.driver.offset_ns
        for mop in value:
            if mop[0] == "send" and len(mop[2]) == 3:
                if offset is None:
                    mop[2] = mop[2][:2]  # [offset, value]: the window starts at completion
                else:
                    mop[2][2] += offset
        return value

    def end(self) -> None:
        """End the process at the end of the workload: the JVM's end does it for every
        process (``JavaDriver.close``: ``Proc.end``)."""

    def drop(self) -> None:
        """Crash the process (``Proc.drop``): no consumer close where the client allows."""
        self.dead = True
        try:
            self.driver.call({"op": "drop", "process": self.process}, timeout_s=30)
        except JavaClientError:
            pass  # the JVM is gone or stuck: its processes are gone with it
