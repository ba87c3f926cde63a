"""Share-group consumers (KIP-932, "queues for Kafka"): the ``share`` op and the final drain.

A share consumer acquires records under a time-limited lock (``group.share.record.lock.
duration.ms``); each delivery carries its delivery count. The op polls once, then acknowledges
each record it got with ``accept``, ``release`` (deliver it again) or ``reject`` (never
again), chosen at random (``ACKS``), and commits those acknowledgements (``commit_sync``, one
result per partition). A ``hold`` op polls and acknowledges nothing: the process is then
dropped without closing, a crash, so its records stay locked until the lock expires or the
coordinator removes the member (KIP-932).

Completion value (``docs/history-format.md``): ``{"group", "records": [[key, offset, value,
delivery_count, ack], ...], "acks": {key: "ok" | error name}}``, ``ack`` null for a record
not acknowledged; a key absent from ``acks`` whose records were acknowledged has an unknown
result. The confluent-kafka share consumer is a preview (2.16.1): it needs
``share.acknowledgement.mode=explicit`` for ``acknowledge()`` (the implicit mode raises
``IllegalStateException``), and it cannot renew a lock.
"""

from __future__ import annotations

import random
import time
from typing import Callable

# share consumers are named where used: an older confluent-kafka release (--client-version)
# lacks them, and imports this module all the same
import confluent_kafka
from confluent_kafka import KafkaException

from kafka_chaos.history import HistoryWriter, OpType
from kafka_chaos.workloads.keys import KeySpace

#: How a delivered record is acknowledged, with its weight: releases are frequent enough
#: that some records reach ``group.share.delivery.count.limit`` (3 here) and are archived,
#: and rare enough that the drain is not held long by records at their last attempt, which
#: Kafka 4.4 was seen to deliver one per fetch (a release weight of 0.3 made a drain of
#: 52 s).
ACKS = (("accept", 0.75), ("release", 0.15), ("reject", 0.1))


def consumer_config(bootstrap: str, group: str, connection: dict[str, str],
                    timeout_ms: int) -> dict:
    """librdkafka configuration of a share consumer of ``group`` (explicit acknowledgement:
    the preview's implicit mode refuses ``acknowledge``)."""
    return {"bootstrap.servers": bootstrap, "group.id": group,
            "share.acknowledgement.mode": "explicit", "socket.timeout.ms": timeout_ms,
            "metadata.max.age.ms": 5000, "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0, **connection}


def share_op(consumer: confluent_kafka.ShareConsumer, keys: KeySpace, group: str,
             rng: random.Random | None, poll_s: float, hold: bool = False,
             records: list | None = None) -> tuple[str, dict, str | None]:
    """One ``share`` op: poll, acknowledge each record (by ``rng``, ``ACKS``; every record
    ``accept`` when ``rng`` is None, as the final drain does; none with ``hold``), commit.

    Returns ``(type, completion value, error)``: ``ok`` when the poll and the commit
    answered (a partition's refused acknowledgements are its ``acks`` error), ``info`` when
    the commit raised (its results are unknown). Each record is appended to ``records``
    (given by a caller that must name them if this raises) before it is acknowledged.
    Raises ``KafkaException`` from the poll or an acknowledgement."""
    records = [] if records is None else records
    by_key = {}
    for msg in consumer.poll(poll_s):
        if msg.error() is not None:
            continue
        key = keys.key(msg.topic(), msg.partition())
        ack = None
        if not hold:
            ack = "accept" if rng is None else rng.choices(
                [a for a, _ in ACKS], [w for _, w in ACKS])[0]
        records.append([key, msg.offset(), int(msg.value()), msg.delivery_count(), ack])
        if ack is not None:
            consumer.acknowledge(msg, getattr(confluent_kafka.AcknowledgeType, ack.upper()))
            by_key[str(key)] = None
    value = {"group": group, "records": records, "acks": {}}
    if not by_key:
        return "ok", value, None
    try:
        results = consumer.commit_sync()
    except KafkaException as exc:
        return "info", value, error_name(exc)
    for tp, err in (results or {}).items():
        k = str(keys.key(tp.topic, tp.partition))
        if k in by_key:
            err = err or tp.error
            value["acks"][k] = "ok" if err is None else error_name(err)
    return "ok", value, None


def error_name(err) -> str:
    """The Kafka error name of a commit result (a ``KafkaError``, or a ``KafkaException``
    holding one)."""
    if isinstance(err, KafkaException) and err.args:
        err = err.args[0]
    return err.name() if hasattr(err, "name") else str(err)[:80]


def drain(bootstrap: str, history: HistoryWriter, keys: KeySpace, group: str, process: int,
          lock_ms: int, connection: dict[str, str], timeout_s: float = 120.0,
          clock: Callable[[], float] = time.monotonic,
          members: Callable[[], int] | None = None) -> str:
    """After the workload: accept everything the share group still delivers, as process
    ``process``, until nothing came for the lock duration plus 5 s (a record a crashed
    member held is delivered again once its lock expires) while the drain's consumer was the
    group's only member (``members()``, asked once a second: a crashed member keeps its
    share-partitions until its session times out, and the coordinator may assign a
    share-partition to it alone; an error counts as others), or ``timeout_s``.

    Every poll is a ``share`` op with ``"final": true`` in its invoke; the last one also
    says ``"drained": true`` when the quiet stretch was reached, which is what lets the
    checker call a record that was never accepted, rejected or archived lost. Returns
    ``ok`` (drained) or ``info`` (not: the checker then judges no such record)."""
    consumer = confluent_kafka.ShareConsumer(consumer_config(bootstrap, group, connection,
                                                             3000))
    quiet_s = lock_ms / 1000 + 5
    try:
        consumer.subscribe(sorted({keys.tp(k)[0] for k in range(keys.keys)}))
        start = last = asked = clock()
        while clock() - start < timeout_s:
            if members is not None and clock() - asked >= 1.0:
                asked = clock()
                try:
                    alone = members() <= 1
                except Exception:  # not known: not alone
                    alone = False
                if not alone:
                    last = clock()  # the quiet stretch starts once the others are gone
            inv = {"group": group, "final": True}
            history.append(process, OpType.INVOKE, "share", inv)
            records: list = []
            try:
                typ, value, err = share_op(consumer, keys, group, None, 1.0, records=records)
            except KafkaException as exc:  # what it got, acknowledged with unknown outcome
                history.append(process, OpType.INFO, "share",
                               {"group": group, "records": records, "acks": {}},
                               error_name(exc))
                last = clock()  # a quiet stretch is one without records and without errors
                continue
            if value["records"]:
                last = clock()
            elif clock() - last >= quiet_s and typ == "ok":
                value["drained"] = True
                history.append(process, OpType.OK, "share", value)
                return "ok"
            history.append(process, typ, "share", value, err)
        return "info"
    finally:
        consumer.close()
