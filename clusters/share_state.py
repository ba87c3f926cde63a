"""A share group's share-partition state as the admin API exposes it (KIP-932).

``DescribeShareGroupOffsets`` (API key 90, what ``kafka-share-groups.sh --describe`` and
the Java ``Admin.listShareGroupOffsets`` send) gives, per share-partition, the share-partition
start offset (SPSO: every record below it is acknowledged or archived) and, from v1, its lag.
It goes to the group's coordinator, found with ``FindCoordinator`` (key type GROUP: share
groups live on the group coordinator). librdkafka's admin client has neither request for
share groups, so they are spoken here with kio through ``wire.call``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.describe_share_group_offsets.v1 import request as dsgo_req
from kio.schema.describe_share_group_offsets.v1 import response as dsgo_resp
from kio.schema.find_coordinator.v6 import request as fc_req
from kio.schema.find_coordinator.v6 import response as fc_resp
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32

from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.clusters.wire import WireError, call

_GROUP_KEY = 0


def coordinator(bootstrap: str, group: str, timeout_s: float = 5.0,
                security: ClientSecurity | None = None) -> str:
    """``host:port`` of ``group``'s coordinator, asked of the first broker of ``bootstrap``
    (``host:port,...``) that answers. Raises ``WireError`` when none names one."""
    errors = []
    for endpoint in bootstrap.split(","):
        try:
            reply = call(endpoint, fc_req.FindCoordinatorRequest(
                key_type=i8(_GROUP_KEY), coordinator_keys=(group,)),
                fc_resp.FindCoordinatorResponse, timeout_s, security)
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
    request = dsgo_req.DescribeShareGroupOffsetsRequest(groups=(
        dsgo_req.DescribeShareGroupOffsetsRequestGroup(
            group_id=GroupId(group), topics=tuple(
                dsgo_req.DescribeShareGroupOffsetsRequestTopic(
                    topic_name=TopicName(t), partitions=tuple(i32(p) for p in ps))
                for t, ps in sorted(topics.items()))),))
    endpoint = coordinator(bootstrap, group, timeout_s, security)
    reply = call(endpoint, request, dsgo_resp.DescribeShareGroupOffsetsResponse, timeout_s,
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
