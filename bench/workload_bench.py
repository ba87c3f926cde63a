"""Benchmark: acknowledged sends/s the workload records, against a bare producer, same cluster.

    sudo .venv/bin/python bench/workload_bench.py [--seconds 10] [--clients 4] [--mops 5000]

Brings up the local 3-broker cluster (root: network namespaces), creates one topic of
``--partitions`` partitions with replication factor 3, then measures, one after the other:

1. bare: one confluent-kafka producer (the workload's producer configuration: acks=all,
   ``linger.ms`` 5, no idempotence) producing as fast as it can, a trivial delivery callback;
2. bare + JSON: the same, its delivery callback writing one JSON line per ack to a file;
3. recorded: the queue workload (``workloads.queue``) with ``--clients`` processes doing only
   ``send`` ops of ``--mops`` sends each, no rate limit, every op recorded in a history file
   and in its columnar copy (``history.columnar``, written on a thread of its own as in a run);
4. recorded without the columnar copy (the JSON Lines file alone): the copy thread's cost;
5. bare again, since the cluster's speed drifts from phase to phase.

Prints the cluster-ready time (start of the first broker to a topic whose partitions all have
a leader and a full ISR), acknowledged sends/s of each phase and the recorded rate as a share
of the faster bare run. Tears the cluster down in any case.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from kafka_chaos.clusters import admin, dist  # noqa: E402
from kafka_chaos.clusters.local import LocalCluster  # noqa: E402
from kafka_chaos.history import HistoryWriter  # noqa: E402
from kafka_chaos.workloads.keys import KeySpace  # noqa: E402
from kafka_chaos.workloads.queue import QueueWorkload  # noqa: E402
from kafka_chaos.workloads.settings import WorkloadSettings  # noqa: E402


def bare(bootstrap: str, settings: WorkloadSettings, keys: KeySpace, seconds: float,
         out: Path | None) -> float:
    """Acknowledged sends/s of one producer sending for ``seconds``; with ``out``, its delivery
    callback appends one JSON line per acknowledgement there."""
    p = Producer(settings.producer_config(bootstrap))
    acked = [0]
    fh = open(out, "wb") if out else None

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[0] += 1
            if fh is not None:
                fh.write(orjson.dumps({"partition": msg.partition(), "offset": msg.offset(),
                                       "value": int(msg.value())}) + b"\n")

    topic = keys.topic_name(0)
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, str(i).encode(), partition=i % keys.keys, on_delivery=on_delivery)
            i += 1
        except BufferError:
            p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(30)
    elapsed = time.monotonic() - start
    if fh is not None:
        fh.close()
    return acked[0] / elapsed


def recorded(bootstrap: str, settings: WorkloadSettings, keys: KeySpace, seconds: float,
             path: Path, columnar: str | None = "background") -> tuple[float, dict]:
    """Acknowledged sends/s the queue workload records in ``seconds``; also its counts.
    ``columnar``: ``HistoryWriter``'s argument (None: no columnar copy)."""
    with HistoryWriter(path, header={"config": {}}, columnar=columnar) as history:
        workload = QueueWorkload(bootstrap, history, settings, keys, seed=1)
        start = time.monotonic()
        workload.start()
        time.sleep(seconds)
        workload.stop()
        elapsed = time.monotonic() - start
    return workload.counts["acked"] / elapsed, dict(workload.counts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--mops", type=int, default=5000, help="sends per send op")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--linger-ms", type=int, default=5)
    args = ap.parse_args()

    keys = KeySpace("bench", keys=args.partitions)
    settings = WorkloadSettings(clients=args.clients, rate=1e9, mops_min=args.mops,
                                mops_max=args.mops, poll_p=0.0, sub_p=0.0,
                                linger_ms=args.linger_ms)
    with tempfile.TemporaryDirectory(prefix="kc-wbench-") as tmp:
        cluster = LocalCluster(dist.resolve(), Path(tmp) / "nodes", brokers=3)
        try:
            t0 = time.monotonic()
            cluster.setup()
            admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
            admin.create_topic(cluster.bootstrap_servers, "bench",
                               args.partitions, 3)
            admin.wait_ready(cluster.bootstrap_servers, 3, ["bench"], timeout_s=60)
            print(f"cluster ready:            {time.monotonic() - t0:>10.1f} s "
                  f"(3 brokers, KRaft combined, topic of {args.partitions} partitions)")
            b1 = bare(cluster.bootstrap_servers, settings, keys, args.seconds, None)
            print(f"bare producer:            {b1:>10,.0f} acknowledged sends/s")
            bj = bare(cluster.bootstrap_servers, settings, keys, args.seconds,
                      Path(tmp) / "acks.jsonl")
            print(f"bare + JSON line per ack: {bj:>10,.0f} acknowledged sends/s")
            r, counts = recorded(cluster.bootstrap_servers, settings, keys, args.seconds,
                                 Path(tmp) / "history.jsonl")
            size = (Path(tmp) / "history.jsonl").stat().st_size / 1e6
            print(f"recorded (workload):      {r:>10,.0f} acknowledged sends/s "
                  f"({args.clients} processes x {args.mops} sends per op; ops {counts}; "
                  f"history {size:.0f} MB)")
            rn, _ = recorded(cluster.bootstrap_servers, settings, keys, args.seconds,
                             Path(tmp) / "history-jsonl-only.jsonl", columnar=None)
            print(f"recorded, no columnar:    {rn:>10,.0f} acknowledged sends/s")
            b2 = bare(cluster.bootstrap_servers, settings, keys, args.seconds, None)
            print(f"bare producer again:      {b2:>10,.0f} acknowledged sends/s")
            # the cluster's own speed drifts between phases: compare with the faster bare run
            print(f"recorded / bare: {r / max(b1, b2):.0%} (of the faster bare run); "
                  f"with / without the columnar copy: {r / rn:.0%}")
        finally:
            cluster.teardown()


if __name__ == "__main__":
    main()
