"""Five Kafka requests that confluent-kafka does not expose, spoken on a plain socket.

The cluster-state monitor needs a partition's leader epoch and eligible leader replicas (ELR,
KIP-966) and the active KRaft controller; librdkafka's admin API gives leader, replicas and ISR
only. So this module encodes exactly these requests of the Kafka protocol
(https://kafka.apache.org/protocol, message schemas in Kafka's
``clients/src/main/resources/common/message``):

- ``ApiVersions`` v0 (key 18): any reply proves the process answers (a paused JVM's kernel still
  accepts TCP connections, so a connect alone proves nothing);
- ``DescribeTopicPartitions`` v0 (key 75, brokers of Kafka 3.8+, KIP-966): per partition the
  leader, leader epoch, replicas, ISR, ELR, last known ELR and offline replicas;
- ``DescribeQuorum`` v1 (key 55, KIP-595/KIP-836; controllers answer it on their listener from
  3.7, KIP-919): the quorum leader (the active controller), its epoch and high watermark, and
  each voter's log end offset;
- ``IncrementalAlterConfigs`` v1 (key 44, KIP-339) on the cluster-wide broker default, the
  BROKER resource named ``""``, which librdkafka refuses to name;
- ``AlterPartitionReassignments`` v0 (key 45, KIP-455): a partition's replica list, whose first
  replica is the preferred leader.

Every call opens one connection, sends one request, reads one reply and closes: a monitor that
polls every 500 ms cannot be left holding a socket to a node that a fault made silent. Errors
(refused, timeout, a reply that does not parse) raise ``WireError``.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka_chaos.errors import KafkaChaosError


class WireError(KafkaChaosError, RuntimeError):
    """The node did not answer the request, or the reply could not be read."""


_CLIENT_ID = b"kafka-chaos-monitor"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def _header(api_key: int, version: int, correlation: int, flexible: bool) -> bytes:
    # request header v1 (v2 adds tagged fields); the client id stays a classic int16 string
    head = struct.pack(">hhih", api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
    return head + (b"\x00" if flexible else b"")


class _Reader:
    """Reads the primitive types of the Kafka protocol from one reply."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise WireError("reply ended early")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_array(self, item) -> list | None:
        n = self.uvarint()
        return None if n == 0 else [item() for _ in range(n - 1)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _call(endpoint: str, api_key: int, version: int, body: bytes, flexible: bool,
          timeout_s: float) -> _Reader:
    host, port = endpoint.rsplit(":", 1)
    request = _header(api_key, version, 1, flexible) + body
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            reply = _Reader(_recv(sock, size))
    except (OSError, struct.error) as exc:
        raise WireError(f"{endpoint}: {exc}") from exc
    if reply.int32() != 1:
        raise WireError(f"{endpoint}: reply to another request")
    if flexible:  # response header v1; ApiVersions keeps v0 so that any client can parse it
        reply.tagged_fields()
    return reply


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise WireError("connection closed mid-reply")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def answers(endpoint: str, timeout_s: float = 0.3) -> bool:
    """True if the Kafka process at ``host:port`` replies to ``ApiVersions`` within
    ``timeout_s`` seconds (a paused, killed or cut-off node does not)."""
    try:
        _call(endpoint, 18, 0, b"", False, timeout_s)
        return True
    except WireError:
        return False


def describe_topic_partitions(endpoint: str, topics: list[str],
                              timeout_s: float = 1.0) -> dict[str, list[dict[str, Any]]]:
    """``DescribeTopicPartitions`` v0 on the broker at ``endpoint`` (Kafka 3.8+).

    Returns ``{topic: [{"partition", "error", "leader", "leader_epoch", "replicas", "isr",
    "elr", "last_known_elr", "offline"}, ...]}`` (broker ids; ``elr``/``last_known_elr`` are None
    when the cluster does not keep them, i.e. without KIP-966's ELR). Raises ``WireError``.
    """
    body = (_uvarint(len(topics) + 1)
            + b"".join(_compact_string(t) + b"\x00" for t in topics)
            + struct.pack(">i", 2000) + struct.pack(">b", -1) + b"\x00")
    r = _call(endpoint, 75, 0, body, True, timeout_s)
    r.int32()  # throttle time

    def ints() -> list[int] | None:
        return r.compact_array(r.int32)

    def partition() -> dict[str, Any]:
        p = {"error": r.int16(), "partition": r.int32(), "leader": r.int32(),
             "leader_epoch": r.int32(), "replicas": ints(), "isr": ints(), "elr": ints(),
             "last_known_elr": ints(), "offline": ints()}
        r.tagged_fields()
        return p

    def topic() -> tuple[str | None, list[dict[str, Any]]]:
        r.int16()
        name = r.compact_string()
        r.take(17)  # topic id (uuid), is_internal
        parts = r.compact_array(partition) or []
        r.int32()
        r.tagged_fields()
        return name, sorted(parts, key=lambda p: p["partition"])

    return {name: parts for name, parts in r.compact_array(topic) or [] if name is not None}


def set_cluster_default(endpoint: str, settings: dict[str, str], timeout_s: float = 10.0) -> None:
    """``IncrementalAlterConfigs`` v1 SET of ``settings`` on the cluster-wide dynamic broker
    default (resource BROKER ``""``), sent to the broker at ``endpoint`` (it forwards to the
    controller). Raises ``WireError`` (also for an error code in the reply)."""
    configs = b"".join(_compact_string(k) + struct.pack(">b", 0) + _compact_string(v) + b"\x00"
                       for k, v in settings.items())
    body = (_uvarint(2) + struct.pack(">b", 4) + _compact_string("")
            + _uvarint(len(settings) + 1) + configs + b"\x00" + b"\x00" + b"\x00")
    r = _call(endpoint, 44, 1, body, True, timeout_s)
    r.int32()  # throttle time

    def response() -> tuple[int, str | None]:
        code, message = r.int16(), r.compact_string()
        r.int8()
        r.compact_string()
        r.tagged_fields()
        return code, message

    for code, message in r.compact_array(response) or []:
        if code:
            raise WireError(f"{endpoint}: IncrementalAlterConfigs error code {code}: {message}")


def describe_quorum(endpoint: str, timeout_s: float = 1.0) -> dict[str, Any]:
    """``DescribeQuorum`` v1 for ``__cluster_metadata``-0 on the controller (or broker) at
    ``endpoint``.

    Returns ``{"leader": node id or -1, "epoch": int, "high_watermark": int,
    "voters": {node id: log end offset}}``. Raises ``WireError`` (also for an error code: the
    node asked is not able to answer, e.g. it is cut from the quorum).
    """
    body = (_uvarint(2) + _compact_string("__cluster_metadata")
            + _uvarint(2) + struct.pack(">i", 0) + b"\x00" + b"\x00" + b"\x00")
    r = _call(endpoint, 55, 1, body, True, timeout_s)
    if (code := r.int16()) != 0:
        raise WireError(f"{endpoint}: DescribeQuorum error code {code}")

    def replica() -> tuple[int, int]:
        node, leo = r.int32(), r.int64()
        r.take(16)  # last fetch and last caught-up timestamps (v1)
        r.tagged_fields()
        return node, leo

    def partition() -> dict[str, Any]:
        r.int32()
        code = r.int16()
        out = {"error": code, "leader": r.int32(), "epoch": r.int32(),
               "high_watermark": r.int64(), "voters": dict(r.compact_array(replica) or [])}
        r.compact_array(replica)  # observers (brokers)
        r.tagged_fields()
        return out

    def topic() -> list[dict[str, Any]]:
        r.compact_string()
        parts = r.compact_array(partition) or []
        r.tagged_fields()
        return parts

    parts = [p for t in r.compact_array(topic) or [] for p in t]
    if not parts or parts[0]["error"]:
        raise WireError(f"{endpoint}: DescribeQuorum gave no partition state")
    state = parts[0]
    del state["error"]
    return state


def alter_partition_reassignments(endpoint: str, topic: str, replicas: dict[int, list[int]],
                                  timeout_s: float = 10.0) -> None:
    """``AlterPartitionReassignments`` v0: give each partition of ``topic`` in ``replicas``
    (``{partition: [broker id, ...]}``) that replica list, sent to the broker at ``endpoint``
    (it forwards to the controller). The same set in another order moves no data and changes
    only the preferred leader. Raises ``WireError`` (also for an error code in the reply)."""
    parts = b"".join(struct.pack(">i", p) + _uvarint(len(ids) + 1)
                     + b"".join(struct.pack(">i", i) for i in ids) + b"\x00"
                     for p, ids in replicas.items())
    body = (struct.pack(">i", int(timeout_s * 1000)) + _uvarint(2) + _compact_string(topic)
            + _uvarint(len(replicas) + 1) + parts + b"\x00" + b"\x00")
    r = _call(endpoint, 45, 0, body, True, timeout_s + 5)
    r.int32()  # throttle time
    code, message = r.int16(), r.compact_string()
    if code:
        raise WireError(f"{endpoint}: AlterPartitionReassignments error code {code}: {message}")

    def partition() -> tuple[int, int, str | None]:
        out = (r.int32(), r.int16(), r.compact_string())
        r.tagged_fields()
        return out

    def topic_reply() -> list[tuple[int, int, str | None]]:
        r.compact_string()
        out = r.compact_array(partition) or []
        r.tagged_fields()
        return out

    for p, code, message in [x for t in r.compact_array(topic_reply) or [] for x in t]:
        if code:
            raise WireError(f"{endpoint}: reassigning {topic}-{p}: error code {code}: {message}")
