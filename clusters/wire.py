"""Five Kafka requests that confluent-kafka does not expose, spoken on a socket of our own.

The cluster-state monitor needs a partition's leader epoch and eligible leader replicas (ELR,
KIP-966) and the active KRaft controller; librdkafka's admin API gives leader, replicas and ISR
only. So this module speaks exactly these requests of the Kafka protocol
(https://kafka.apache.org/protocol); the bytes are kio's (Aiven's Python types of the Kafka
protocol, generated from the message schemas in Kafka's
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

Every call opens one connection (TLS and SASL authentication first when the listener asks
for them: ``SaslHandshake`` v1 and ``SaslAuthenticate`` v2, KIP-152; PLAIN, SCRAM by
scramp, RFC 5802/7677 as KIP-84 uses them, or OAUTHBEARER, KIP-255, ``clusters.oauth``),
sends one request (a size-prefixed frame: header, body), reads one reply and closes: a
monitor that polls every 500 ms cannot be left holding a socket to a node that a fault made
silent. Every call takes ``security``, how the listener is reached
(``clusters.security.ClientSecurity``; None: plaintext). Errors (refused, timeout, TLS or
SASL refused, a reply that does not parse, an error code in it) raise ``WireError``.
"""

from __future__ import annotations

import datetime
import io
import socket
import ssl
import struct
import types
from typing import Any, TypeVar

import scramp

from kafka_chaos.clusters import oauth
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.errors import WireError


CLIENT_ID = "kafka-chaos-monitor"
#: The correlation id of a connection's first request (the next ones count up).
CORRELATION_ID = 1
#: ``IncrementalAlterConfigs``: the BROKER resource type and the SET operation.
BROKER_RESOURCE, SET = 4, 0
R = TypeVar("R")


_TYPES: Any = None


def kio_types() -> Any:
    """kio's protocol types and readers (a namespace of the names below; also those of
    ``share_state``), imported on first use: kio builds its types as it is imported (0.7-1.5
    s here), every command imports this module (the nemesis and the monitor name its calls),
    and only a running cluster is spoken to."""
    global _TYPES
    if _TYPES is None:
        from kio.schema.alter_partition_reassignments.v0 import request as reassign_req
        from kio.schema.alter_partition_reassignments.v0 import response as reassign_resp
        from kio.schema.api_versions.v0.request import ApiVersionsRequest
        from kio.schema.api_versions.v0.response import ApiVersionsResponse
        from kio.schema.api_versions.v3 import request as av3_req
        from kio.schema.api_versions.v3 import response as av3_resp
        from kio.schema.describe_quorum.v1 import request as quorum_req
        from kio.schema.describe_quorum.v1 import response as quorum_resp
        from kio.schema.describe_topic_partitions.v0 import request as dtp_req
        from kio.schema.describe_topic_partitions.v0 import response as dtp_resp
        from kio.schema.incremental_alter_configs.v1 import request as configs_req
        from kio.schema.incremental_alter_configs.v1 import response as configs_resp
        from kio.schema.list_offsets.v4 import request as offsets_req
        from kio.schema.list_offsets.v4 import response as offsets_resp
        from kio.schema.sasl_authenticate.v2 import request as auth_req
        from kio.schema.sasl_authenticate.v2 import response as auth_resp
        from kio.schema.sasl_handshake.v1 import request as handshake_req
        from kio.schema.sasl_handshake.v1 import response as handshake_resp
        from kio.schema.types import BrokerId, TopicName
        from kio.serial import entity_reader, entity_writer
        from kio.serial.errors import SerialError
        from kio.static.primitive import i8, i32, i64
        from kio.schema.describe_share_group_offsets.v1 import request as dsgo_req
        from kio.schema.describe_share_group_offsets.v1 import response as dsgo_resp
        from kio.schema.find_coordinator.v6 import request as fc_req
        from kio.schema.find_coordinator.v6 import response as fc_resp
        from kio.schema.share_group_describe.v1 import request as sgd_req
        from kio.schema.share_group_describe.v1 import response as sgd_resp
        from kio.schema.types import GroupId
        from kio.serial import readers
        from kio.serial.errors import BufferUnderflow
        _TYPES = types.SimpleNamespace(reassign_req=reassign_req, reassign_resp=reassign_resp,
                                       ApiVersionsRequest=ApiVersionsRequest,
                                       ApiVersionsResponse=ApiVersionsResponse, av3_req=av3_req,
                                       av3_resp=av3_resp, quorum_req=quorum_req,
                                       quorum_resp=quorum_resp, dtp_req=dtp_req, dtp_resp=dtp_resp,
                                       configs_req=configs_req, configs_resp=configs_resp,
                                       offsets_req=offsets_req, offsets_resp=offsets_resp,
                                       auth_req=auth_req, auth_resp=auth_resp,
                                       handshake_req=handshake_req, handshake_resp=handshake_resp,
                                       BrokerId=BrokerId, TopicName=TopicName,
                                       entity_reader=entity_reader, entity_writer=entity_writer,
                                       SerialError=SerialError, i8=i8, i32=i32, i64=i64,
                                       dsgo_req=dsgo_req, dsgo_resp=dsgo_resp, fc_req=fc_req,
                                       fc_resp=fc_resp, sgd_req=sgd_req, sgd_resp=sgd_resp,
                                       GroupId=GroupId, readers=readers,
                                       BufferUnderflow=BufferUnderflow)
    return _TYPES


