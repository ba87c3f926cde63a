"""``clusters.raft``: KIP-853's membership requests as Kafka expects them, the answers read,
and Kafka's refusals raised with the error's name (a one-reply server of ``test_wire``)."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.add_raft_voter.v0 import response as added
from kio.schema.describe_quorum.v2 import response as quorum
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0 import response as removed
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64, u16

from kafka_chaos.clusters import raft
from tests.unit.test_wire import Broker, reply_of

DIR = "JEXY6aqzQY-32P5TStzaFg"  # a directory id as meta.properties writes it


def _replica(node: int, directory: str | None, leo: int) -> quorum.ReplicaState:
    return quorum.ReplicaState(replica_id=BrokerId(node), log_end_offset=i64(leo),
                               replica_directory_id=directory and raft.to_uuid(directory))


def test_directory_ids_read_as_kafka_prints_them():
    assert raft.from_uuid(raft.to_uuid(DIR)) == DIR
    assert raft.to_uuid(DIR).bytes == __import__("base64").urlsafe_b64decode(DIR + "==")
    assert raft.from_uuid(None) is None


def test_describe_reads_voters_observers_and_endpoints():
    other = raft.from_uuid(uuid.UUID(int=7))
    reply = quorum.DescribeQuorumResponse(
        error_code=ErrorCode.none, error_message=None, topics=(quorum.TopicData(
            topic_name=TopicName("__cluster_metadata"), partitions=(quorum.PartitionData(
                partition_index=i32(0), error_code=ErrorCode.none, error_message=None,
                leader_id=BrokerId(2), leader_epoch=i32(4), high_watermark=i64(-1),
                current_voters=(_replica(2, DIR, 40), _replica(3, other, 38)),
                observers=(_replica(1, other, 20), _replica(1, DIR, 39))),)),),
        nodes=(quorum.Node(node_id=BrokerId(2), listeners=(quorum.Listener(
            name="CONTROLLER", host="10.0.0.2", port=u16(9093)),)),))
    broker = Broker(reply_of(reply))
    got = raft.describe(broker.endpoint, timeout_s=2)
    assert got == {"leader": 2, "epoch": 4, "high_watermark": -1,
                   "voters": {2: {"directory_id": DIR, "log_end_offset": 40},
                              3: {"directory_id": other, "log_end_offset": 38}},
                   "observers": [{"id": 1, "directory_id": other, "log_end_offset": 20},
                                 {"id": 1, "directory_id": DIR, "log_end_offset": 39}],
                   "endpoints": {2: "10.0.0.2:9093"}}
    broker.thread.join(2)
    assert broker.got[4:8] == bytes.fromhex("0037 0002")  # DescribeQuorum (55) v2


def test_add_and_remove_send_the_voter_and_raise_kafkas_refusal_by_name():
    ok = added.AddRaftVoterResponse(throttle_time=datetime.timedelta(0),
                                    error_code=ErrorCode.none, error_message=None)
    broker = Broker(reply_of(ok))
    raft.add_voter(broker.endpoint, 3, DIR, ("CONTROLLER", "10.0.0.3", 9093), timeout_s=2)
    broker.thread.join(2)
    got = broker.got
    assert got[4:8] == bytes.fromhex("0050 0000")  # AddRaftVoter (80) v0
    assert raft.to_uuid(DIR).bytes in got and b"10.0.0.3" in got and b"CONTROLLER" in got
    assert bytes.fromhex("00000003") + raft.to_uuid(DIR).bytes in got  # voter id, directory
    refused = added.AddRaftVoterResponse(throttle_time=datetime.timedelta(0),
                                         error_code=ErrorCode.request_timed_out,
                                         error_message="not caught up")
    broker = Broker(reply_of(refused))
    with pytest.raises(raft.WireError,
                       match="AddRaftVoter 3: error 7 REQUEST_TIMED_OUT: not caught up"):
        raft.add_voter(broker.endpoint, 3, DIR, ("CONTROLLER", "h", 1), timeout_s=2)

    broker = Broker(reply_of(removed.RemoveRaftVoterResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None)))
    raft.remove_voter(broker.endpoint, 2, DIR, timeout_s=2)
    broker.thread.join(2)
    assert broker.got[4:8] == bytes.fromhex("0051 0000")  # RemoveRaftVoter (81) v0
    assert bytes.fromhex("00000002") + raft.to_uuid(DIR).bytes in broker.got
    broker = Broker(reply_of(removed.RemoveRaftVoterResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.duplicate_voter,
        error_message=None)))
    with pytest.raises(raft.WireError, match="RemoveRaftVoter 2: error 126 DUPLICATE_VOTER$"):
        raft.remove_voter(broker.endpoint, 2, DIR, timeout_s=2)
