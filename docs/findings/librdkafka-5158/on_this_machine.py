#!/usr/bin/env python3
"""How ``repro.py`` was run for the report (``../librdkafka-5158.md``): one local Kafka
cluster of three brokers (kafka-chaos's ``local`` backend: a JVM per network namespace,
``replica.lag.time.max.ms=3000`` so the paused follower leaves the ISR in seconds), and for
each confluent-kafka release asked, ``repro.py`` run by that release's virtualenv
(``workloads.pyclients``, from PyPI) with the brokers' own process ids in its shell steps:
``kill -STOP``, ``kill -KILL``, ``kill -CONT``. Dead brokers are started again between
releases; the cluster is torn down at the end, also on Ctrl-C or an error.

    .venv/bin/python docs/findings/librdkafka-5158/on_this_machine.py 2.10.0 2.16.1

Prints one line per release (its exit code: 0 validated, 1 records never delivered, 2 a
step failed) and writes each one's output and librdkafka log into ``--out``. Needs root
(network namespaces). Exit 0 when every release ran to an answer (0 or 1).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from kafka_chaos.clusters import admin, backends, dist
from kafka_chaos.workloads import pyclients

REPRO = Path(__file__).with_name("repro.py")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("versions", nargs="+", help="confluent-kafka releases, e.g. 2.16.1")
    p.add_argument("--kafka-version", default=dist.DEFAULT_KAFKA_VERSION)
    p.add_argument("--out", type=Path, default=Path("runs/repro-5158"))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="repro-5158-", dir=args.out))
    cluster = backends.get("local").create(
        dist.resolve(args.kafka_version), work, 3, 0, {"replica.lag.time.max.ms": "3000"},
        backends.BackendOptions())
    answers = {}
    try:
        cluster.setup()
        leader, follower = cluster.nodes[0], cluster.nodes[1]
        for version in args.versions:
            for node in cluster.nodes:  # the last release left the leader dead
                cluster.start(node)
                cluster.resume(node)
            admin.wait_ready(cluster.bootstrap_servers, 3, [], timeout_s=120)
            python, _ = pyclients.python(version)
            pid = {n.node_id: cluster.pid(n) for n in (leader, follower)}
            argv = [str(python), str(REPRO), "--bootstrap", cluster.bootstrap_servers,
                    "--leader", str(leader.node_id), "--follower", str(follower.node_id),
                    "--pause-follower", f"kill -STOP {pid[follower.node_id]}",
                    "--kill-leader", f"kill -KILL {pid[leader.node_id]}",
                    "--resume-follower", f"kill -CONT {pid[follower.node_id]}",
                    "--log", str(args.out / f"librdkafka-{version}.log")]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            (args.out / f"repro-{version}.txt").write_text(done.stdout + done.stderr)
            answers[version] = done.returncode
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"confluent-kafka {version}: exit {done.returncode}: {last}", flush=True)
    finally:
        cluster.teardown()
    return 0 if all(code in (0, 1) for code in answers.values()) else 2


if __name__ == "__main__":
    sys.exit(main())