def frame(request: Any, correlation: int = CORRELATION_ID) -> bytes:
    """``request`` (a kio request entity) as it goes on the wire: its size (int32), then the
    request header its version needs (v1, or v2 with tagged fields for a flexible version)
    with ``CLIENT_ID`` and ``correlation``, then the body."""
    kio = kio_types()
    header_type = request.__header_schema__
    out = io.BytesIO()
    kio.entity_writer(header_type)(out, header_type(
        request_api_key=request.__api_key__, request_api_version=request.__version__,
        correlation_id=kio.i32(correlation), client_id=CLIENT_ID))
    kio.entity_writer(type(request))(out, request)
    return struct.pack(">i", out.tell()) + out.getvalue()


def parse(reply: bytes, response_type: type[R], correlation: int = CORRELATION_ID) -> R:
    """A reply (without its size prefix) as a ``response_type`` entity, after its response
    header (v0, or v1 with tagged fields). Raises ``WireError`` when it does not parse, has
    bytes left over, or answers another request than ``correlation``."""
    kio = kio_types()
    try:
        header, at = kio.entity_reader(response_type.__header_schema__)(reply, 0)
        body, size = kio.entity_reader(response_type)(reply, at)
    except (kio.SerialError, ValueError, IndexError) as exc:
        raise WireError(f"reply does not parse as {response_type.__name__}: {exc}") from None
    if header.correlation_id != correlation:
        raise WireError("reply to another request")
    if at + size != len(reply):
        raise WireError(f"{len(reply) - at - size} bytes after {response_type.__name__}")
    return body


