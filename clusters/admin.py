"""Kafka admin operations used for readiness, fault targeting and unclean election.

Thin wrappers over confluent-kafka's ``AdminClient`` that translate its errors at the edge into
``ClusterError`` subclasses and bound every wait.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Callable

from confluent_kafka import (Consumer, KafkaError, KafkaException, TopicCollection,
                            TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from kafka_chaos.clusters.errors import ClusterError, NotReady, Refused
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.waiting import WaitTimeout, wait_until


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition as the metadata reports them (-1 = no leader)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


#: Client errors librdkafka recovers from by itself (a leader that moved, a broker connection
#: that dropped, a request that timed out): a read meeting one goes on until its deadline.
#: Right after a heal, a restarted broker takes its partitions back (preferred leader
#: election), so a fresh consumer's first request can meet ``NOT_LEADER_OR_FOLLOWER``; a
#: leader elected a moment ago answers a ListOffsets with ``OFFSET_NOT_AVAILABLE`` until its
#: high watermark has caught up (retriable: Kafka's protocol guide, error 78; met by a final
#: read right after the heal moved a leadership back, 2026-11-28).
PASSING_ERRORS = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                  KafkaError.OFFSET_NOT_AVAILABLE, KafkaError._TIMED_OUT,
                  KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def client(bootstrap: str, timeout_s: float = 10.0,
           security: ClientSecurity | None = None) -> AdminClient:
    """An ``AdminClient`` for ``bootstrap`` (``host:port,...``) with short socket timeouts,
    connecting as ``security`` says (None: plaintext)."""
    return AdminClient({"bootstrap.servers": bootstrap,
                        "socket.timeout.ms": int(timeout_s * 1000),
                        "log_level": 0, **(security.librdkafka() if security else {})})


def _refusal(err, what: str) -> Refused | None:
    """A ``Refused`` for an authorization error of librdkafka (``*_AUTHORIZATION_FAILED``:
    the principal lacks an ACL), naming what was refused; None for any other error."""
    if not err.name().endswith("_AUTHORIZATION_FAILED"):
        return None
    return Refused(f"{what} was refused: {err.name()}: the principal of the client "
                   "properties lacks the permission (an ACL); grant it, or use a principal "
                   "that has it")


def broker_ids(admin: AdminClient, timeout_s: float = 5.0) -> set[int]:
    """Ids of brokers currently registered (metadata); raises ``KafkaException`` when unreachable."""
    return set(admin.list_topics(timeout=timeout_s).brokers)


def partitions(admin: AdminClient, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
    """Leader/ISR per partition of ``topic``, sorted by partition; [] if the topic is unknown."""
    md = admin.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    if md is None or md.error is not None and not md.partitions:
        return []
    return sorted((PartitionState(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                   for p in md.partitions.values()), key=lambda s: s.partition)


#: Errors of a CreateTopics sent while a new cluster settles: the broker that forwards it has
#: no controller channel yet, or the controller has not unfenced enough brokers to place every
#: replica (KRaft places replicas on unfenced brokers only), or the client dropped the broker
#: handle the request was queued on (``_DESTROY_BROKER``: librdkafka decommissions a broker
#: that a metadata answer does not list, as the first answers of a settling cluster may not).
#: Retried until the deadline.
_SETTLING = {"INVALID_REPLICATION_FACTOR", "NOT_CONTROLLER", "BROKER_NOT_AVAILABLE",
             "_TRANSPORT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_DESTROY_BROKER"}


#: Longest single attempt of ``create_topic``, seconds.
ATTEMPT_S = 10.0


def create_topic(bootstrap: str, topic: str, partitions_n: int, replication_factor: int,
                 config: dict[str, str] | None = None, timeout_s: float = 60.0,
                 security: ClientSecurity | None = None) -> None:
    """Create ``topic`` through the brokers at ``bootstrap``; an existing topic is left as it
    is (also one created by an earlier attempt whose answer was lost). Retriable errors and
    those of a settling cluster (``_SETTLING``) are retried every 0.5 s for ``timeout_s``
    seconds in all, each attempt with a client of its own and at most ``ATTEMPT_S`` seconds:
    a client whose broker handles were decommissioned kept waiting for a controller until the
    deadline (Kafka 3.9.1, ``_TIMED_OUT: Failed while waiting for controller``). Raises
    ``ClusterError`` naming the last error otherwise, ``Refused`` at once for a missing
    permission (``CREATE`` on the topic or the cluster)."""
    deadline = time.monotonic() + timeout_s
    failed: list[ClusterError] = []

    def attempt() -> bool:
        left = min(max(deadline - time.monotonic(), 1.0), ATTEMPT_S)
        # referenced until the answer: a destroyed client fails it
        handle = client(bootstrap, security=security)
        fut = handle.create_topics([NewTopic(topic, partitions_n, replication_factor,
                                             config=config or {})],
                                   operation_timeout=left, request_timeout=left)[topic]
        try:
            fut.result(timeout=left + 5)
            return True
        except KafkaException as exc:
            err = exc.args[0]
            if err.name() == "TOPIC_ALREADY_EXISTS":
                return True
            refused = _refusal(err, f"creating topic {topic}")
            if refused is not None:
                raise refused from exc
            error = ClusterError(f"creating topic {topic} failed: {err.name()}: {err.str()}")
            if not err.retriable() and err.name() not in _SETTLING:
                raise error from exc
            failed.append(error)
            return False

    try:
        wait_until(attempt, timeout_s, 0.5, f"topic {topic} created")
    except WaitTimeout:
        raise failed[-1] from None


def wait_ready(bootstrap: str, broker_count: int, topics: list[str], timeout_s: float = 120.0,
               log_tail=None, security: ClientSecurity | None = None,
               gone: Callable[[], str | None] | None = None) -> float:
    """Wait until ``broker_count`` brokers are registered and every partition of ``topics`` has
    a leader and a full ISR (ISR == replicas). Returns the seconds waited.

    Raises ``NotReady`` after ``timeout_s`` with the last observed state, plus ``log_tail()``'s
    text (the nodes' log tails) when given; at once when ``gone()``, asked while the cluster
    is not ready, says why it never will be (a broker that stopped for good).
    """
    admin = client(bootstrap, security=security)
    start = time.monotonic()
    last = ["no answer yet"]

    def ready() -> bool:
        try:
            ids = broker_ids(admin)
            if len(ids) < broker_count:
                last.append(f"{len(ids)}/{broker_count} brokers registered: {sorted(ids)}")
                return False
            bad = []
            for topic in topics:
                states = partitions(admin, topic)
                if not states:
                    bad.append(f"{topic}: no metadata")
                bad += [f"{topic}-{s.partition}: leader {s.leader}, isr {list(s.isr)}, "
                        f"replicas {list(s.replicas)}" for s in states
                        if s.leader < 0 or set(s.isr) != set(s.replicas)]
            last.append("; ".join(bad[:6]))
            return not bad
        except KafkaException as exc:
            last.append(str(exc))
            return False

    def ready_or_gone() -> bool:
        if ready():
            return True
        if gone is not None and (why := gone()) is not None:
            raise NotReady(f"cluster not ready: {last[-1]}; {why}")
        return False

    try:
        wait_until(ready_or_gone, timeout_s, 0.5, "a ready cluster")
    except WaitTimeout:
        msg = f"cluster not ready after {timeout_s:.0f} s: {last[-1]}"
        if log_tail is not None:
            msg += "\n" + log_tail()
        raise NotReady(msg) from None
    return time.monotonic() - start


#: What a group coordinator answers while ``__consumer_offsets`` is being created or its
#: partition loaded (Kafka's protocol guide, errors 14-16): retriable, so a wait goes on.
COORDINATOR_STARTING = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                        "COORDINATOR_LOAD_IN_PROGRESS")


def wait_group_coordinator(bootstrap: str, group: str, topic: str, timeout_s: float = 60.0,
                           security: ClientSecurity | None = None) -> float:
    """Wait until consumer group ``group``'s coordinator answers an OffsetFetch of ``topic``'s
    partition 0, as a consumer of the workload asks it; returns the seconds waited. On a fresh
    cluster the first FindCoordinator creates ``__consumer_offsets`` (50 partitions), and its
    coordinators answer ``NOT_COORDINATOR`` until their partitions are loaded: about 2 s on
    this machine, which a workload would spend failing every group op.

    Any answer other than the retriable ones of ``COORDINATOR_STARTING`` ends the wait (a
    refused ``DESCRIBE`` on the group is the workload's own finding to make). Asked through a
    consumer, the workload's own path, not the admin client's group calls: with
    confluent-kafka 2.16.1, ``list_consumer_group_offsets`` crashed the process (SIGSEGV) on
    a coordinator's error here, and a run that had used ``describe_consumer_groups`` here
    aborted later in librdkafka (``rd_kafka_enq_once_del_source_return``; the cause is not
    proven). Raises
    ``NotReady`` after ``timeout_s`` (s) with the last error."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "socket.timeout.ms": 10000,
                         "log_level": 0, **(security.librdkafka() if security else {})})
    start = time.monotonic()
    last = ["no answer yet"]

    def answered() -> bool:
        try:
            consumer.committed([TopicPartition(topic, 0)], timeout=10.0)
        except KafkaException as exc:
            last.append(exc.args[0].name())
            return exc.args[0].name() not in COORDINATOR_STARTING
        return True

    try:
        wait_until(answered, timeout_s, 0.2, f"the coordinator of group {group}")
    except WaitTimeout:
        raise NotReady(f"group {group} had no coordinator after {timeout_s:.0f} s: "
                       f"{last[-1]}") from None
    finally:
        consumer.close()
    return time.monotonic() - start


