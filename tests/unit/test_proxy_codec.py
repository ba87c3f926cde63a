"""The proxy's codec (``nemesis/proxy/codec.py``) on replies and requests built with kio:
every broker a reply names gets the proxy's address and nothing else changes, ApiVersions is
capped to what kio decodes, and a Produce request's ``acks`` is read in both header forms."""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid

import pytest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.offset_commit.v5 import request as oc5
from kio.schema.offset_commit.v9 import request as oc9
from kio.schema.metadata.v12.response import (MetadataResponse, MetadataResponseBroker,
                                              MetadataResponsePartition, MetadataResponseTopic)
from kio.schema.produce.v7.request import ProduceRequest as Produce7
from kio.schema.produce.v9.request import ProduceRequest as Produce9
from kio.schema.produce.v9 import request as p9
from kio.schema.produce.v13 import request as p13
from kio.schema.produce.v13.response import NodeEndpoint, ProduceResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i16, i32, i64

from kafka_chaos.clusters import wire
from kafka_chaos.nemesis.proxy import codec
from tests.record_batches import batch

ZERO = datetime.timedelta(0)


def _reply(body, correlation: int = 7) -> bytes:
    out = io.BytesIO()
    header = body.__header_schema__
    entity_writer(header)(out, header(correlation_id=i32(correlation)))
    entity_writer(type(body))(out, body)
    return out.getvalue()


def _decode(data: bytes, schema):
    header, at = entity_reader(schema.__header_schema__)(data, 0)
    body, size = entity_reader(schema)(data, at)
    assert at + size == len(data)
    return header, body


def _rewritten(body, api_key: int) -> tuple[object, list]:
    data = _reply(body)
    decoded, brokers = codec.broker_endpoints(data, api_key, body.__version__)
    ports = {1: 41001, 2: 41002, 3: 41003}
    out = codec.rewrite(decoded, lambda node, host, port: ("127.0.0.1", ports[node]))
    assert codec.response_correlation(out) == 7
    return _decode(out, type(body))[1], brokers


def test_metadata_brokers_get_the_proxys_addresses_and_nothing_else_changes() -> None:
    partition = MetadataResponsePartition(
        error_code=ErrorCode.none, partition_index=i32(0), leader_id=i32(2), leader_epoch=i32(4),
        replica_nodes=(i32(1), i32(2), i32(3)), isr_nodes=(i32(2), i32(3)),
        offline_replicas=())
    topic = MetadataResponseTopic(error_code=ErrorCode.none, name="t", topic_id=uuid.uuid4(),
                                  partitions=(partition,))
    body = MetadataResponse(
        throttle_time=ZERO, cluster_id="c", controller_id=i32(1), topics=(topic,),
        brokers=tuple(MetadataResponseBroker(node_id=i32(n), host=f"10.77.0.{10 + n}",
                                             port=i32(9092), rack=None) for n in (1, 2, 3)))
    got, brokers = _rewritten(body, codec.METADATA)
    assert brokers == [(1, "10.77.0.11", 9092), (2, "10.77.0.12", 9092),
                       (3, "10.77.0.13", 9092)]
    assert [(b.node_id, b.host, b.port) for b in got.brokers] == [
        (1, "127.0.0.1", 41001), (2, "127.0.0.1", 41002), (3, "127.0.0.1", 41003)]
    assert got.topics == body.topics and got.cluster_id == "c"


def test_coordinators_and_produce_leader_hints_are_rewritten() -> None:
    found = FindCoordinatorResponse(throttle_time=ZERO, coordinators=(Coordinator(
        key="g", node_id=i32(3), host="b3", port=i32(9092), error_code=ErrorCode.none,
        error_message=None),))
    got, _ = _rewritten(found, 10)
    assert (got.coordinators[0].host, got.coordinators[0].port) == ("127.0.0.1", 41003)
    # KIP-951: a Produce reply naming the new leader (a tagged field)
    produce = ProduceResponse(responses=(), throttle_time=ZERO, node_endpoints=(
        NodeEndpoint(node_id=i32(2), host="b2", port=i32(9092), rack=None),))
    got, brokers = _rewritten(produce, codec.PRODUCE)
    assert brokers == [(2, "b2", 9092)]
    assert (got.node_endpoints[0].host, got.node_endpoints[0].port) == ("127.0.0.1", 41002)