class _Connection:
    """One socket to one node: requests in turn, each with the next correlation id."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.correlation = 0

    def ask(self, request: Any, response_type: type[R]) -> R:
        self.correlation += 1
        self.sock.sendall(frame(request, self.correlation))
        size = struct.unpack(">i", _recv(self.sock, 4))[0]
        return parse(_recv(self.sock, size), response_type, self.correlation)


#: TLS contexts by the settings that make them: the monitor connects to every node every
#: 500 ms, and loading the CA and client certificate each time would cost more than the request.
_CONTEXTS: dict[tuple, ssl.SSLContext] = {}


def tls_context(security: ClientSecurity) -> ssl.SSLContext:
    """The TLS context of ``security`` (made once, then reused): its CA (else the system's),
    its client certificate and key (mTLS), and the server's name checked unless
    ``ssl.endpoint.identification.algorithm`` is ``none`` (librdkafka's default is
    ``https``). Raises ``WireError`` for files TLS cannot load."""
    s = security.settings
    key = tuple(sorted(s.items()))
    if key in _CONTEXTS:
        return _CONTEXTS[key]
    try:
        context = ssl.create_default_context(cafile=s.get("ssl.ca.location"))
        if "ssl.certificate.location" in s:
            context.load_cert_chain(s["ssl.certificate.location"], s["ssl.key.location"],
                                    s.get("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        raise WireError(f"{security.source}: TLS files: {exc}") from None
    if s.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    return _CONTEXTS.setdefault(key, context)


def authenticate(conn: _Connection, security: ClientSecurity) -> None:
    """SASL authentication of ``conn`` with ``security``'s mechanism: username and password,
    or an OAUTHBEARER token (KIP-152: ``SaslHandshake`` v1, then ``SaslAuthenticate`` v2
    rounds). Raises ``WireError`` when the broker refuses the mechanism, the credentials or
    the token, a SCRAM server's proof does not verify, or no token can be had."""
    kio = kio_types()
    mechanism = security.sasl or ""
    shake = conn.ask(kio.handshake_req.SaslHandshakeRequest(mechanism=mechanism),
                     kio.handshake_resp.SaslHandshakeResponse)
    if shake.error_code:
        raise WireError(f"SASL mechanism {mechanism} refused (error code "
                        f"{int(shake.error_code)}); the broker offers "
                        f"{', '.join(shake.mechanisms) or 'none'}")

    user = security.settings.get("sasl.username", "the token's principal")

    def say(data: bytes) -> bytes:
        reply = conn.ask(kio.auth_req.SaslAuthenticateRequest(auth_bytes=data),
                         kio.auth_resp.SaslAuthenticateResponse)
        if reply.error_code:
            raise WireError(f"SASL {mechanism} authentication of {user} failed (error code "
                            f"{int(reply.error_code)}): {reply.error_message}")
        return reply.auth_bytes

    if mechanism == "OAUTHBEARER":
        try:
            refused = say(oauth.initial_response(security))
        except oauth.OAuthError as exc:
            raise WireError(f"SASL OAUTHBEARER: {exc}") from None
        if refused:  # RFC 7628 §3.2.2: the server's error; the client answers %x01
            try:
                say(b"\x01")
            except WireError:
                pass  # the broker ends the exchange with its error code
            raise WireError(f"SASL OAUTHBEARER token refused: {refused.decode(errors='replace')}")
        return
    password = security.settings["sasl.password"]
    if mechanism == "PLAIN":
        say(b"\0" + user.encode() + b"\0" + password.encode())
        return
    client = scramp.ScramClient([mechanism], user, password)
    try:
        server_first = say(client.get_client_first().encode()).decode()
        client.set_server_first(server_first)
        client.set_server_final(say(client.get_client_final().encode()).decode())
    except scramp.ScramException as exc:
        raise WireError(f"SASL {mechanism} of {user}: {exc}") from None


def call(endpoint: str, request: Any, response_type: type[R], timeout_s: float,
         security: ClientSecurity | None = None) -> R:
    """Send ``request`` (a kio request entity) to the broker at ``host:port`` on a connection
    of its own (TLS and SASL as ``security`` says) and read its ``response_type`` reply.
    Raises ``WireError`` naming the endpoint: the connection, TLS, SASL, or the reply."""
    return calls(endpoint, [request], response_type, timeout_s, security)[0]


def calls(endpoint: str, requests: list[Any], response_type: type[R], timeout_s: float,
          security: ClientSecurity | None = None) -> list[R]:
    """``call`` for several requests of one API in turn on one connection (one connect,
    TLS handshake and SASL exchange for all): their ``response_type`` replies, in order.
    Raises ``WireError`` as ``call``."""
    host, port = endpoint.rsplit(":", 1)
    security = security or ClientSecurity()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            raw.settimeout(timeout_s)
            sock = (tls_context(security).wrap_socket(raw, server_hostname=host)
                    if security.tls else raw)
            with sock:
                conn = _Connection(sock)
                if security.sasl:
                    authenticate(conn, security)
                return [conn.ask(request, response_type) for request in requests]
    except (OSError, struct.error) as exc:
        raise WireError(f"{endpoint}: {exc}") from exc
    except WireError as exc:
        raise WireError(f"{endpoint}: {exc}") from None


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise WireError("connection closed mid-reply")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def api_versions(endpoint: str, timeout_s: float = 5.0,
                 security: ClientSecurity | None = None) -> dict[int, tuple[int, int]]:
    """Connect (TLS and SASL as ``security`` says) and ask ``ApiVersions``: API key ->
    ``(min, max)`` version the broker serves. Raises ``WireError`` saying what failed: the
    connection, TLS, the SASL mechanism or the credentials (how an attached run refuses
    wrong secrets in one clear sentence, where librdkafka's clients only retry)."""
    kio = kio_types()
    reply = call(endpoint, kio.ApiVersionsRequest(), kio.ApiVersionsResponse, timeout_s, security)
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in reply.api_keys}


def finalized_features(endpoint: str, timeout_s: float = 5.0,
                       security: ClientSecurity | None = None) -> dict[str, int]:
    """The cluster-wide finalized feature levels the broker at ``endpoint`` reports
    (``ApiVersions`` v3, KIP-584): feature name -> level, e.g. ``group.version`` (1 once
    KIP-848's consumer group protocol is on: the default from Kafka 4.0) or
    ``share.version`` (1 once KIP-932's share groups are on: the default from 4.2). A
    feature at level 0 is absent. Raises ``WireError``."""
    kio = kio_types()
    reply = call(endpoint, kio.av3_req.ApiVersionsRequest(
        client_software_name="kafka-chaos", client_software_version="1"),
        kio.av3_resp.ApiVersionsResponse, timeout_s, security)
    if reply.error_code:
        raise WireError(f"{endpoint}: ApiVersions error code {int(reply.error_code)}")
    return {str(f.name): int(f.max_version_level) for f in reply.finalized_features}