def delete_topics(bootstrap: str, topics: list[str], timeout_s: float = 30.0,
                  security: ClientSecurity | None = None) -> list[str]:
    """Delete ``topics``; returns those that are gone (deleted now, or already unknown).
    Raises ``Refused`` for a missing ``DELETE`` permission, ``ClusterError`` for any other
    failure."""
    gone = []
    handle = client(bootstrap, security=security)  # referenced until the answers came
    futures = handle.delete_topics(topics, operation_timeout=timeout_s,
                                   request_timeout=timeout_s)
    for topic, fut in futures.items():
        try:
            fut.result(timeout=timeout_s + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.name() != "UNKNOWN_TOPIC_OR_PART":
                raise _refusal(err, f"deleting topic {topic}") or ClusterError(
                    f"deleting topic {topic} failed: {err.name()}: {err.str()}") from exc
        gone.append(topic)
    return gone


def delete_groups(bootstrap: str, prefix: str, named: tuple[str, ...] = (),
                  timeout_s: float = 50.0, security: ClientSecurity | None = None
                  ) -> tuple[list[str], dict[str, str]]:
    """Delete every consumer group whose id starts with ``prefix`` (ListGroups, of both
    protocols) and the groups ``named`` (share groups: librdkafka lists consumer groups
    only), with DeleteGroups (which deletes a share group's state with it, KIP-932). A group
    no broker knows is left out of both lists. A group with members left
    (``NON_EMPTY_GROUP``: a dropped member stays until its session ends, 45 s by Kafka's
    KIP-848 and share defaults), or that met a retriable error (a coordinator moving after
    a heal), is asked again every second until ``timeout_s``. Returns ``(deleted, {group:
    error name})`` for those kept.
    Raises ``Refused`` for a missing ``DESCRIBE``/``DELETE`` permission, ``ClusterError``
    when the groups cannot be listed."""
    handle = client(bootstrap, security=security)  # referenced until the answers came
    try:
        listed = handle.list_consumer_groups(request_timeout=10).result(timeout=15)
    except KafkaException as exc:
        raise _refusal(exc.args[0], "listing groups") or ClusterError(
            f"listing groups failed: {exc.args[0].str()}") from exc
    left = sorted({g.group_id for g in listed.valid if g.group_id.startswith(prefix)}
                  | set(named))
    deleted: list[str] = []
    kept: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while left:
        again = []
        for group, fut in handle.delete_consumer_groups(left, request_timeout=10).items():
            kept.pop(group, None)  # this try decides it anew
            try:
                fut.result(timeout=15)
                deleted.append(group)
            except KafkaException as exc:
                err = exc.args[0]
                refused = _refusal(err, f"deleting group {group}")
                if refused is not None:
                    raise refused from exc
                if err.code() != KafkaError.GROUP_ID_NOT_FOUND:
                    kept[group] = err.name()
                    if err.code() == KafkaError.NON_EMPTY_GROUP or err.retriable():
                        again.append(group)
        left = sorted(again)
        if not left or time.monotonic() + 1 > deadline:
            break
        time.sleep(1)
    return sorted(deleted), kept


def set_topic_config(admin: AdminClient, topic: str, settings: dict[str, str],
                     timeout_s: float = 15.0) -> None:
    """Incrementally set topic configs (KIP-339), e.g. ``unclean.leader.election.enable``.
    Raises ``ClusterError``."""
    _alter(admin, ResourceType.TOPIC, topic, settings, timeout_s)


def set_group_config(admin: AdminClient, group: str, settings: dict[str, str],
                     timeout_s: float = 15.0) -> None:
    """Incrementally set group configs (KIP-848's GROUP resource), e.g. a share group's
    ``share.auto.offset.reset`` (KIP-932). Raises ``ClusterError``."""
    _alter(admin, ResourceType.GROUP, group, settings, timeout_s)


def _alter(admin: AdminClient, kind: ResourceType, name: str, settings: dict[str, str],
           timeout_s: float) -> None:
    res = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    try:
        for fut in admin.incremental_alter_configs([res], request_timeout=timeout_s).values():
            fut.result(timeout=timeout_s + 5)
    except KafkaException as exc:
        what = f"altering configs of {name or 'the cluster'}"
        raise _refusal(exc.args[0], what) or ClusterError(
            f"{what} failed: {exc.args[0].str()}") from exc


def topic_config(admin: AdminClient, topic: str, key: str, timeout_s: float = 10.0) -> str | None:
    """The effective value of topic config ``key`` (DescribeConfigs, answered by a broker from
    its metadata), or None if the topic does not list it.

    Raises ``ClusterError`` when the request fails.
    """
    return _describe(admin, ResourceType.TOPIC, topic, key, timeout_s)


def group_config(admin: AdminClient, group: str, key: str,
                 timeout_s: float = 10.0) -> str | None:
    """The effective value of group config ``key`` of ``group`` (KIP-848's GROUP resource:
    the group's own value, else the broker's default). Raises ``ClusterError`` when the
    request fails."""
    return _describe(admin, ResourceType.GROUP, group, key, timeout_s)


def broker_config(admin: AdminClient, broker_id: int, key: str,
                  timeout_s: float = 10.0) -> str | None:
    """The effective value of broker config ``key`` on broker ``broker_id`` (dynamic cluster
    defaults included). Raises ``ClusterError`` when the request fails."""
    return _describe(admin, ResourceType.BROKER, str(broker_id), key, timeout_s)


def _describe(admin: AdminClient, kind: ResourceType, name: str, key: str,
              timeout_s: float) -> str | None:
    """One DescribeConfigs; ``UNKNOWN_TOPIC_OR_PART`` is asked again every 0.5 s until
    ``timeout_s``: the broker that answers learns of a topic just created only when the
    controller's metadata reaches it (a read-back right after CreateTopics met it)."""
    res = ConfigResource(kind, name)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            entries = admin.describe_configs([res], request_timeout=timeout_s)[res].result(
                timeout=timeout_s + 5)
            break
        except KafkaException as exc:
            err = exc.args[0]
            if (err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                    and time.monotonic() + 0.5 < deadline):
                time.sleep(0.5)
                continue
            what = f"describing configs of {name}"
            raise _refusal(err, what) or ClusterError(f"{what} failed: {err.str()}") from exc
    entry = entries.get(key)
    return None if entry is None else entry.value


def elect_unclean(admin: AdminClient, topic: str, partition_ids: list[int],
                  timeout_s: float = 15.0) -> dict[int, str | None]:
    """Trigger an unclean leader election (KIP-460 ElectLeaders, type UNCLEAN).

    Returns ``{partition: None | error name}``; ``ELECTION_NOT_NEEDED`` means it had a leader.
    See ``elect``."""
    return elect(admin, topic, partition_ids, "unclean", timeout_s)


def elect(admin: AdminClient, topic: str, partition_ids: list[int], kind: str,
          timeout_s: float = 15.0) -> dict[int, str | None]:
    """ElectLeaders (KIP-460) of ``kind`` ``"preferred"`` (the first replica becomes leader if
    it is in the ISR) or ``"unclean"``, on ``topic``'s ``partition_ids``.

    Returns ``{partition: None | error name}`` (``ELECTION_NOT_NEEDED``: nothing to change).
    The request timeout is the client's ``socket.timeout.ms``: confluent-kafka 2.16's
    ``elect_leaders`` raises ``SystemError`` when given ``request_timeout``/``operation_timeout``.
    """
    from confluent_kafka import ElectionType, KafkaError

    def name(err: object) -> str:
        # per-partition errors come back as KafkaError, request errors as KafkaException
        return err.name() if isinstance(err, KafkaError) else err.args[0].name()

    tps = [TopicPartition(topic, p) for p in partition_ids]
    election = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}[kind]
    try:
        result = admin.elect_leaders(election, tps).result(timeout=timeout_s + 5)
    except KafkaException as exc:
        return {p: name(exc) for p in partition_ids}
    return {tp.partition: None if err is None else name(err) for tp, err in result.items()}