def test_api_versions_are_capped_to_what_kio_decodes() -> None:
    top, meta = codec.kio_max_version(codec.FETCH), codec.kio_max_version(codec.METADATA)
    body = ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=ZERO, api_keys=(
        ApiVersion(api_key=i16(codec.FETCH), min_version=i16(4), max_version=i16(top + 3)),
        ApiVersion(api_key=i16(codec.METADATA), min_version=i16(0), max_version=i16(meta)),
        ApiVersion(api_key=i16(28), min_version=i16(0), max_version=i16(99)),
        ApiVersion(api_key=i16(32000), min_version=i16(0), max_version=i16(9))))
    out, capped = codec.cap_api_versions(_reply(body), 3)
    assert capped == {codec.FETCH: (top + 3, top)}
    got = _decode(out, ApiVersionsResponse)[1]
    # TxnOffsetCommit (28) names no broker: the clients keep the broker's versions of it
    assert [(k.api_key, k.max_version) for k in got.api_keys] == [
        (codec.FETCH, top), (codec.METADATA, meta), (28, 99), (32000, 9)]
    # an error reply (v0 form) and a reply needing no cap come back as they were
    plain = _reply(dataclasses.replace(body, api_keys=body.api_keys[1:]))
    assert codec.cap_api_versions(plain, 3) == (plain, {})
    assert codec.cap_api_versions(b"\x00\x00\x00\x07\x00\x23", 3)[1] == {}


@pytest.mark.parametrize("request_type", [Produce7, Produce9])
@pytest.mark.parametrize("acks, txn", [(0, None), (-1, "kc-txn-3"), (1, None)])
def test_produce_acks_are_read_in_both_header_forms(request_type, acks, txn) -> None:
    request = request_type(transactional_id=txn, acks=i16(acks),
                           timeout=datetime.timedelta(seconds=30), topic_data=())
    frame = wire.frame(request, 11)[4:]
    header = codec.request_header(frame)
    assert (header.api_key, header.version, header.correlation, header.client_id) == (
        0, request_type.__version__, 11, wire.CLIENT_ID)
    assert codec.produce_acks(frame, header) == acks


def test_a_reply_that_does_not_decode_is_none() -> None:
    assert codec.broker_endpoints(b"\x00\x00\x00\x07\x01", codec.METADATA, 12) is None
    assert codec.broker_endpoints(b"\x00\x00\x00\x07", 32000, 0) is None


def test_record_values_are_read_from_plain_batches_only() -> None:
    two = batch([b"12", b"13"]) + batch([b"14", None])
    assert codec.batch_values(two) == [b"12", b"13", b"14", None]
    assert codec.batch_values(batch([b"12"], attributes=1)) is None  # gzip
    assert codec.batch_values(batch([b"12"])[:-3]) is None
    assert codec.batch_values(b"") == []


def test_the_partitions_a_produce_writes_are_named_by_topic_name_or_id() -> None:
    """Produce v9 names topics; v13 gives their ids (KIP-516), named from the Metadata
    replies the proxy saw, and an id it never saw is kept as such."""
    timeout = datetime.timedelta(seconds=30)
    v9 = p9.ProduceRequest(transactional_id=None, acks=i16(-1), timeout=timeout, topic_data=(
        p9.TopicProduceData(name="t", partition_data=(
            p9.PartitionProduceData(index=i32(0), records=Records(batch([b"7", b"8"]))),
            p9.PartitionProduceData(index=i32(2), records=None))),))
    frame = wire.frame(v9, 5)[4:]
    assert codec.produce_partitions(frame, 9, {}) == {"t-0": [b"7", b"8"], "t-2": []}
    known, unknown = uuid.uuid4(), uuid.uuid4()
    v13 = p13.ProduceRequest(transactional_id="x", acks=i16(-1), timeout=timeout, topic_data=(
        p13.TopicProduceData(topic_id=known, partition_data=(
            p13.PartitionProduceData(index=i32(1), records=None),)),
        p13.TopicProduceData(topic_id=unknown, partition_data=(
            p13.PartitionProduceData(index=i32(0), records=None),))))
    frame = wire.frame(v13, 6)[4:]
    assert list(codec.produce_partitions(frame, 13, {known: "u"})) == ["u-1",
                                                                       f"id:{unknown}-0"]
    assert codec.produce_partitions(frame[:20], 13, {}) is None
    copy = codec.with_correlation(frame, -3)
    assert codec.request_header(copy).correlation == -3 and copy[8:] == frame[8:]


