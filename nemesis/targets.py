"""Who a fault aims at: the targets of process faults and the nodes Kafka's roles name at
this moment (a partition's leader and followers, the active KRaft controller).

Roles are read when the fault starts, not from the monitor's last sample: a sample can be up
to ``nemesis.monitor.PERIOD_S`` old, and the leader may have moved since.
"""

from __future__ import annotations

# the targets' names are the fault catalogue's; named here too for this package's modules
from kafka_chaos.catalogue.faults import (KILL_TARGETS, LAGGING_LEADER, LONE_LEADER,  # noqa: F401
                                          POWER_TARGETS, PROCESS_TARGETS)
from kafka_chaos.clusters import admin, wire
from kafka_chaos.clusters.base import Node
from kafka_chaos.nemesis.base import NemesisError

#: Seconds a lagging leader's replication is cut before it is killed: well short of
#: ``replica.lag.time.max.ms`` (10 s by default here, 30 s in Kafka), so the controller still
#: elects a follower cleanly, one that never got what the leader acknowledged alone
#: (``acks=1``: "should the leader fail immediately after acknowledging the record but before
#: the followers have replicated it then the record will be lost").
LAG_S = 3.0
#: Seconds a lone leader's cut waits at most for the ISR to shrink: past Kafka's default
#: ``replica.lag.time.max.ms`` (30 s), with room for the AlterPartition round trip.
LONE_WAIT_S = 45.0
#: Seconds between two reads of the ISR while waiting.
LONE_POLL_S = 0.5
#: Seconds a lone leader keeps leading once alone, acknowledging writes no other replica has.
LONE_HOLD_S = 1.0


def quorum_endpoints(nodes: list[Node]) -> list[tuple[Node, str]]:
    """Where to ask ``DescribeQuorum`` among ``nodes``: each controller's listener; when no
    node is known as a controller (an attached cluster), each broker's listener (brokers
    forward the request to the quorum leader)."""
    asked = [(n, f"{n.host}:{n.controller_port}") for n in nodes if n.is_controller]
    return asked or [(n, n.client_endpoint) for n in nodes if n.is_broker]


def active_controller(cluster) -> Node | None:
    """The KRaft quorum leader (the active controller), asked of each controller in turn
    (``DescribeQuorum``, ``clusters.wire``); None if none answers as leader.

    A cluster whose controllers the tool does not know (an attached one: Metadata names
    brokers only) is asked through its brokers, which forward the request; the leader is
    then a known node only in combined mode (node ids are unique in a cluster, so a broker
    with the leader's id is the same process), else None."""
    for node, endpoint in quorum_endpoints(cluster.nodes):
        try:
            leader = wire.describe_quorum(endpoint, security=cluster.security)["leader"]
        except wire.WireError:
            continue
        if leader >= 0:
            return next((n for n in cluster.nodes if n.node_id == leader), None)
    return None


def pick(cluster, rng, live: list[Node], value: dict | None) -> list[Node]:
    """The nodes a process fault aims at, among ``live`` ones (``PROCESS_TARGETS`` or a list
    of node ids in ``value["target"]``; ``leader``, ``follower`` and ``followers`` (every
    live one) of ``value["topic"]``-``value["partition"]``). Empty when the target is not
    there (no leader, not live).
    ``minority`` is ``(n - 1) // 2`` nodes of all ``n``, ``majority`` ``n // 2 + 1``, both
    drawn from the live ones. Raises ``NemesisError`` for an unknown target."""
    value = value or {}
    target = value.get("target", "one")
    if isinstance(target, list):
        return [n for n in live if n.node_id in target]
    if target in ("leader", "follower", "followers"):
        state = partition_of(cluster, value["topic"], value.get("partition", 0))
        if state is None:
            return []
        if target == "leader":
            return [n for n in live if n.node_id == state.leader]
        followers = [n for n in live if n.node_id in state.replicas and n.node_id != state.leader]
        if target == "followers":
            return followers
        return [rng.choice(followers)] if followers else []
    if target == "controller":
        node = active_controller(cluster)
        return [node] if node in live else []
    if not live:
        return []
    n = len(cluster.nodes)
    sizes = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}
    if target not in sizes:
        raise NemesisError(f"unknown target {target!r}; choose from {', '.join(PROCESS_TARGETS)} "
                           "or a list of node ids")
    return sorted(rng.sample(live, min(sizes[target], len(live))), key=lambda n: n.node_id)


def partition_of(cluster, topic: str, partition: int) -> admin.PartitionState | None:
    """Leader, replicas and ISR of ``topic``-``partition`` as the metadata reports them."""
    try:
        client = admin.client(cluster.bootstrap_servers, 3.0, cluster.security)
        states = admin.partitions(client, topic, 3.0)
    except Exception:
        return None
    return next((s for s in states if s.partition == partition), None)


def leader_of(cluster, topic: str, partition: int) -> Node | None:
    """The broker currently leading ``topic``-``partition``, or None if unknown/offline."""
    state = partition_of(cluster, topic, partition)
    return cluster.node(state.leader) if state is not None and state.leader >= 0 else None
