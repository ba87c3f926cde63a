#!/usr/bin/env python3
"""A consumer group resumed from a committed offset whose leader epoch predates an unclean
election that truncated the log below it: does the client validate the offset (KIP-320:
OffsetsForLeaderEpoch, then back to where that epoch ended) or fetch from it as is, never
delivering the records written at the truncated offsets after the election?

Standalone: confluent-kafka (any release from 2.6, for AdminClient.elect_leaders) and a
Kafka cluster of three brokers or more that you can pause and kill brokers of. The shell
commands that pause, kill and resume brokers are yours (--pause-follower, --kill-leader,
--resume-follower); without them the program asks you to do each step and press Enter.

    python3 repro.py --bootstrap HOST:9092 --leader 1 --follower 2 \\
        --pause-follower 'ssh b2 pkill -STOP -f kafka.Kafka' \\
        --kill-leader 'ssh b1 pkill -KILL -f kafka.Kafka' \\
        --resume-follower 'ssh b2 pkill -CONT -f kafka.Kafka'

What it does, on a new topic with one partition whose replicas are LEADER and FOLLOWER
(``min.insync.replicas=1``, unclean election off):
  1. writes PRE records with both replicas in sync; pauses FOLLOWER and waits until the ISR
     is LEADER alone (the broker's ``replica.lag.time.max.ms``, 30 s by default);
  2. writes BATCH records, which LEADER alone acknowledges (acks=all); a consumer group
     reads everything and commits the offset after the last record, with its leader epoch;
  3. kills LEADER, resumes FOLLOWER, enables unclean election on the topic and elects
     FOLLOWER (its log ends at PRE: the BATCH records are gone);
  4. writes REFILL records: they take the offsets from PRE on, the truncated ones included;
  5. a new member of the group resumes from the committed offset and reads until idle.
Exit 0 when every REFILL record was delivered (the offset was validated), 1 when some were
never delivered (the client fetched from the committed offset as is), 2 when a step could
not be done. librdkafka's own log of the resume (debug cgrp,fetch,topic) goes to
``--log FILE``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

try:
    from confluent_kafka import ElectionType
except ImportError:  # 2.12.0 has it only here; before 2.6 there is no elect_leaders
    try:
        from confluent_kafka._model import ElectionType
    except ImportError:
        ElectionType = None

PRE, BATCH, REFILL = 50, 100, 150


class StepFailed(Exception):
    """A step could not be done (no leader, no ISR shrink, an unacknowledged write...)."""


def main() -> int:
    args = _args()
    topic, group = f"repro-5158-{uuid.uuid4().hex[:8]}", f"repro-5158-{uuid.uuid4().hex[:8]}"
    print(f"confluent-kafka {confluent_kafka.__version__}, librdkafka "
          f"{confluent_kafka.libversion()[0]}; topic {topic}, group {group}")
    _admin(args.bootstrap, "create the topic", lambda admin: admin.create_topics([NewTopic(
        topic, num_partitions=1,  # with an assignment: as many as it gives
        replica_assignment=[[args.leader, args.follower]],
        config={"min.insync.replicas": "1", "unclean.leader.election.enable": "false"})])[
        topic].result(10))
    _wait(args.bootstrap, topic, lambda p: p.leader == args.leader, f"leader {args.leader}")
    _produce(args.bootstrap, topic, "pre", PRE)
    _step(args.pause_follower, f"pause broker {args.follower} (SIGSTOP)")
    _wait(args.bootstrap, topic, lambda p: list(p.isrs) == [args.leader],
          f"ISR [{args.leader}] (the follower out of sync)", args.isr_timeout)
    first = _produce(args.bootstrap, topic, "batch", BATCH)
    committed = _read_and_commit(args.bootstrap, topic, group, PRE + BATCH)
    print(f"committed offset {committed.offset} with leader epoch "
          f"{getattr(committed, 'leader_epoch', None)} (batch written at {first}..)")
    _step(args.kill_leader, f"kill broker {args.leader} (SIGKILL)")
    _step(args.resume_follower, f"resume broker {args.follower} (SIGCONT)")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true",
                    incremental_operation=AlterConfigOpType.SET)])
    _admin(args.bootstrap, "enable unclean election", lambda admin: admin.
           incremental_alter_configs([resource])[resource].result(10))
    if args.elect is not None:
        _step(args.elect.format(topic=topic), f"elect broker {args.follower} uncleanly")
    elif ElectionType is None:
        raise StepFailed("this confluent-kafka has no AdminClient.elect_leaders (2.6 or "
                         "later has): give --elect, a command that runs the election")

    def elected(admin: AdminClient) -> None:
        if _partition(admin, topic).leader != args.follower:
            if args.elect is None:  # the follower must be registered again after its pause
                admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)]
                                    ).result(10)
            raise StepFailed("not leader yet")

    _admin(args.bootstrap, f"elect broker {args.follower}", elected, timeout_s=90)
    print(f"broker {args.follower} leads after an unclean election")
    refill = _produce(args.bootstrap, topic, "refill", REFILL)
    print(f"refill written at offsets {refill}..{refill + REFILL - 1} (the batch's offsets "
          f"{first}..{first + BATCH - 1} were truncated)")
    delivered = _resume(args.bootstrap, topic, group, args.log)
    got = sorted(o for o, v in delivered.items() if v.startswith("refill-"))
    missing = [o for o in range(refill, refill + REFILL) if o not in delivered]
    print(f"resumed: first offset delivered {min(delivered) if delivered else None}; "
          f"{len(got)} of {REFILL} refill records delivered")
    if missing:
        print(f"NOT DELIVERED: offsets {missing[0]}..{missing[-1]} ({len(missing)} records "
              f"written after the election below the committed offset {committed.offset}): "
              "the committed offset was not validated against the leader epoch")
        return 1
    print("every refill record delivered: the committed offset was validated (KIP-320)")
    return 0


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--leader", type=int, required=True, help="broker id of the leader")
    p.add_argument("--follower", type=int, required=True, help="broker id of the follower")
    for hook in ("--pause-follower", "--kill-leader", "--resume-follower"):
        p.add_argument(hook, help="shell command (else the program asks you to do it)")
    p.add_argument("--elect", help="shell command for the unclean election ({topic}: the "
                   "topic), e.g. kafka-leader-election.sh ... --election-type unclean; "
                   "default: AdminClient.elect_leaders")
    p.add_argument("--isr-timeout", type=float, default=60.0, help="seconds (s)")
    p.add_argument("--log", default="librdkafka-resume.log")
    return p.parse_args()


def _step(command: str | None, what: str) -> None:
    if command is None:
        input(f"now {what}, then press Enter: ")
        return
    print(f"$ {command}    # {what}")
    if subprocess.run(command, shell=True).returncode != 0:
        raise StepFailed(f"{command!r} failed")


def _admin(bootstrap: str, what: str, act, timeout_s: float = 60.0):
    """``act(admin)`` until it returns, each try on a new client (a request sent to a paused
    broker would hold a client's connection until it times out); ``StepFailed`` after
    ``timeout_s`` seconds."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            return act(AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000}))
        except Exception as exc:  # a broker down or paused, an election not possible yet
            last = exc
            time.sleep(1)
    raise StepFailed(f"could not {what} in {timeout_s:g} s: {last}")


def _partition(admin: AdminClient, topic: str):
    p = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    if p.error is not None:
        raise StepFailed(str(p.error))
    return p


def _wait(bootstrap: str, topic: str, ok, what: str, timeout_s: float = 30.0) -> None:
    def seen(admin: AdminClient) -> None:
        if not ok(_partition(admin, topic)):
            raise StepFailed("not yet")

    _admin(bootstrap, f"see {what}", seen, timeout_s)
    print(f"  seen: {what}")


def _produce(bootstrap: str, topic: str, prefix: str, n: int) -> int:
    """Write ``prefix-0`` .. ``prefix-(n-1)`` (acks=all); returns the first one's offset."""
    offsets: list[int] = []

    def report(err, msg) -> None:
        if err is not None:
            raise StepFailed(f"a {prefix} record was not acknowledged: {err}")
        offsets.append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": False, "message.timeout.ms": 30000})
    for i in range(n):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=0, on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    if len(offsets) != n:
        raise StepFailed(f"{n - len(offsets)} {prefix} records unacknowledged")
    return min(offsets)


def _read_and_commit(bootstrap: str, topic: str, group: str, n: int) -> TopicPartition:
    """Read ``n`` records in ``group`` and commit the last one (its offset + 1 and leader
    epoch: ``commit(message=...)``); returns the committed position as the broker has it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    last, seen, deadline = None, 0, time.monotonic() + 60
    while seen < n and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            last, seen = msg, seen + 1
    if last is None or seen < n:
        raise StepFailed(f"the group read {seen} of {n} records")
    consumer.commit(message=last, asynchronous=False)
    [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    return committed


def _resume(bootstrap: str, topic: str, group: str, log: str) -> dict[int, str]:
    """A new member of ``group`` reads until 10 s pass without a record: offset -> value."""
    with open(log, "w") as out:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "debug": "cgrp,fetch,topic",
                             "logger": _Logger(out)})
        consumer.subscribe([topic])
        got: dict[int, str] = {}
        idle = time.monotonic() + 20  # the first assignment takes a few seconds
        while time.monotonic() < idle:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got[msg.offset()] = msg.value().decode()
                idle = time.monotonic() + 10
        consumer.close()
    return got


class _Logger:
    """librdkafka's log lines to a file (``logger``: an object with ``log``)."""

    def __init__(self, out) -> None:
        self.out = out

    def log(self, level, fmt, *args) -> None:
        self.out.write((fmt % args if args else fmt) + "\n")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # StepFailed, or the client's own error: no answer either way
        print(f"step failed: {type(exc).__name__}: {exc}")
        sys.exit(2)
