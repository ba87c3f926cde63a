"""Benchmark: a bare producer with and without the Kafka protocol proxy, same cluster.

    sudo .venv/bin/python bench/proxy_bench.py [--seconds 10] [--rounds 2] [--partitions 6]
                                               [--rate 1000]

Brings up the local 3-broker cluster (root: network namespaces), creates one topic with
replication factor 3, starts the proxy (``nemesis/proxy``) in front of it, then alternates
``--rounds`` times: one confluent-kafka producer (the workload's producer configuration:
acks=all, ``linger.ms`` 5, no idempotence) producing as fast as it can for ``--seconds``
directly, then the same through the proxy (the cluster's speed drifts from phase to phase,
so each pair is taken close together).

Each round has two phases: as fast as the producer can (throughput; its latency is then
that of a full queue), and ``--rate`` sends/s evenly spaced (latency). Prints, per phase,
acknowledged sends/s and the p50 / p99 latency of a send (from ``produce()`` to its
delivery report, ms), then per phase the proxy's share of the direct throughput and its
p50 and p99 against the direct ones over all rounds, and the proxy's counts. Tears the
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


def produce(bootstrap: str, partitions: int, seconds: float,
            rate: float | None = None) -> tuple[float, float, float]:
    """``(acknowledged sends/s, p50 ms, p99 ms)`` of one producer sending for ``seconds``,
    as fast as it can, or ``rate`` sends/s evenly spaced (then the latency is the proxy's
    and the brokers', not a full queue's)."""
    p = Producer(WorkloadSettings().producer_config(bootstrap))
    latencies: list[float] = []
    sent: dict[bytes, float] = {}

    def on_delivery(err, msg) -> None:
        if err is None:
            latencies.append(time.monotonic() - sent.pop(msg.value()))

    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        if rate is not None:
            due = start + i / rate
            while time.monotonic() < due:
                p.poll(max(0.0, min(0.001, due - time.monotonic())))
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
    ap.add_argument("--rate", type=float, default=1000.0,
                    help="sends/s of the latency phase")
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
            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            for r in range(args.rounds):
                for phase, rate in (("flat out", None), (f"{args.rate:g}/s", args.rate)):
                    for name, bootstrap in (("direct", cluster.bootstrap_servers),
                                            ("proxy", proxy.bootstrap)):
                        got = produce(bootstrap, args.partitions, args.seconds, rate)
                        results.setdefault((phase, name), []).append(got)
                        print(f"round {r + 1} {phase:>8} {name:<6}: {got[0]:>9,.0f} "
                              f"acknowledged sends/s, p50 {got[1]:6.1f} ms, "
                              f"p99 {got[2]:6.1f} ms")
            for phase in ("flat out", f"{args.rate:g}/s"):
                d, x = results[(phase, "direct")], results[(phase, "proxy")]
                mean = [[statistics.mean(v[i] for v in rows) for i in range(3)]
                        for rows in (d, x)]
                print(f"{phase}: through the proxy {mean[1][0] / mean[0][0]:.0%} of the direct "
                      f"throughput; p50 {mean[1][1]:.1f} ms against {mean[0][1]:.1f} ms, "
                      f"p99 {mean[1][2]:.1f} ms against {mean[0][2]:.1f} ms direct")
            counts = proxy.counts()
            print(f"proxy: requests {counts['requests']}, connections "
                  f"{counts['connections']}, rewritten {counts['rewritten']}")
        finally:
            if proxy is not None:
                proxy.stop()
            cluster.teardown()


if __name__ == "__main__":
    main()
