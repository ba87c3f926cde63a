"""The Java client driver's own contract, on a real JVM without a cluster
(``workloads/java_client.py``): what it reports when it starts, an op it cannot run, and a
JVM that dies under the workload. Its ops against Kafka: ``tests/integration/test_clients.py``."""

from __future__ import annotations

import random
import time

from kafka_chaos.clusters.dist import DEFAULT_KAFKA_VERSION
from kafka_chaos.config import RunConfig
from kafka_chaos.workloads.java_client import JavaClient, JavaDriver, build
from kafka_chaos.workloads.keys import KeySpace


def test_the_driver_reports_its_client_and_fails_loudly_when_its_jvm_dies(tmp_path):
    classes, kafka = build(DEFAULT_KAFKA_VERSION)
    assert (classes / "kafkachaos" / "Worker.class").is_file()
    assert build(DEFAULT_KAFKA_VERSION)[0] == classes  # cached by source text and version
    start = time.monotonic_ns()
    settings = RunConfig(client="java", acks="1").workload_settings()
    driver = JavaDriver("127.0.0.1:1", settings, KeySpace(keys=2), DEFAULT_KAFKA_VERSION,
                        tmp_path / "java-client.log", lambda: time.monotonic_ns() - start)
    driver.start()
    try:
        assert driver.version == kafka.version
        # acks=1 conflicts with idempotence: the producer's own default turns it off, as
        # RunConfig recorded (KIP-679)
        assert driver.idempotence is False and driver.default_idempotence is False
        assert driver.offset_ns is not None and abs(driver.offset_ns + start) < 50_000_000
        client = JavaClient(driver, 0, 0, random.Random(1))
        typ, value, error = client.invoke("nope", {"x": 1})
        assert (typ, value) == ("info", {"x": 1}) and "unknown client op" in error
        assert client.dead and driver.failed is None

        driver._proc.kill()  # what an OOM kill or a crash of the JVM looks like
        driver._proc.wait()
        for _ in range(50):
            if driver.failed:
                break
            time.sleep(0.1)
        assert driver.failed and "JVM ended" in driver.failed
        later = JavaClient(driver, 1, 0, random.Random(1))
        assert later.invoke("poll", [["poll"]])[0] == "info" and later.dead
    finally:
        driver.close()
