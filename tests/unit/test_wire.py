"""``clusters/wire.py`` byte by byte: the frames it sends (spelled out from the protocol
guide, https://kafka.apache.org/protocol), and its reading of replies served over a real
socket, good and bad. The real brokers' answers are checked by every integration test (the
cluster-state monitor)."""

from __future__ import annotations

import datetime
import io
import socket
import struct
import threading
import uuid
from typing import Any

import pytest
from kio.schema.alter_partition_reassignments.v0 import response as reassign
from kio.schema.describe_quorum.v1 import response as quorum
from kio.schema.describe_topic_partitions.v0 import response as dtp
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import response as configs
from kio.schema.list_offsets.v4 import response as offsets
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import i8, i32, i64

from kafka_chaos.clusters import wire

#: ``kafka-chaos-monitor`` as a classic string: int16 length 19, then the bytes.
CLIENT = "0013" + b"kafka-chaos-monitor".hex()


def _h(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


class Broker:
    """A one-reply server on 127.0.0.1: records the frame it gets, answers ``reply`` (bytes
    after the size prefix; the prefix is added unless ``raw``)."""

    def __init__(self, reply: bytes, raw: bool = False) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.got = b""
        self.reply = reply if raw else struct.pack(">i", len(reply)) + reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
            self.got = struct.pack(">i", size) + conn.recv(size, socket.MSG_WAITALL)
            conn.sendall(self.reply)
        self.listener.close()


def reply_of(entity: Any, correlation: int = 1, extra: bytes = b"") -> bytes:
    """A response entity after its response header, as a broker writes it."""
    header_type = type(entity).__header_schema__
    out = io.BytesIO()
    entity_writer(header_type)(out, header_type(correlation_id=i32(correlation)))
    entity_writer(type(entity))(out, entity)
    return out.getvalue() + extra


def test_api_versions_v0_is_a_bare_v1_header() -> None:
    broker = Broker(_h("00000001", "0000", "00000000"))  # corr 1, no error, no api keys
    assert wire.answers(broker.endpoint, timeout_s=2)
    broker.thread.join(2)
    # size 29; api key 18, version 0, correlation 1, client id; no body
    assert broker.got == _h("0000001d", "0012 0000 00000001", CLIENT)


def test_describe_quorum_v1_frame_and_reply_byte_by_byte() -> None:
    reply = _h("00000001 00",  # response header v1: correlation 1, no tagged fields
               "0000",  # error code
               "02", "13", b"__cluster_metadata".hex(),  # 1 topic, compact string
               "02 00000000 0000",  # 1 partition: index 0, no error
               "00000002 00000007 000000000000012c",  # leader 2, epoch 7, HW 300
               "03",  # 2 current voters: id, log end offset, 2 timestamps, tags
               "00000001 000000000000012c ffffffffffffffff ffffffffffffffff 00",
               "00000002 000000000000012d ffffffffffffffff ffffffffffffffff 00",
               "03",  # 2 observers: broker 3 twice (a replaced node's old and new entry)
               "00000003 0000000000000122 ffffffffffffffff ffffffffffffffff 00",
               "00000003 0000000000000127 ffffffffffffffff ffffffffffffffff 00",
               "00 00 00")  # partition, topic, response tagged fields
    broker = Broker(reply)
    state = wire.describe_quorum(broker.endpoint, timeout_s=2)
    assert state == {"leader": 2, "epoch": 7, "high_watermark": 300,
                     "voters": {1: 300, 2: 301}, "observers": {3: 295}}
    broker.thread.join(2)
    assert broker.got == _h(
        "0000003a", "0037 0001 00000001", CLIENT, "00",  # key 55 v1, header v2's tags
        "02 13", b"__cluster_metadata".hex(), "02 00000000 00 00 00")


def test_describe_topic_partitions_reads_leader_epoch_isr_and_elr() -> None:
    def part(index: int, leader: int, elr: tuple | None) -> Any:
        return dtp.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.none, partition_index=i32(index), leader_id=BrokerId(leader),
            leader_epoch=i32(3 + index), replica_nodes=(BrokerId(1), BrokerId(2), BrokerId(3)),
            isr_nodes=(BrokerId(leader),), eligible_leader_replicas=elr,
            last_known_elr=elr and (BrokerId(2),), offline_replicas=(BrokerId(3),))
    topic = dtp.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.none, name=TopicName("kafka-chaos"), topic_id=uuid.uuid4(),
        partitions=(part(1, 2, None), part(0, 1, (BrokerId(2),))))
    broker = Broker(reply_of(dtp.DescribeTopicPartitionsResponse(
        throttle_time=datetime.timedelta(0), topics=(topic,))))
    got = wire.describe_topic_partitions(broker.endpoint, ["kafka-chaos"], timeout_s=2)
    assert got == {"kafka-chaos": [
        {"error": 0, "partition": 0, "leader": 1, "leader_epoch": 3, "replicas": [1, 2, 3],
         "isr": [1], "elr": [2], "last_known_elr": [2], "offline": [3]},
        {"error": 0, "partition": 1, "leader": 2, "leader_epoch": 4, "replicas": [1, 2, 3],
         "isr": [2], "elr": None, "last_known_elr": None, "offline": [3]}]}
    broker.thread.join(2)
    # key 75 v0; 1 topic (compact string, tags), partition limit 2000, null cursor, tags
    assert broker.got == _h("00000032", "004b 0000 00000001", CLIENT, "00",
                            "02 0c", b"kafka-chaos".hex(), "00", "000007d0 ff 00")


