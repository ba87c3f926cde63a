"""Final reads: after the nemesis healed, read every key's partition from its start to its end.

Each key is read by a fresh consumer (the run's ``isolation.level``) in chunks of at most
``chunk`` records, one ``poll`` op per chunk, whose poll mop states the offsets it read
completely (``{"final": true, "range": {"k": [start, end]}, "eof": bool}``,
``docs/history-format.md``; ``eof`` on the chunk that reached the partition's end) so the
checkers know what the reads covered and no history line grows with the log.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafka_chaos.clusters.admin import PASSING_ERRORS
from kafka_chaos.history import HistoryWriter, OpType
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.outcomes import bad_batch, record_value


def final_reads(bootstrap: str, history: HistoryWriter, keys: KeySpace,
                new_process: Callable[[], int], isolation_level: str = "read_committed",
                timeout_s: float = 60.0, chunk: int = 10_000,
                connection: dict[str, str] | None = None, ids: str = "kc",
                check_crcs: bool | None = None) -> dict[str, str]:
    """Read every key of ``keys`` fully; returns ``{"key": "ok"|"info"}``.

    The end is where the consumer reports end of partition (the high watermark, or the last
    stable offset under ``read_committed``) at or past the high watermark taken when the read
    starts; a key that cannot be read to there within ``timeout_s`` gets an ``info`` op for the
    chunk it was in (and its records are not recorded: a partial chunk must not count as read).
    A record whose bytes are no value a send wrote is a ``corrupt`` event of its chunk (read,
    but with no value); a batch the consumer's CRC check refused (``check_crcs``) ends the
    key's read there: its chunk completes up to it with the event, then an ``info`` op
    (``BAD_MSG``): the consumer cannot move past it (``outcomes.bad_batch``).
    Each key is read by a process id from ``new_process()``. ``connection``: librdkafka's
    security settings (``WorkloadSettings.connection``); ``ids`` prefixes the group ids;
    ``check_crcs``: librdkafka's ``check.crcs`` (None: its default, false).
    """
    results: dict[str, str] = {}
    for key in range(keys.keys):
        process = new_process()
        consumer = Consumer({"bootstrap.servers": bootstrap,
                             "group.id": f"{ids}-final-{uuid.uuid4()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "enable.partition.eof": True, "isolation.level": isolation_level,
                             "log_level": 0, **(connection or {}),
                             **({} if check_crcs is None else {"check.crcs": check_crcs})})
        try:
            results[str(key)] = _read_key(consumer, history, keys, key, process, timeout_s, chunk)
        finally:
            consumer.close()
    return results


def _read_key(consumer: Consumer, history: HistoryWriter, keys: KeySpace, key: int,
              process: int, timeout_s: float, chunk: int) -> str:
    deadline = time.monotonic() + timeout_s
    topic, partition = keys.tp(key)
    k = str(key)
    try:
        low, high = _watermarks(consumer, TopicPartition(topic, partition), deadline)
    except KafkaException as exc:
        history.append(process, OpType.INVOKE, "poll", [["poll"]])
        history.append(process, OpType.INFO, "poll", [], exc.args[0].name())
        return "info"
    consumer.assign([TopicPartition(topic, partition, low)])
    start, done = low, False
    while not done:
        history.append(process, OpType.INVOKE, "poll", [["poll"]])
        records: list[list[int]] = []
        corrupt: list[int] = []  # offsets of records that could not be read
        end, stuck = start, False
        try:
            while len(records) < chunk:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read of key {key} stuck at offset {end} of {high}")
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        end, done = msg.offset(), True
                        break
                    continue  # not yet at the high watermark (read_committed: LSO behind)
                if bad_batch(err):
                    # the position stays at a batch the CRC check refused (librdkafka): what
                    # was read before it is complete, the rest cannot be read
                    corrupt.append(msg.offset())
                    stuck = True
                    break
                if err is not None and not _passing(err):
                    raise KafkaException(err)
                if err is not None:
                    continue
                value = record_value(msg.value())
                if value is None:
                    corrupt.append(msg.offset())
                else:
                    records.append([msg.offset(), value])
                end = msg.offset() + 1
        except (KafkaException, TimeoutError) as exc:
            name = exc.args[0].name() if isinstance(exc, KafkaException) else "TIMEOUT"
            history.append(process, OpType.INFO, "poll", [], name)
            return "info"
        history.append(process, OpType.OK, "poll",
                       [*(["corrupt", {k: o}] for o in corrupt),
                        ["poll", {k: records} if records else {},
                         {"final": True, "range": {k: [start, end]}, "eof": done}]])
        if stuck:
            history.append(process, OpType.INVOKE, "poll", [["poll"]])
            history.append(process, OpType.INFO, "poll", [], "BAD_MSG")
            return "info"
        start = end
    return "ok"


def _passing(err: KafkaError) -> bool:
    """Whether a consumer error is one librdkafka recovers from by itself
    (``admin.PASSING_ERRORS``): the read goes on until its deadline."""
    return err.retriable() or err.code() in PASSING_ERRORS


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """``(low, high)`` watermarks of ``tp``, asked again while the errors pass (``_passing``)
    and ``deadline`` (``time.monotonic()``) is ahead. Raises ``KafkaException`` otherwise."""
    while True:
        try:
            return consumer.get_watermark_offsets(
                tp, timeout=max(0.5, min(10.0, deadline - time.monotonic())))
        except KafkaException as exc:
            if not _passing(exc.args[0]) or time.monotonic() + 0.5 > deadline:
                raise
            time.sleep(0.5)
