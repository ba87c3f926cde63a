"""The Kafka protocol as the proxy needs it: frame headers, and the replies it rewrites.

Every request and reply is a size-prefixed frame (https://kafka.apache.org/protocol). The
proxy reads a request's header (API key, version, correlation id, client id) at fixed
offsets, and a reply's correlation id; replies that name brokers (Metadata, FindCoordinator,
DescribeCluster, and the leader hints of Produce, Fetch and the share requests, KIP-951 and
KIP-932 ``NodeEndpoints``) are decoded and encoded again with kio (Aiven's Python types of
the Kafka protocol, generated from the message schemas of Kafka's clients), with each
broker's host and port replaced by the proxy's listener for that broker. The ApiVersions
reply is capped to the versions kio knows, so that every reply the proxy must rewrite is one
it can decode.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from typing import Any, Callable

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import read_unsigned_varint
from kio.static.primitive import i16

from kafka_chaos.nemesis import records

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
OFFSET_COMMIT, TXN_OFFSET_COMMIT = 8, 28
#: The APIs whose replies to clients name brokers by address: Produce and Fetch (the new
#: leader's ``NodeEndpoints``, KIP-951), Metadata, FindCoordinator, DescribeCluster (KIP-700),
#: ShareFetch and ShareAcknowledge (``NodeEndpoints``, KIP-932). Of kio's schemas only these
#: and the KRaft quorum's own requests (Vote, DescribeQuorum, ...) hold a host and a port.
REWRITTEN = frozenset({PRODUCE, FETCH, METADATA, 10, 60, 78, 79})

#: ``(node id, host, port) -> (host, port)``: where a client is to reach that broker.
Endpoint = Callable[[int, str, int], tuple[str, int]]


@dataclasses.dataclass(frozen=True)
class RequestHeader:
    """What the proxy reads of a request: ``api_key``, ``version``, ``correlation`` id and
    ``client_id`` (request header v1/v2: the client id is an int16-sized string in both)."""

    api_key: int
    version: int
    correlation: int
    client_id: str | None


def request_header(data: bytes) -> RequestHeader:
    """The header of a request frame ``data`` (without its size). Raises ``struct.error``
    on a frame too short to hold one."""
    api_key, version, correlation, size = struct.unpack_from(">hhih", data, 0)
    client = None if size < 0 else data[10:10 + size].decode("utf-8", "replace")
    return RequestHeader(api_key, version, correlation, client)


def with_correlation(data: bytes, correlation: int) -> bytes:
    """The request frame ``data`` (without its size) under another correlation id."""
    return data[:4] + struct.pack(">i", correlation) + data[8:]


def produce_partitions(data: bytes, version: int, names: dict[Any, str]
                       ) -> dict[str, list[bytes | None] | None] | None:
    """``{"topic-p": [record value, ...]}`` of a Produce request frame (values None for a
    partition whose records are compressed or not in the v2 batch format), or None when kio
    cannot decode it. From version 13 a Produce names topics by id (KIP-516): ``names`` maps
    the ids the proxy saw in Metadata replies (``metadata_topics``) to names; an id it never
    saw is given as ``id:<uuid>``."""
    decoded = _decode(data, PRODUCE, version, load_request_schema)
    if decoded is None:
        return None
    body = decoded[2]
    out: dict[str, list[bytes | None] | None] = {}
    for topic in body.topic_data:
        name = getattr(topic, "name", None)
        if name is None:
            tid = getattr(topic, "topic_id", None)
            name = names.get(tid) or f"id:{tid}"
        for p in topic.partition_data:
            out[f"{name}-{int(p.index)}"] = batch_values(bytes(p.records or b""))
    return out


def produce_errors(data: bytes, version: int, names: dict[Any, str]
                   ) -> dict[str, str] | None:
    """``{"topic-p": error name}`` of a Produce reply frame (``"none"`` for a batch the
    leader appended; kio's ``ErrorCode`` names, e.g. ``"invalid_txn_state"``), or None when
    it does not decode; topic ids (version 13+) are named as by ``produce_partitions``."""
    decoded = _decode(data, PRODUCE, version)
    if decoded is None:
        return None
    out = {}
    for topic in decoded[2].responses:
        name = getattr(topic, "name", None)
        if name is None:
            tid = getattr(topic, "topic_id", None)
            name = names.get(tid) or f"id:{tid}"
        for p in topic.partition_responses:
            out[f"{name}-{int(p.index)}"] = _error_name(int(p.error_code))
    return out


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def batch_values(data: bytes) -> list[bytes | None] | None:
    """The values of the records in ``data``, a sequence of record batches (magic 2, the
    format of KIP-98: ``nemesis.records``); None when a batch is compressed (its records are
    then one compressed blob), of an older format, or cut short."""
    out: list[bytes | None] = []
    found = records.batches(data)
    if (found[-1].end if found else 0) != len(data):
        return None
    try:
        for batch in found:
            if not records.plain(data, batch):
                return None
            out.extend(None if v.null else data[v.start:v.end]
                       for v in records.values(data, batch))
    except ValueError:
        return None
    return out


def forget_leader_epochs(data: bytes, api_key: int, version: int
                         ) -> tuple[bytes, list[int]] | None:
    """An OffsetCommit (v6+) or TxnOffsetCommit (v2+) request frame ``data`` encoded again
    with every partition's ``committed_leader_epoch`` set to -1, as a client without KIP-320
    commits: ``(frame, [the epochs it carried, one per partition])``. None for another
    request, an older version (no such field) or one that does not decode."""
    if api_key not in (OFFSET_COMMIT, TXN_OFFSET_COMMIT):
        return None
    decoded = _decode(data, api_key, version, load_request_schema)
    if decoded is None:
        return None
    schema, header, body = decoded
    epochs: list[int] = []
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            if not hasattr(p, "committed_leader_epoch"):
                return None
            epochs.append(int(p.committed_leader_epoch))
            parts.append(dataclasses.replace(p, committed_leader_epoch=type(
                p.committed_leader_epoch)(-1)))
        topics.append(dataclasses.replace(topic, partitions=tuple(parts)))
    return _encode(schema, header, dataclasses.replace(body, topics=tuple(topics))), epochs


def metadata_topics(decoded: Any) -> dict[Any, str]:
    """``{topic id: name}`` of a decoded Metadata reply (``broker_endpoints``); empty for
    versions before topic ids (v10)."""
    return {t.topic_id: t.name for t in getattr(decoded[2], "topics", ())
            if getattr(t, "topic_id", None) is not None and t.name}


def response_correlation(data: bytes) -> int:
    """The correlation id of a reply frame ``data`` (without its size)."""
    return struct.unpack_from(">i", data, 0)[0]


def produce_acks(data: bytes, header: RequestHeader) -> int:
    """The ``acks`` of a Produce request frame: with ``acks=0`` the broker sends no reply,
    so the proxy waits for none. Versions 9+ are flexible: a tagged-field block after the
    client id, and a compact transactional id (Produce request schema)."""
    (size,) = struct.unpack_from(">h", data, 8)
    at = 10 + max(size, 0)
    if header.version >= 9:
        count, size = read_unsigned_varint(data, at)
        at += size
        for _ in range(count):  # each: tag, size, bytes
            _, size = read_unsigned_varint(data, at)
            at += size
            length, size = read_unsigned_varint(data, at)
            at += size + length
        length, size = read_unsigned_varint(data, at)
        at += size + max(length - 1, 0)
    else:
        (length,) = struct.unpack_from(">h", data, at)
        at += 2 + max(length, 0)
    return struct.unpack_from(">h", data, at)[0]


def kio_max_version(api_key: int) -> int | None:
    """The highest version of ``api_key``'s reply that kio can decode; None for an API kio
    does not know."""
    name = api_key_map.get(api_key)
    return None if name is None else max(schema_name_map[name])


def _decode(data: bytes, api_key: int, version: int,
            load: Callable[[int, int], type] = load_response_schema
            ) -> tuple[type, Any, Any] | None:
    """``(schema, header, body)`` of a whole reply frame (a request frame with ``load``
    ``load_request_schema``), or None when it does not decode to its last byte."""
    try:
        schema = load(api_key, version)
        header, at = entity_reader(schema.__header_schema__)(data, 0)
        body, size = entity_reader(schema)(data, at)
    except (KioIndexError, SerialError, ValueError, IndexError, struct.error):
        return None
    return (schema, header, body) if at + size == len(data) else None


def _encode(schema: type, header: Any, body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(schema.__header_schema__)(out, header)
    entity_writer(schema)(out, body)
    return out.getvalue()


def cap_api_versions(data: bytes, version: int) -> tuple[bytes, dict[int, tuple[int, int]]]:
    """An ApiVersions reply with the highest version of each API of ``REWRITTEN`` lowered to
    kio's (``kio_max_version``) where the broker's is higher; the other APIs keep the
    broker's versions, so the clients use what they would without the proxy. Returns
    ``(reply, {api key: (broker's max, kio's max)})``; a reply that does not decode, or that
    carries an error (the broker answers an unknown ApiVersions version in v0), comes back
    as it was."""
    decoded = _decode(data, API_VERSIONS, version)
    if decoded is None or decoded[2].error_code != 0:
        return data, {}
    schema, header, body = decoded
    capped: dict[int, tuple[int, int]] = {}
    keys = []
    for key in body.api_keys:
        top = kio_max_version(key.api_key) if key.api_key in REWRITTEN else None
        if top is not None and key.min_version <= top < key.max_version:
            capped[int(key.api_key)] = (int(key.max_version), top)
            key = dataclasses.replace(key, max_version=i16(top))
        keys.append(key)
    if not capped:
        return data, {}
    return _encode(schema, header, dataclasses.replace(body, api_keys=tuple(keys))), capped


def broker_endpoints(data: bytes, api_key: int, version: int
                     ) -> tuple[Any, list[tuple[int, str, int]]] | None:
    """The brokers a reply names: ``(decoded reply, [(node id, host, port), ...])``, or
    None when it does not decode."""
    decoded = _decode(data, api_key, version)
    if decoded is None:
        return None
    found: list[tuple[int, str, int]] = []
    _walk(decoded[2], lambda node, host, port: found.append((node, host, port)) or (host, port))
    return decoded, found


def rewrite(decoded: Any, endpoint: Endpoint) -> bytes:
    """A decoded reply (``broker_endpoints``) encoded again with every broker's host and
    port replaced by ``endpoint(node id, host, port)``."""
    schema, header, body = decoded
    return _encode(schema, header, _walk(body, endpoint))


def _walk(entity: Any, endpoint: Endpoint) -> Any:
    """``entity`` with every nested entity that has a broker id (``node_id`` or
    ``broker_id``), a ``host`` and a ``port`` given ``endpoint``'s address."""
    changes: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(entity)}
    for name in names:
        value = getattr(entity, name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            new = tuple(_walk(v, endpoint) for v in value)
            if any(a is not b for a, b in zip(new, value)):
                changes[name] = new
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            new = _walk(value, endpoint)
            if new is not value:
                changes[name] = new
    node = "node_id" if "node_id" in names else "broker_id" if "broker_id" in names else None
    if node and {"host", "port"} <= names and entity.host:
        host, port = endpoint(int(getattr(entity, node)), entity.host, int(entity.port))
        if (host, port) != (entity.host, entity.port):
            changes.update(host=host, port=type(entity.port)(port))
    return dataclasses.replace(entity, **changes) if changes else entity
