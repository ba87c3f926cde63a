"""A share group's share-partition state as the admin API exposes it (KIP-932).

``DescribeShareGroupOffsets`` (API key 90, what ``kafka-share-groups.sh --describe`` and
the Java ``Admin.listShareGroupOffsets`` send) gives, per share-partition, the share-partition
start offset (SPSO: every record below it is acknowledged or archived) and, from v1, its lag.
It goes to the group's coordinator, found with ``FindCoordinator`` (key type GROUP: share
groups live on the group coordinator). librdkafka's admin client has neither request for
share groups, so they are spoken here with kio through ``wire.call``.

``persisted`` reads what the share coordinator wrote to its own log, ``__share_group_state``:
each state write of a share-partition (``ShareSnapshot``, ``ShareUpdate`` records) with the
state batches it changed, ``(first offset, last offset, delivery state, delivery count)``.
The share-partition leader writes them when records are acknowledged, released, or archived
on lock expiry, so a record archived at the delivery limit is there with its count even
when no consumer returned its last delivery to the application.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafka_chaos.clusters.admin import PASSING_ERRORS
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.clusters.wire import WireError, call, kio_types

_GROUP_KEY = 0


def coordinator(bootstrap: str, group: str, timeout_s: float = 5.0,
                security: ClientSecurity | None = None) -> str:
    """``host:port`` of ``group``'s coordinator, asked of the first broker of ``bootstrap``
    (``host:port,...``) that answers. Raises ``WireError`` when none names one."""
    kio = kio_types()
    errors = []
    for endpoint in bootstrap.split(","):
        try:
            reply = call(endpoint, kio.fc_req.FindCoordinatorRequest(
                key_type=kio.i8(_GROUP_KEY), coordinator_keys=(group,)),
                kio.fc_resp.FindCoordinatorResponse, timeout_s, security)
        except WireError as exc:
            errors.append(str(exc))
            continue
        for c in reply.coordinators:
            if c.key == group and not c.error_code:
                return f"{c.host}:{int(c.port)}"
            errors.append(f"{endpoint}: FindCoordinator error code {int(c.error_code)}")
    raise WireError(f"no coordinator of group {group}: {'; '.join(errors)[:300]}")


def start_offsets(bootstrap: str, group: str, topics: dict[str, list[int]],
                  timeout_s: float = 5.0, security: ClientSecurity | None = None
                  ) -> dict[tuple[str, int], dict[str, Any]]:
    """``{(topic, partition): {"start_offset", "leader_epoch", "lag", "error"}}`` of share
    group ``group`` for ``topics`` (topic -> partitions): the SPSO (-1 when the share-partition
    was never initialised), the lag (-1 when unknown), and the partition's error code.
    Raises ``WireError`` (no coordinator, no answer, or an error code for the group)."""
    kio = kio_types()
    request = kio.dsgo_req.DescribeShareGroupOffsetsRequest(groups=(
        kio.dsgo_req.DescribeShareGroupOffsetsRequestGroup(
            group_id=kio.GroupId(group), topics=tuple(
                kio.dsgo_req.DescribeShareGroupOffsetsRequestTopic(
                    topic_name=kio.TopicName(t), partitions=tuple(kio.i32(p) for p in ps))
                for t, ps in sorted(topics.items()))),))
    endpoint = coordinator(bootstrap, group, timeout_s, security)
    reply = call(endpoint, request, kio.dsgo_resp.DescribeShareGroupOffsetsResponse, timeout_s,
                 security)
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for g in reply.groups:
        if g.error_code:
            raise WireError(f"{endpoint}: DescribeShareGroupOffsets of {group}: error code "
                            f"{int(g.error_code)} {g.error_message or ''}".rstrip())
        for t in g.topics:
            for p in t.partitions:
                out[(str(t.topic_name), int(p.partition_index))] = {
                    "start_offset": int(p.start_offset), "leader_epoch": int(p.leader_epoch),
                    "lag": int(p.lag), "error": int(p.error_code)}
    return out


def members(bootstrap: str, group: str, timeout_s: float = 5.0,
            security: ClientSecurity | None = None) -> int:
    """How many members share group ``group`` has, as its coordinator describes it
    (``ShareGroupDescribe``, API key 77, KIP-932): a member that crashed stays until its
    share session times out (``group.share.session.timeout.ms``, 45 s by default). Raises
    ``WireError`` (no coordinator, no answer, or an error code for the group)."""
    kio = kio_types()
    endpoint = coordinator(bootstrap, group, timeout_s, security)
    reply = call(endpoint, kio.sgd_req.ShareGroupDescribeRequest(
        group_ids=(kio.GroupId(group),), include_authorized_operations=False),
        kio.sgd_resp.ShareGroupDescribeResponse, timeout_s, security)
    for g in reply.groups:
        if g.error_code:
            raise WireError(f"{endpoint}: ShareGroupDescribe of {group}: error code "
                            f"{int(g.error_code)} {g.error_message or ''}".rstrip())
        return len(g.members)
    raise WireError(f"{endpoint}: ShareGroupDescribe of {group}: no group in the answer")


STATE_TOPIC = "__share_group_state"
#: ``DeliveryState`` of a persisted state batch (Kafka's ``ShareUpdateValue.json``:
#: "0:Available,2:Acked,4:Archived").
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
_SNAPSHOT, _UPDATE = 0, 1
Batch = tuple[int, int, int, int]


def decode(key: bytes, value: bytes | None) -> tuple[str, uuid.UUID, int, list[Batch]] | None:
    """One record of ``__share_group_state``: ``(group, topic id, partition, batches)``, each
    batch ``(first_offset, last_offset, delivery_state, delivery_count)``; None for another
    record type or a tombstone. Layouts: ``ShareSnapshotKey``/``ShareUpdateKey`` (an int16
    record type, then version 0, not flexible: group string, topic uuid, partition int32);
    ``ShareSnapshotValue``/``ShareUpdateValue`` (an int16 version, then version 0, flexible),
    as Kafka 4.2+ defines them in ``share-coordinator/src/main/resources/common/message``.
    Raises ``ValueError`` on bytes that do not parse so."""
    kio = kio_types()
    try:
        kind, at = _read(kio.readers.read_int16, key, 0)
        if kind not in (_SNAPSHOT, _UPDATE) or value is None:
            return None
        group, at = _read(kio.readers.read_legacy_string, key, at)
        topic_id, at = _read(kio.readers.read_uuid, key, at)
        partition, _ = _read(kio.readers.read_int32, key, at)
        version, at = _read(kio.readers.read_int16, value, 0)
        if version != 0:
            raise ValueError(f"{STATE_TOPIC} value version {version}, not 0")
        # SnapshotEpoch, (StateEpoch), LeaderEpoch, StartOffset, (Create/WriteTimestamp)
        at += 4 + (4 if kind == _SNAPSHOT else 0) + 4 + 8 + (16 if kind == _SNAPSHOT else 0)
        n, at = _read(kio.readers.read_compact_array_length, value, at)
        batches = []
        for _ in range(n):
            first, at = _read(kio.readers.read_int64, value, at)
            last, at = _read(kio.readers.read_int64, value, at)
            state, at = _read(kio.readers.read_int8, value, at)
            count, at = _read(kio.readers.read_int16, value, at)
            at = _skip_tags(value, at)
            batches.append((int(first), int(last), int(state), int(count)))
        if _skip_tags(value, at) != len(value):
            raise ValueError("bytes after the value")
    except (IndexError, ValueError, UnicodeDecodeError, kio.BufferUnderflow) as exc:
        raise ValueError(f"a {STATE_TOPIC} record that does not parse: {exc}") from exc
    return str(group), topic_id, int(partition), batches


def _read(reader, buf: bytes, at: int) -> tuple[Any, int]:
    """kio's ``reader`` at ``at``: ``(value, the offset after it)``; raises ``ValueError``
    past the end (kio's readers return what bytes there are)."""
    value, size = reader(buf, at)
    if at + size > len(buf):
        raise ValueError("a field runs past the end")
    return value, at + size


def _skip_tags(buf: bytes, at: int) -> int:
    kio = kio_types()
    n, at = _read(kio.readers.read_unsigned_varint, buf, at)
    for _ in range(n):
        _, at = _read(kio.readers.read_unsigned_varint, buf, at)
        size, at = _read(kio.readers.read_unsigned_varint, buf, at)
        at += size
    if at > len(buf):
        raise ValueError("tagged fields run past the end")
    return at


def persisted(bootstrap: str, group: str, connection: dict[str, str],
              timeout_s: float = 30.0) -> dict[tuple[uuid.UUID, int], list[Batch]]:
    """Every state batch the share coordinator persisted for share group ``group``, in log
    order per share-partition: ``{(topic id, partition): [batch, ...]}`` (``decode``), read
    from the start of ``__share_group_state`` to its end as the read began. What the
    coordinator may have pruned from its log (below a snapshot) is not there: the caller
    gets less evidence, never wrong evidence. ``connection``: librdkafka's security
    settings; ``timeout_s`` (s) bounds each step and the read. Raises ``KafkaException``
    (the log could not be read in time) or ``ValueError`` (a record that does not parse)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-state-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "log_level": 0, **connection})
    out: dict[tuple[uuid.UUID, int], list[Batch]] = {}
    try:
        meta = consumer.list_topics(STATE_TOPIC, timeout=timeout_s).topics.get(STATE_TOPIC)
        if meta is None or meta.error is not None:
            return out  # no share-partition state was ever written
        starts, ends = {}, {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(STATE_TOPIC, p),
                                                       timeout=timeout_s)
            if high > low:
                starts[p], ends[p] = low, high
        consumer.assign([TopicPartition(STATE_TOPIC, p, starts[p]) for p in ends])
        _consume(consumer, ends, group, out, timeout_s)
    finally:
        consumer.close()
    return out


def _consume(consumer: Consumer, ends: dict[int, int], group: str,
             out: dict[tuple[uuid.UUID, int], list[Batch]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    left = dict(ends)
    while left:
        if time.monotonic() > deadline:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                            f"{STATE_TOPIC} not read to its end in time"))
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                if msg.offset() >= left.get(msg.partition(), 0):
                    left.pop(msg.partition(), None)
                continue
            if msg.error().code() not in PASSING_ERRORS:
                raise KafkaException(msg.error())
            continue
        if msg.offset() + 1 >= left.get(msg.partition(), 0):
            left.pop(msg.partition(), None)
        if msg.key() is None:
            continue
        found = decode(msg.key(), msg.value())
        if found is not None and found[0] == group:
            out.setdefault((found[1], found[2]), []).extend(found[3])