def test_end_offsets_asks_committed_then_uncommitted_and_keeps_what_both_answered() -> None:
    def answer(hw_or_lso: int, correlation: int) -> bytes:
        parts = (offsets.ListOffsetsPartitionResponse(
                     partition_index=i32(0), error_code=ErrorCode.none, timestamp=i64(-1),
                     offset=i64(hw_or_lso), leader_epoch=i32(2)),
                 offsets.ListOffsetsPartitionResponse(  # led by another broker
                     partition_index=i32(1), error_code=ErrorCode.not_leader_or_follower))
        return reply_of(offsets.ListOffsetsResponse(
            throttle_time=datetime.timedelta(0), topics=(offsets.ListOffsetsTopicResponse(
                name=TopicName("kafka-chaos"), partitions=parts),)), correlation)

    served = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:  # both requests on one connection
        conn, _ = listener.accept()
        with conn:
            for reply in (answer(790, 1), answer(812, 2)):
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                served.append(conn.recv(size, socket.MSG_WAITALL))
                conn.sendall(struct.pack(">i", len(reply)) + reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
    got = wire.end_offsets(endpoint, {"kafka-chaos": [0, 1]}, timeout_s=2)
    thread.join(2)
    listener.close()
    assert got == {("kafka-chaos", 0): {"hw": 812, "lso": 790}}
    # key 2 v4; replica -1; isolation 1 then 0; one topic; partitions 0 and 1, each with
    # current leader epoch -1 and timestamp -1 (the latest offset)
    body = ("ffffffff {} 00000001 000b" + b"kafka-chaos".hex() + " 00000002"
            + " 00000000 ffffffff ffffffffffffffff 00000001 ffffffff ffffffffffffffff")
    assert served == [_h(f"0002 0004 0000000{n}", CLIENT, body.format(level))
                      for n, level in ((1, "01"), (2, "00"))]


def test_cluster_defaults_and_reassignments_send_what_kafka_expects_and_raise_on_errors(
        ) -> None:
    ok = configs.AlterConfigsResourceResponse(
        error_code=ErrorCode.none, error_message=None, resource_type=i8(4), resource_name="")
    broker = Broker(reply_of(configs.IncrementalAlterConfigsResponse(
        throttle_time=datetime.timedelta(0), responses=(ok,))))
    wire.set_cluster_default(broker.endpoint, {"unclean.leader.election.enable": "true"}, 2)
    broker.thread.join(2)
    name, value = b"unclean.leader.election.enable", b"true"
    assert broker.got == _h(
        "0000004b", "002c 0001 00000001", CLIENT, "00",  # key 44 v1
        "02 04 01",  # 1 resource: BROKER (4), name "" (compact: length 0 + 1)
        "02", f"{len(name) + 1:02x}", name.hex(), "00",  # 1 config: name, SET (0)
        f"{len(value) + 1:02x}", value.hex(), "00 00",  # value, config and resource tags
        "00 00")  # validate_only false, request tags
    refused = configs.AlterConfigsResourceResponse(
        error_code=ErrorCode.invalid_config, error_message="no such config",
        resource_type=i8(4), resource_name="")
    broker = Broker(reply_of(configs.IncrementalAlterConfigsResponse(
        throttle_time=datetime.timedelta(0), responses=(refused,))))
    with pytest.raises(wire.WireError, match="error code 40: no such config"):
        wire.set_cluster_default(broker.endpoint, {"x": "1"}, 2)

    moved = reassign.ReassignableTopicResponse(name=TopicName("t"), partitions=(
        reassign.ReassignablePartitionResponse(partition_index=i32(1),
                                               error_code=ErrorCode.none, error_message=None),))
    broker = Broker(reply_of(reassign.AlterPartitionReassignmentsResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
        responses=(moved,))))
    wire.alter_partition_reassignments(broker.endpoint, "t", {1: [3, 1]}, 2.5)
    broker.thread.join(2)
    assert broker.got == _h(
        "00000036", "002d 0000 00000001", CLIENT, "00",  # key 45 v0
        "000009c4",  # timeout 2500 ms
        "02 02", b"t".hex(), "02 00000001 03 00000003 00000001 00 00 00")
    stuck = reassign.ReassignableTopicResponse(name=TopicName("t"), partitions=(
        reassign.ReassignablePartitionResponse(
            partition_index=i32(1), error_code=ErrorCode.no_reassignment_in_progress,
            error_message="busy"),))
    broker = Broker(reply_of(reassign.AlterPartitionReassignmentsResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
        responses=(stuck,))))
    with pytest.raises(wire.WireError, match="reassigning t-1: error code 85: busy"):
        wire.alter_partition_reassignments(broker.endpoint, "t", {1: [3, 1]}, 2)


