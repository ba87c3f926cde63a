"""Client settings of the queue workload and the librdkafka and Java client configurations
they produce: the run settings a client takes as they are come from the settings table
(``kafka_chaos.settings``: each one's Kafka property and ``role``), the rest is the
workload's own."""

from __future__ import annotations

import dataclasses
from typing import Any

from kafka_chaos.catalogue.clients import CLIENTS, REQUEST_TIMEOUT_MS
from kafka_chaos.config import SETTINGS, RunConfig


def _default(field: str) -> Any:
    """The default of the run setting ``field`` (``RunConfig``): one default per setting."""
    return RunConfig.model_fields[field].default


@dataclasses.dataclass(frozen=True)
class WorkloadSettings:
    """What the client processes do and how their Kafka clients are configured.

    Generator (Jepsen ``queue`` workload): ``clients`` processes together run ``rate`` ops/s;
    each op is a ``send`` of ``mops_min..mops_max`` values, a ``poll``, or with ``txn`` one
    transaction of that many send/poll micro-ops (each a poll with ``poll_p``); ``sub_p`` of
    the ops re-assign / re-subscribe (``sub_via``); ``abort_p`` of the transactions are aborted
    on purpose, and ``txn_ids`` says whose the transactional ids are (``transactional_id``);
    every ``crash_interval_s`` (0: never) one client is dropped without closing.

    Producer (librdkafka names): ``acks``, ``idempotence`` (``enable.idempotence``, KIP-98),
    ``retries``, ``max_in_flight`` (``max.in.flight.requests.per.connection``),
    ``delivery_timeout_ms`` (``delivery.timeout.ms``), ``request_timeout_ms``, ``linger_ms``,
    ``txn_timeout_ms`` (``transaction.timeout.ms``).

    Consumer: ``auto_commit`` (``enable.auto.commit``), ``auto_offset_reset``,
    ``isolation_level``, ``check_crcs`` (``check.crcs``; None: the client's default),
    ``session_timeout_ms``, ``max_poll_interval_ms``, ``poll_max``
    (records per ``consume()``), ``poll_timeout_ms``; ``group`` is the consumer group of
    ``subscribe`` clients, ``group_protocol`` its protocol (``classic``, or ``consumer``:
    KIP-848, whose session and heartbeat the brokers set, so the clients may not). With
    ``sub_via="share"`` the consumers are share consumers of ``share_group`` instead
    (``workloads.share``), whose records stay locked ``share_lock_ms`` after a crash and
    are archived after ``share_delivery_limit`` deliveries (KIP-932).

    Client library: ``client`` is ``librdkafka`` (confluent-kafka, ``workloads/client.py``)
    or ``java`` (kafka-clients ``client_version`` on the JVM, ``workloads/java_client.py``);
    ``idempotence`` is already resolved to what the client runs with (``RunConfig``).

    Every client: ``ids`` prefixes its consumer groups and transactional ids (a run on a
    shared cluster takes ids of its own); ``connection`` holds librdkafka's security
    settings (``clusters.security.ClientSecurity.librdkafka``: TLS, SASL) and
    ``java_connection`` the Java client's (``ClientSecurity.java``), both kept out of
    ``repr`` because they hold secrets, and ``java_system`` the system properties of the
    Java client's JVM (``ClientSecurity.java_system``).
    """

    clients: int = _default("clients")
    rate: float = _default("rate")
    mops_min: int = _default("ops_per_txn")[0]
    mops_max: int = _default("ops_per_txn")[1]
    poll_p: float = _default("poll_p")
    sub_via: str = _default("sub_via")
    sub_p: float = _default("sub_p")
    group_protocol: str = _default("group_protocol")
    txn: bool = _default("txn")
    txn_ids: str = _default("txn_ids")
    abort_p: float = _default("abort_p")
    crash_interval_s: float = 0.0
    acks: str = _default("acks")
    idempotence: bool = False
    retries: int = _default("retries")
    max_in_flight: int = _default("max_in_flight")
    delivery_timeout_ms: int = _default("delivery_timeout_ms")
    request_timeout_ms: int = REQUEST_TIMEOUT_MS
    linger_ms: int = _default("linger_ms")
    txn_timeout_ms: int = 10000
    auto_commit: bool = _default("auto_commit")
    auto_offset_reset: str = _default("auto_offset_reset")
    isolation_level: str = _default("isolation_level")
    check_crcs: bool | None = _default("check_crcs")
    session_timeout_ms: int = 6000
    max_poll_interval_ms: int = 10000
    poll_max: int = 500
    poll_timeout_ms: int = 100
    group: str = "kc-group"
    share_lock_ms: int = _default("share_lock_ms")
    share_delivery_limit: int = _default("share_delivery_limit")
    ids: str = "kc"
    connection: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)
    java_connection: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)
    java_system: dict[str, str] = dataclasses.field(default_factory=dict)
    client: str = _default("client")
    #: the client release to run: kafka-clients' always; confluent-kafka's only when one
    #: was asked for ("": the installed one)
    client_version: str = ""

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "WorkloadSettings":
        """The settings of a run's configuration: every field named as a run setting is that
        setting (``RunConfig``: one name, one default, one meaning), the rest derived from
        it; its own names, ids and connection are left at their defaults
        (``attach.workload_settings`` sets them for the cluster)."""
        values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)
                  if f.name in RunConfig.model_fields}
        values.update(
            mops_min=cfg.ops_per_txn[0], mops_max=cfg.ops_per_txn[1],
            crash_interval_s=cfg.crash_client_interval_s if cfg.crash_clients else 0.0,
            idempotence=bool(cfg.idempotence),  # as the client resolved it (RunConfig)
            client_version=cfg.client_version or (
                cfg.kafka_version if CLIENTS[cfg.client].follows_kafka else ""))
        return cls(**values)

    @property
    def share_group(self) -> str:
        """The share group of ``sub_via="share"`` consumers (KIP-932), named by ``ids``."""
        return f"{self.ids}-share"

    def transactional_id(self, process: int, slot: int) -> str | None:
        """The ``transactional.id`` of a process's producer (None without ``txn``): one per
        worker slot (``txn_ids="slot"``), so that a replacement fences its dead predecessor
        (KIP-98 zombie fencing), or one per process (``"process"``): an application whose id
        names its host or pod, so that a crashed process's id is never used again and its
        producer id goes idle on every partition it wrote."""
        if not self.txn:
            return None
        return f"{self.ids}-txn-{process if self.txn_ids == 'process' else slot}"

    def properties(self, role: str) -> dict[str, Any]:
        """The run settings of ``role`` (``producer`` or ``consumer``, ``settings.ROLES``)
        under their Kafka property (the settings table's ``prop``), with this workload's
        values: ``{"acks": "all", "linger.ms": 5, ...}``. librdkafka and the Java client
        name these the same."""
        return {s.prop: getattr(self, name) for name, s in SETTINGS.items()
                if s.role == role and getattr(self, name) is not None}

    def producer_config(self, bootstrap: str, transactional_id: str | None = None) -> dict:
        """librdkafka configuration of one process's producer (transactional with an id)."""
        conf = {
            "bootstrap.servers": bootstrap,
            **self.properties("producer"),
            # a transactional producer is idempotent whatever was asked (KIP-98)
            "enable.idempotence": self.idempotence or self.txn,
            "request.timeout.ms": self.request_timeout_ms,
            "socket.timeout.ms": self.request_timeout_ms,
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0,
            **self.connection,
        }
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
            conf["transaction.timeout.ms"] = self.txn_timeout_ms
        return conf

    def consumer_config(self, bootstrap: str, group: str) -> dict:
        """librdkafka configuration of one process's consumer in consumer group ``group``."""
        return self._group_protocol({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            **self.properties("consumer"),
            # a transaction commits its offsets itself (send_offsets_to_transaction)
            "enable.auto.commit": self.auto_commit and not self.txn,
            "enable.partition.eof": False,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": max(500, self.session_timeout_ms // 3),
            "max.poll.interval.ms": max(self.max_poll_interval_ms, self.session_timeout_ms),
            "socket.timeout.ms": self.request_timeout_ms,
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0,
            **self.connection,
        })

    def _group_protocol(self, conf: dict) -> dict:
        """``conf`` for ``group_protocol``: with KIP-848 the broker sets the session and the
        heartbeat, and both clients refuse them (librdkafka CONFIGURATION.md, "classic
        protocol only"; Java's ConsumerConfig)."""
        if self.group_protocol == "consumer":
            conf = {k: v for k, v in conf.items()
                    if k not in ("session.timeout.ms", "heartbeat.interval.ms")}
            conf["group.protocol"] = "consumer"
        return conf

    def java_producer_config(self, bootstrap: str) -> dict:
        """The Java producer's configuration (the process adds ``transactional.id``): the
        same settings under the Java client's names, and ``max.block.ms`` bounded by
        ``txn_timeout_ms`` as librdkafka's transactional calls are (Java's default, 60 s,
        would hold an op a minute on a metadata or coordinator wait)."""
        conf: dict = {
            "bootstrap.servers": bootstrap, **self.properties("producer"),
            "enable.idempotence": self.idempotence or self.txn,
            "request.timeout.ms": self.request_timeout_ms,
            "metadata.max.age.ms": 5000, "max.block.ms": self.txn_timeout_ms,
            **self.java_connection,
        }
        if self.txn:
            conf["transaction.timeout.ms"] = self.txn_timeout_ms
        return conf

    def java_share_config(self, bootstrap: str) -> dict:
        """The Java share consumer's configuration (the process adds ``group.id``): explicit
        acknowledgement (``workloads.share``), and none of the group consumer's keys, which
        kafka-clients refuses for a share consumer (``ShareConsumerConfig``)."""
        return {"bootstrap.servers": bootstrap, "share.acknowledgement.mode": "explicit",
                "max.poll.records": self.poll_max, "request.timeout.ms": self.request_timeout_ms,
                "default.api.timeout.ms": self.txn_timeout_ms, "metadata.max.age.ms": 5000,
                **self.java_connection}

    def java_consumer_config(self, bootstrap: str) -> dict:
        """The Java consumer's configuration (the process adds ``group.id``)."""
        return self._group_protocol({
            "bootstrap.servers": bootstrap, **self.properties("consumer"),
            "enable.auto.commit": self.auto_commit and not self.txn,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": max(500, self.session_timeout_ms // 3),
            "max.poll.interval.ms": max(self.max_poll_interval_ms, self.session_timeout_ms),
            "max.poll.records": self.poll_max,
            "request.timeout.ms": max(self.request_timeout_ms, self.session_timeout_ms),
            "default.api.timeout.ms": self.txn_timeout_ms,
            "metadata.max.age.ms": 5000,
            **self.java_connection,
        })