def test_a_produce_reply_says_per_partition_what_the_leader_did() -> None:
    """Each partition's error code by kio's name (``none``: appended); v13 names topics by
    id, as the request did."""
    from kio.schema.produce.v9 import response as r9
    from kio.schema.produce.v13 import response as r13

    def part(module, index: int, error: ErrorCode, **more):
        return module.PartitionProduceResponse(
            index=i32(index), error_code=error, base_offset=i64(5), log_append_time=None,
            log_start_offset=i64(0), record_errors=(), error_message=None, **more)

    v9 = r9.ProduceResponse(throttle_time=ZERO, responses=(r9.TopicProduceResponse(
        name="t", partition_responses=(part(r9, 0, ErrorCode.none),
                                       part(r9, 1, ErrorCode.invalid_txn_state))),))
    assert codec.produce_errors(_reply(v9), 9, {}) == {"t-0": "none",
                                                       "t-1": "invalid_txn_state"}
    known = uuid.uuid4()
    v13 = ProduceResponse(throttle_time=ZERO, node_endpoints=(), responses=(
        r13.TopicProduceResponse(topic_id=known, partition_responses=(part(
            r13, 2, ErrorCode.invalid_producer_epoch, current_leader=r13.LeaderIdAndEpoch()),)),))
    assert codec.produce_errors(_reply(v13), 13, {known: "u"}) == {
        "u-2": "invalid_producer_epoch"}
    assert codec.produce_errors(_reply(v13)[:9], 13, {}) is None


def test_committed_offsets_lose_their_leader_epoch_and_nothing_else() -> None:
    """``forget-leader-epoch`` (KAFKA-20507): an OffsetCommit v9 comes out with every
    partition's committed_leader_epoch -1 and every other field as it was; the epochs it
    carried are returned. A version without the field (v5) or another API is left alone."""
    def part(p: int, epoch: int):
        return oc9.OffsetCommitRequestPartition(
            partition_index=i32(p), committed_offset=i64(100 + p),
            committed_leader_epoch=i32(epoch), committed_metadata="m")
    body = oc9.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=i32(4), member_id="m-1",
        topics=(oc9.OffsetCommitRequestTopic(name="t", partitions=(part(0, 3), part(1, 5))),))
    frame = wire.frame(body, 9)[4:]
    out, epochs = codec.forget_leader_epochs(frame, codec.OFFSET_COMMIT, 9)
    assert epochs == [3, 5] and codec.request_header(out).correlation == 9
    header, got = _decode(out, type(body))
    assert got == dataclasses.replace(body, topics=(oc9.OffsetCommitRequestTopic(
        name="t", partitions=(part(0, -1), part(1, -1))),))
    old = oc5.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=i32(1),
                                  member_id="m",
                                  topics=(oc5.OffsetCommitRequestTopic(name="t", partitions=(
                                      oc5.OffsetCommitRequestPartition(
                                          partition_index=i32(0), committed_offset=i64(1),
                                          committed_metadata=None),)),))
    assert codec.forget_leader_epochs(wire.frame(old, 1)[4:], codec.OFFSET_COMMIT, 5) is None
    assert codec.forget_leader_epochs(frame, codec.PRODUCE, 9) is None
    assert codec.forget_leader_epochs(frame[:30], codec.OFFSET_COMMIT, 9) is None