def _state(error: ErrorCode = ErrorCode.none) -> Any:
    return quorum.DescribeQuorumResponse(error_code=error, topics=(quorum.TopicData(
        topic_name=TopicName("__cluster_metadata"), partitions=(quorum.PartitionData(
            partition_index=i32(0), error_code=ErrorCode.none, leader_id=BrokerId(1),
            leader_epoch=i32(1), high_watermark=i64(5), current_voters=(), observers=()),)),))


@pytest.mark.parametrize("reply, raw, match", [
    (reply_of(_state(), correlation=9), False, "reply to another request"),
    (reply_of(_state())[:-3], False, "does not parse as DescribeQuorumResponse"),
    (reply_of(_state(), extra=b"\x00\x00"), False, "2 bytes after DescribeQuorumResponse"),
    (reply_of(_state(ErrorCode.not_leader_or_follower)), False, "DescribeQuorum error code 6"),
    (struct.pack(">i", 100) + b"\x00\x00\x00\x01", True, "connection closed mid-reply"),
])
def test_a_reply_that_is_not_the_answer_raises_one_error(reply: bytes, raw: bool,
                                                         match: str) -> None:
    broker = Broker(reply, raw=raw)
    with pytest.raises(wire.WireError, match=match):
        wire.describe_quorum(broker.endpoint, timeout_s=2)


def test_a_silent_or_absent_node_does_not_answer() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never replies
        port = silent.getsockname()[1]
        assert not wire.answers(f"127.0.0.1:{port}", timeout_s=0.2)
    assert not wire.answers(f"127.0.0.1:{port}", timeout_s=0.2)  # closed: refused
    with pytest.raises(wire.WireError, match=f"127.0.0.1:{port}"):
        wire.describe_quorum(f"127.0.0.1:{port}", timeout_s=0.2)
