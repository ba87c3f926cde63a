"""The KRaft quorum's membership (KIP-853, Kafka 3.9+), spoken on a socket of our own as
``clusters.wire`` speaks its requests (kio's types, one connection per call):

- ``DescribeQuorum`` v2 (key 55): the quorum leader, its epoch and high watermark, and every
  voter's and observer's id, directory id and log end offset;
- ``AddRaftVoter`` v0 (key 80): make an observer (a controller that fetches the metadata
  log but does not vote) a voter, under its directory id and controller endpoint;
- ``RemoveRaftVoter`` v0 (key 81): take a voter out of the voter set.

The quorum leader applies one change at a time and answers once the new voter set is
committed (KIP-853, "AddRaftVoter" and "RemoveRaftVoter"): ``REQUEST_TIMED_OUT`` when the new
voter did not catch up or a majority of the new set did not commit in time, and
``NOT_LEADER_OR_FOLLOWER`` from a controller that is not the leader. Raises ``WireError``.
"""

from __future__ import annotations

import base64
import datetime
import uuid
from typing import Any

from kafka_chaos.clusters import wire
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.errors import WireError

def _types() -> Any:
    from kio.schema.add_raft_voter.v0 import request as add_req
    from kio.schema.add_raft_voter.v0 import response as add_resp
    from kio.schema.describe_quorum.v2 import request as dq_req
    from kio.schema.describe_quorum.v2 import response as dq_resp
    from kio.schema.remove_raft_voter.v0 import request as remove_req
    from kio.schema.remove_raft_voter.v0 import response as remove_resp
    return add_req, add_resp, dq_req, dq_resp, remove_req, remove_resp


def to_uuid(directory_id: str) -> uuid.UUID:
    """A Kafka ``Uuid``'s text form (URL-safe base64 of 16 bytes, no padding) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=="))


def from_uuid(value: uuid.UUID | None) -> str | None:
    """The text form Kafka prints (``meta.properties``, the storage tool) of ``value``."""
    return None if value is None else base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def describe(endpoint: str, timeout_s: float = 2.0,
             security: ClientSecurity | None = None) -> dict[str, Any]:
    """``DescribeQuorum`` v2 asked of the controller at ``endpoint`` (it must be the leader).

    Returns ``{"leader": id | -1, "epoch": int, "high_watermark": int (-1: not yet known),
    "voters": {id: {"directory_id": str | None, "log_end_offset": int}}, "observers":
    [{"id", "directory_id", "log_end_offset"}, ...], "endpoints": {id: "host:port"}}``
    (``observers``: a list, since a replaced controller is listed under its old directory id
    too, until the leader forgets it; ``endpoints``: each voter's controller listener as the
    quorum records it). Raises ``WireError``.
    """
    kio = wire.kio_types()
    _, _, dq_req, dq_resp, _, _ = _types()
    request = dq_req.DescribeQuorumRequest(topics=(dq_req.TopicData(
        topic_name=kio.TopicName("__cluster_metadata"),
        partitions=(dq_req.PartitionData(partition_index=kio.i32(0)),)),))
    reply = wire.call(endpoint, request, dq_resp.DescribeQuorumResponse, timeout_s, security)
    if reply.error_code:
        raise WireError(f"{endpoint}: DescribeQuorum {_error(int(reply.error_code))}")
    parts = [p for t in reply.topics for p in t.partitions]
    if not parts or parts[0].error_code:
        code = int(parts[0].error_code) if parts else -1
        raise WireError(f"{endpoint}: DescribeQuorum gave no partition state ({_error(code)})")
    state = parts[0]

    def replicas(states) -> list[dict[str, Any]]:
        return [{"id": int(r.replica_id), "directory_id": from_uuid(r.replica_directory_id),
                 "log_end_offset": int(r.log_end_offset)} for r in states]

    return {"leader": int(state.leader_id), "epoch": int(state.leader_epoch),
            "high_watermark": int(state.high_watermark),
            "voters": {r.pop("id"): r for r in replicas(state.current_voters)},
            "observers": replicas(state.observers),
            "endpoints": {int(n.node_id): f"{ls[0].host}:{int(ls[0].port)}"
                          for n in reply.nodes if (ls := n.listeners)}}


def add_voter(endpoint: str, voter_id: int, directory_id: str, listener: tuple[str, str, int],
              timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
    """``AddRaftVoter`` v0 sent to the quorum leader at ``endpoint``: make ``voter_id`` (an
    observer with ``directory_id``) a voter reached at ``listener`` (``(name, host, port)``
    of its controller listener). Returns once the new voter set is committed; raises
    ``WireError`` naming Kafka's error (e.g. ``REQUEST_TIMED_OUT``: the observer had not
    caught up, or the new set's majority did not commit within ``timeout_s``)."""
    kio = wire.kio_types()
    add_req, add_resp, *_ = _types()
    from kio.static.primitive import u16
    name, host, port = listener
    request = add_req.AddRaftVoterRequest(
        cluster_id=None, timeout=datetime.timedelta(seconds=timeout_s),
        voter_id=kio.i32(voter_id), voter_directory_id=to_uuid(directory_id),
        listeners=(add_req.Listener(name=name, host=host, port=u16(port)),))
    reply = wire.call(endpoint, request, add_resp.AddRaftVoterResponse, timeout_s + 5, security)
    if reply.error_code:
        raise WireError(f"{endpoint}: AddRaftVoter {voter_id}: {_error(int(reply.error_code))}"
                        f"{': ' + reply.error_message if reply.error_message else ''}")


def remove_voter(endpoint: str, voter_id: int, directory_id: str, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
    """``RemoveRaftVoter`` v0 sent to the quorum leader at ``endpoint``: take ``voter_id``
    (under ``directory_id``) out of the voter set. Returns once the new set is committed (a
    leader removing itself then resigns: KIP-853); raises ``WireError`` naming Kafka's
    error."""
    kio = wire.kio_types()
    *_, remove_req, remove_resp = _types()
    request = remove_req.RemoveRaftVoterRequest(
        cluster_id=None, voter_id=kio.i32(voter_id), voter_directory_id=to_uuid(directory_id))
    reply = wire.call(endpoint, request, remove_resp.RemoveRaftVoterResponse, timeout_s,
                      security)
    if reply.error_code:
        raise WireError(f"{endpoint}: RemoveRaftVoter {voter_id}: "
                        f"{_error(int(reply.error_code))}"
                        f"{': ' + reply.error_message if reply.error_message else ''}")


def _error(code: int) -> str:
    """``error 7 REQUEST_TIMED_OUT``: Kafka's error code with its name (kio's ``ErrorCode``,
    generated from ``org.apache.kafka.common.protocol.Errors``)."""
    from kio.schema.errors import ErrorCode
    try:
        return f"error {code} {ErrorCode(code).name.upper()}"
    except ValueError:
        return f"error {code}"
