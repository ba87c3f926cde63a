"""Final reads: after the nemesis healed, read every partition from its start to its end offset.

Recorded as ``poll`` ops (``final: true``) so the checkers know which offsets the reads covered.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from history import HistoryWriter, OpType


def final_reads(bootstrap: str, history: HistoryWriter, topic: str, keys: int,
                new_process: Callable[[], int], timeout_s: float = 60.0) -> dict[int, str]:
    """Read partitions ``0..keys-1`` of ``topic`` fully, one ``poll`` op per partition.

    Each op runs as a new process id from ``new_process()`` (e.g. the workload's). The end
    offset is the high watermark when the read starts. Returns ``{key: "ok"|"info"}``; a read
    that cannot finish within ``timeout_s`` ends ``info`` with the records read so far dropped
    (a partial read would wrongly cover offsets as "read").
    """
    results: dict[int, str] = {}
    for key in range(keys):
        process = new_process()
        history.append(process, OpType.INVOKE, "poll", {"key": key, "final": True})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kc-final-{uuid.uuid4()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "enable.partition.eof": False, "log_level": 0,
                             "isolation.level": "read_uncommitted"})
        try:
            records, end = _read_partition(consumer, topic, key, timeout_s)
            history.append(process, OpType.OK, "poll",
                           {"key": key, "partition": key, "final": True, "end_offset": end,
                            "records": records})
            results[key] = "ok"
        except (KafkaException, TimeoutError) as exc:
            err = exc.args[0].name() if isinstance(exc, KafkaException) else "TIMEOUT"
            history.append(process, OpType.INFO, "poll", {"key": key, "final": True}, err)
            results[key] = "info"
        finally:
            consumer.close()
    return results


def _read_partition(consumer: Consumer, topic: str, partition: int,
                    timeout_s: float) -> tuple[list[list[int]], int]:
    deadline = time.monotonic() + timeout_s
    tp = TopicPartition(topic, partition)
    low, high = consumer.get_watermark_offsets(tp, timeout=min(10.0, timeout_s))
    records: list[list[int]] = []
    if high <= low:
        return records, high
    consumer.assign([TopicPartition(topic, partition, low)])
    position = low
    while position < high:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read of {topic}-{partition} stuck at offset {position}/{high}")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(msg.error())
        records.append([msg.offset(), int(msg.value())])
        position = msg.offset() + 1
    return records, high