def answers(endpoint: str, timeout_s: float = 0.3,
            security: ClientSecurity | None = None) -> bool:
    """True if the Kafka process at ``host:port`` replies to ``ApiVersions`` within
    ``timeout_s`` seconds (a paused, killed or cut-off node does not)."""
    try:
        api_versions(endpoint, timeout_s, security)
        return True
    except WireError:
        return False


def _ids(ids: Any) -> list[int] | None:
    return None if ids is None else [int(i) for i in ids]


def describe_topic_partitions(endpoint: str, topics: list[str], timeout_s: float = 1.0,
                              security: ClientSecurity | None = None
                              ) -> dict[str, list[dict[str, Any]]]:
    """``DescribeTopicPartitions`` v0 on the broker at ``endpoint`` (Kafka 3.8+).

    Returns ``{topic: [{"partition", "error", "leader", "leader_epoch", "replicas", "isr",
    "elr", "last_known_elr", "offline"}, ...]}`` (broker ids; ``elr``/``last_known_elr`` are None
    when the cluster does not keep them, i.e. without KIP-966's ELR), partitions in order.
    Raises ``WireError``.
    """
    kio = kio_types()
    request = kio.dtp_req.DescribeTopicPartitionsRequest(
        topics=tuple(kio.dtp_req.TopicRequest(name=kio.TopicName(t)) for t in topics),
        response_partition_limit=kio.i32(2000), cursor=None)
    reply = call(endpoint, request, kio.dtp_resp.DescribeTopicPartitionsResponse, timeout_s,
                  security)
    return {t.name: sorted(({
        "error": int(p.error_code), "partition": int(p.partition_index),
        "leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
        "replicas": _ids(p.replica_nodes), "isr": _ids(p.isr_nodes),
        "elr": _ids(p.eligible_leader_replicas), "last_known_elr": _ids(p.last_known_elr),
        "offline": _ids(p.offline_replicas)} for p in t.partitions),
        key=lambda p: p["partition"]) for t in reply.topics if t.name is not None}


#: ``ListOffsets`` timestamp asking for the end of the log, and its two isolation levels.
LATEST, READ_UNCOMMITTED, READ_COMMITTED = -1, 0, 1


def end_offsets(endpoint: str, partitions: dict[str, list[int]], timeout_s: float = 1.0,
                security: ClientSecurity | None = None) -> dict[tuple[str, int], dict[str, int]]:
    """The high watermark and the last stable offset of ``partitions`` (``{topic:
    [partition, ...]}``) as the broker at ``endpoint`` leads them: ``ListOffsets`` v4 for the
    latest offset, asked once ``read_committed`` (the LSO: below it no transaction is open;
    KIP-98) and then ``read_uncommitted`` (the HW), in that order on one connection, so
    that ``lso <= hw`` holds even when the log grows between the two.

    Returns ``{(topic, partition): {"hw": int, "lso": int}}`` for the partitions it
    answered both for (one it does not lead answers NOT_LEADER_OR_FOLLOWER and is left
    out). Raises ``WireError``.
    """
    kio = kio_types()
    fields = (("lso", READ_COMMITTED), ("hw", READ_UNCOMMITTED))
    topics = tuple(kio.offsets_req.ListOffsetsTopic(name=kio.TopicName(t), partitions=tuple(
        kio.offsets_req.ListOffsetsPartition(partition_index=kio.i32(p), timestamp=kio.i64(LATEST))
        for p in ps)) for t, ps in partitions.items())
    replies = calls(endpoint, [kio.offsets_req.ListOffsetsRequest(
        replica_id=kio.BrokerId(-1), isolation_level=kio.i8(isolation), topics=topics)
        for _, isolation in fields], kio.offsets_resp.ListOffsetsResponse, timeout_s, security)
    got: dict[tuple[str, int], dict[str, int]] = {}
    for (field, _), reply in zip(fields, replies):
        for t in reply.topics:
            for p in t.partitions:
                if not p.error_code and p.offset >= 0:
                    got.setdefault((str(t.name), int(p.partition_index)), {})[field] = \
                        int(p.offset)
    return {tp: v for tp, v in got.items() if len(v) == 2}