def group_type(bootstrap: str, group: str, timeout_s: float = 30.0,
               security: ClientSecurity | None = None) -> str:
    """The protocol consumer group ``group`` runs as its coordinator describes it
    (DescribeGroups, or ConsumerGroupDescribe on 4.x): ``consumer`` (KIP-848), ``classic``,
    or ``unknown``. While the coordinator answers that it is moving or loading
    (``COORDINATOR_STARTING``: a restarted broker loading ``__consumer_offsets``) it is asked
    again every 0.5 s until ``timeout_s`` (s). Raises ``KafkaException`` when the describe
    fails otherwise, or with the last such answer at the end, and
    ``concurrent.futures.TimeoutError`` when one describe gets no answer within
    ``timeout_s``."""
    admin = client(bootstrap, timeout_s, security)
    last: list[KafkaException] = []

    def described() -> str | None:
        [future] = admin.describe_consumer_groups([group], request_timeout=timeout_s).values()
        try:
            return future.result(timeout_s).type.name.lower()
        except KafkaException as exc:
            if exc.args[0].name() not in COORDINATOR_STARTING:
                raise
            last.append(exc)
            return None

    try:
        return wait_until(described, timeout_s, 0.5, f"a description of group {group}")
    except WaitTimeout:
        raise last[-1] from None


def topic_ids(admin: AdminClient, topics: list[str],
              timeout_s: float = 10.0) -> dict[uuid.UUID, str]:
    """``{topic id: name}`` of ``topics`` (DescribeTopics; KIP-516 topic ids). Raises
    ``KafkaException`` when a describe fails, ``concurrent.futures.TimeoutError`` when no
    answer comes within ``timeout_s`` (s)."""
    found = admin.describe_topics(TopicCollection(topics), request_timeout=timeout_s)
    out = {}
    for name, future in found.items():
        tid = future.result(timeout_s).topic_id
        bits = ((tid.get_most_significant_bits() & (2**64 - 1)) << 64
                | (tid.get_least_significant_bits() & (2**64 - 1)))
        out[uuid.UUID(int=bits)] = name
    return out
