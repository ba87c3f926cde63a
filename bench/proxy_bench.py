"""Benchmark: a bare producer with and without the Kafka protocol proxy, same cluster.

    sudo .venv/bin/python bench/proxy_bench.py [--seconds 10] [--rounds 2] [--partitions 6]

Brings up the local 3-broker cluster (root: network namespaces), creates one topic with
replication factor 3, starts the proxy (``nemesis/proxy``) in front of it, then alternates
``--rounds`` times: one confluent-kafka producer (the workload's producer configuration:
acks=all, ``linger.ms`` 5, no idempotence) producing as fast as it can for ``--seconds``
directly, then the same through the proxy (the cluster's speed drifts from phase to phase,
so each pair is taken close together).

Prints, per phase, acknowledged sends/s and the p50 / p99 latency of a send (from
``produce()`` to its delivery report, ms), then the proxy's share of the direct throughput
and its p99 against the direct p99 over all rounds, and the proxy's counts. Tears the
cluster down in any case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402

from kafka_chaos.clusters import admin, dist  # noqa: E402
from kafka_chaos.clusters.local import LocalCluster  # noqa: E402
from kafka_chaos.nemesis.proxy import KafkaProxy  # noqa: E402
from kafka_chaos.workloads.settings import WorkloadSettings  # noqa: E402

TOPIC = "bench"


def produce(bootstrap: str, partitions: int, seconds: float) -> tuple[float, float, float]:
    """``(acknowledged sends/s, p50 ms, p99 ms)`` of one producer sending for ``seconds``."""
    p = Producer(WorkloadSettings().producer_config(bootstrap))
    latencies: list[float] = []
    sent: dict[bytes, float] = {}

    def on_delivery(err, msg) -> None:
        if err is None:
            latencies.append(time.monotonic() - sent.pop(msg.value()))

    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        value = str(i).encode()
        try:
            sent[value] = time.monotonic()
            p.produce(TOPIC, value, partition=i % partitions, on_delivery=on_delivery)
            i += 1
        except BufferError:
            del sent[value]
            p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(30)
    elapsed = time.monotonic() - start
    cuts = statistics.quantiles(latencies, n=100)
    return len(latencies) / elapsed, cuts[49] * 1000, cuts[98] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kc-pbench-") as tmp:
        cluster = LocalCluster(dist.resolve(), Path(tmp) / "nodes", brokers=3)
        proxy = None
        try:
            cluster.setup()
            admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
            admin.create_topic(cluster.bootstrap_servers, TOPIC, args.partitions, 3)
            admin.wait_ready(cluster.bootstrap_servers, 3, [TOPIC], timeout_s=60)
            proxy = KafkaProxy.for_cluster(cluster)
            proxy.start()
            results: dict[str, list[tuple[float, float, float]]] = {"direct": [],
                                                                    "proxy": []}
            for r in range(args.rounds):
                for name, bootstrap in (("direct", cluster.bootstrap_servers),
                                        ("proxy", proxy.bootstrap)):
                    rate, p50, p99 = produce(bootstrap, args.partitions, args.seconds)
                    results[name].append((rate, p50, p99))
                    print(f"round {r + 1} {name:<6}: {rate:>9,.0f} acknowledged sends/s, "
                          f"p50 {p50:6.1f} ms, p99 {p99:6.1f} ms")
            direct = statistics.mean(x[0] for x in results["direct"])
            proxied = statistics.mean(x[0] for x in results["proxy"])
            d99 = statistics.mean(x[2] for x in results["direct"])
            p99 = statistics.mean(x[2] for x in results["proxy"])
            print(f"through the proxy: {proxied / direct:.0%} of the direct throughput; "
                  f"p99 {p99:.1f} ms against {d99:.1f} ms direct")
            counts = proxy.counts()
            print(f"proxy: requests {counts['requests']}, connections "
                  f"{counts['connections']}, rewritten {counts['rewritten']}")
        finally:
            if proxy is not None:
                proxy.stop()
            cluster.teardown()


if __name__ == "__main__":
    main()