def set_cluster_default(endpoint: str, settings: dict[str, str], timeout_s: float = 10.0,
                        security: ClientSecurity | None = None) -> None:
    """``IncrementalAlterConfigs`` v1 SET of ``settings`` on the cluster-wide dynamic broker
    default (resource BROKER ``""``), sent to the broker at ``endpoint`` (it forwards to the
    controller). Raises ``WireError`` (also for an error code in the reply)."""
    kio = kio_types()
    request = kio.configs_req.IncrementalAlterConfigsRequest(resources=(
        kio.configs_req.AlterConfigsResource(
            resource_type=kio.i8(BROKER_RESOURCE), resource_name="",
            configs=tuple(kio.configs_req.AlterableConfig(name=k, config_operation=kio.i8(SET),
                                                      value=v) for k, v in settings.items())),
    ), validate_only=False)
    reply = call(endpoint, request, kio.configs_resp.IncrementalAlterConfigsResponse, timeout_s,
                  security)
    for response in reply.responses:
        if response.error_code:
            raise WireError(f"{endpoint}: IncrementalAlterConfigs error code "
                            f"{int(response.error_code)}: {response.error_message}")


def describe_quorum(endpoint: str, timeout_s: float = 1.0,
                    security: ClientSecurity | None = None) -> dict[str, Any]:
    """``DescribeQuorum`` v1 for ``__cluster_metadata``-0 on the controller (or broker) at
    ``endpoint``.

    Returns ``{"leader": node id or -1, "epoch": int, "high_watermark": int,
    "voters": {node id: log end offset}, "observers": {node id: log end offset}}`` (the
    observers: brokers, and controllers out of the voter set; an id listed twice, a
    replaced controller under its old and new directory ids, gives its highest offset).
    Raises ``WireError`` (also for an error code: the node asked is not able to answer, e.g.
    it is cut from the quorum).
    """
    kio = kio_types()
    request = kio.quorum_req.DescribeQuorumRequest(topics=(kio.quorum_req.TopicData(
        topic_name=kio.TopicName("__cluster_metadata"),
        partitions=(kio.quorum_req.PartitionData(partition_index=kio.i32(0)),)),))
    reply = call(endpoint, request, kio.quorum_resp.DescribeQuorumResponse, timeout_s, security)
    if reply.error_code:
        raise WireError(f"{endpoint}: DescribeQuorum error code {int(reply.error_code)}")
    parts = [p for t in reply.topics for p in t.partitions]
    if not parts or parts[0].error_code:
        raise WireError(f"{endpoint}: DescribeQuorum gave no partition state")
    state = parts[0]
    return {"leader": int(state.leader_id), "epoch": int(state.leader_epoch),
            "high_watermark": int(state.high_watermark),
            "voters": {int(v.replica_id): int(v.log_end_offset) for v in state.current_voters},
            "observers": _highest((int(o.replica_id), int(o.log_end_offset))
                                  for o in state.observers)}


def _highest(pairs) -> dict[int, int]:
    out: dict[int, int] = {}
    for key, offset in pairs:
        out[key] = max(offset, out.get(key, offset))
    return out


def alter_partition_reassignments(endpoint: str, topic: str, replicas: dict[int, list[int]],
                                  timeout_s: float = 10.0,
                                  security: ClientSecurity | None = None) -> None:
    """``AlterPartitionReassignments`` v0: give each partition of ``topic`` in ``replicas``
    (``{partition: [broker id, ...]}``) that replica list, sent to the broker at ``endpoint``
    (it forwards to the controller). The same set in another order moves no data and changes
    only the preferred leader. Raises ``WireError`` (also for an error code in the reply)."""
    kio = kio_types()
    request = kio.reassign_req.AlterPartitionReassignmentsRequest(
        timeout=datetime.timedelta(milliseconds=int(timeout_s * 1000)),
        topics=(kio.reassign_req.ReassignableTopic(name=kio.TopicName(topic), partitions=tuple(
            kio.reassign_req.ReassignablePartition(
                partition_index=kio.i32(p), replicas=tuple(kio.BrokerId(i) for i in ids))
            for p, ids in replicas.items())),))
    reply = call(endpoint, request, kio.reassign_resp.AlterPartitionReassignmentsResponse,
                  timeout_s + 5, security)
    if reply.error_code:
        raise WireError(f"{endpoint}: AlterPartitionReassignments error code "
                        f"{int(reply.error_code)}: {reply.error_message}")
    for t in reply.responses:
        for p in t.partitions:
            if p.error_code:
                raise WireError(f"{endpoint}: reassigning {topic}-{p.partition_index}: error "
                                f"code {int(p.error_code)}: {p.error_message}")
