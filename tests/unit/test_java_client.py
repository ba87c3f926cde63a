"""The Java client driver's own contract, on a real JVM without a cluster
(``workloads/java_client.py``): what it reports when it starts, an op it cannot run, and a
JVM that dies under the workload. Its ops against Kafka: ``tests/integration/test_clients.py``."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from kafka_chaos.clusters.dist import DEFAULT_KAFKA_VERSION
from kafka_chaos.config import RunConfig
from kafka_chaos.workloads.java_client import JavaClient, JavaDriver, build
from kafka_chaos.workloads.settings import WorkloadSettings
from kafka_chaos.waiting import wait_until
from kafka_chaos.workloads.keys import KeySpace
from tests import procs


@pytest.mark.jvm
def test_the_driver_reports_its_client_and_fails_loudly_when_its_jvm_dies(tmp_path):
    classes, kafka = build(DEFAULT_KAFKA_VERSION)
    assert (classes / "kafkachaos" / "Worker.class").is_file()
    assert build(DEFAULT_KAFKA_VERSION)[0] == classes  # cached by source text and version
    start = time.monotonic_ns()
    settings = WorkloadSettings.from_config(RunConfig(client="java", acks="1"))
    assert settings.client_version == DEFAULT_KAFKA_VERSION
    driver = JavaDriver("127.0.0.1:1", settings, KeySpace(keys=2),
                        lambda: time.monotonic_ns() - start, tmp_path)
    driver.start()
    try:
        assert driver.version == kafka.version
        # acks=1 conflicts with idempotence: the producer's own default turns it off, as
        # RunConfig recorded (KIP-679)
        assert driver.idempotence is False and driver.default_idempotence is False
        # the JVM's monotonic clock mapped onto the history clock (which started at ``start``):
        # read just after it, so never before it, and within the time the test has run
        assert 0 <= driver.offset_ns + start <= time.monotonic_ns() - start
        client = JavaClient(driver, 0, 0, random.Random(1))
        typ, value, error = client.invoke("nope", {"x": 1})
        assert (typ, value) == ("info", {"x": 1}) and "unknown client op" in error
        assert client.dead and driver.failed is None

        [jvm] = procs.children("kafkachaos.Worker")
        os.kill(jvm, signal.SIGKILL)  # what an OOM kill or a crash of the JVM looks like
        wait_until(lambda: driver.failed, 10.0, 0.05, "the driver's failure")
        assert "JVM ended" in driver.failed
        later = JavaClient(driver, 1, 0, random.Random(1))
        assert later.invoke("poll", [["poll"]])[0] == "info" and later.dead
    finally:
        driver.close()
