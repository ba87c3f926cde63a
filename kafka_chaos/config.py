"""The run configuration: one validated model, written to ``config.json`` of every run and to
the history's header (the verdict judges anomalies against it, ``analysis/promises.py``).

Invalid combinations are refused here, before anything starts, with one message naming the
option. The model stands on the ground floor: it imports the catalogues and nothing else of
the project, so every package can read it. The checks that need a scenario file are the
admission's (``kafka_chaos.admission``), those that need the machine or a backend the
orchestration's (``orchestrate.check_inputs``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, field_validator, model_validator

from kafka_chaos.catalogue.anomalies import ANOMALIES
from kafka_chaos.catalogue.backends import ATTACHING, DEFAULT_KAFKA_VERSION
from kafka_chaos.catalogue.backends import NAMES as BACKENDS
from kafka_chaos.catalogue.clients import CLIENTS, REQUEST_TIMEOUT_MS, default_idempotence
from kafka_chaos.catalogue.clients import NAMES as CLIENT_NAMES
from kafka_chaos.catalogue.faults import (OPT_IN_FILES, PACKAGES, REQUEST_KINDS,
                                          own_cluster_only, parse_packages, parse_targets)
from kafka_chaos import steady
from kafka_chaos.settings import Setting, setting, table


def _built_in_scenarios() -> tuple[str, ...]:
    """The built-in scenarios' names (``nemesis/scenarios/<name>.yaml``), found without
    importing the nemesis package (``nemesis.script.names`` reads the same folder)."""
    spec = importlib.util.find_spec("kafka_chaos.nemesis")
    folder = Path(next(iter(spec.submodule_search_locations or []))) / "scenarios"
    return tuple(sorted(p.stem for p in folder.glob("*.yaml")))


SCENARIOS = _built_in_scenarios()
_RANGE = re.compile(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?")
_RELEASE = re.compile(r"\d+\.\d+\.\d+")


def parse_range(text: str) -> tuple[int, int]:
    """``"1..4"`` -> ``(1, 4)``; ``"3"`` -> ``(3, 3)``. Raises ``ValueError`` otherwise."""
    m = _RANGE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not N or MIN..MAX")
    lo = int(m[1])
    return lo, int(m[2]) if m[2] is not None else lo


_SHARED = "the cells of a comparison share one cluster backend"
#: Backends that attach to a cluster the tool did not create.
ATTACHED = ATTACHING
#: Settings holding a file path: absolute in ``config.json``; relative to a plan in a plan.
PATHS = ("inventory", "kafka_home", "client_properties")
#: KIP-848 groups' session and heartbeat, set by the broker (Kafka's defaults: 45 s and 5 s,
#: which would hold a crashed member's partitions 45 s), as the classic groups' are by the
#: clients (``WorkloadSettings.session_timeout_ms``).
_CONSUMER_GROUPS = {
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "2000",
    "group.consumer.min.heartbeat.interval.ms": "1000"}
#: Server properties each backend writes per node (``clusters/kafka_config.server_properties``).
_GENERATED_PROPERTIES = frozenset({
    "process.roles", "node.id", "controller.quorum.voters", "controller.listener.names",
    "listener.security.protocol.map", "log.dirs", "listeners", "advertised.listeners",
    "inter.broker.listener.name"})


def version_tuple(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Kafka version such as ``4.2.1`` (0 where a part is missing)."""
    parts = (version.split(".") + ["0"])[:2]
    return tuple(int(p) if p.isdigit() else 0 for p in parts)  # type: ignore[return-value]


def _property(value: Any) -> str:
    """A setting's value as a Kafka properties file writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class RunConfig(BaseModel):
    """Everything that determines a run (with ``seed``, enough to rerun it).

    Units: ``time_limit_s``, ``nemesis_interval_s``, ``crash_client_interval_s`` in seconds,
    ``rate`` in ops/s (all client processes together), ``*_ms`` in milliseconds. ``ops_per_txn``
    is ``(min, max)`` micro-ops per op (sends of a ``send`` op, mops of a transaction).

    Each field is declared with ``settings.setting``: its flag, plan key, Kafka property,
    label and help live here once (``SETTINGS``).
    """

    backend: str = setting(
        "local", section="cluster", fixed=_SHARED, shown=True, report=True,
        help="Cluster backend: local (one broker JVM per network namespace on this machine), "
        "docker (one container per node), ssh (existing hosts of an --inventory); or a "
        "running cluster at --bootstrap-servers: external (observed, no faults of ours), "
        "docker-attach (its containers faulted in place) or ssh-attach (its hosts, with the "
        "start/stop commands of an --inventory).")
    image: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="Docker backend: the Kafka image (default apache/kafka:VERSION; java 17+ and sh "
        "on PATH, jars in /opt/kafka/libs).")
    inventory: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="ssh backend: the inventory YAML (hosts, SSH users and keys, node ids, roles, "
        "Kafka home or upload); ssh-attach: the hosts and their start, stop, kill and pid "
        "commands. In a plan file, relative to the plan.")
    accept_unknown_host_keys: bool = setting(
        False, section="cluster", fixed=_SHARED,
        help="ssh backend: accept host keys missing from known_hosts (logged); a changed key "
        "is refused.")
    bootstrap_servers: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="external, docker-attach and ssh-attach backends: HOST:PORT,... of the running "
        "cluster's listener.")
    compose_project: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="docker-attach backend: the Compose project whose containers run the brokers.")
    containers: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="docker-attach backend: or the brokers' containers by name, NAME,...")
    client_properties: str | None = setting(
        None, section="cluster", fixed=_SHARED,
        help="A Kafka client properties file (security.protocol, sasl.*, ssl.*; secrets as "
        "${env:NAME} or ${file:PATH:KEY}) for every connection of the tool; its path is "
        "kept, never a secret. In a plan file, relative to the plan.")
    keep_topics: bool = setting(
        False, section="topics", fixed=_SHARED,
        help="On a cluster the tool did not create, keep the run's topics at the end "
        "(they are deleted by default).")
    brokers: int = setting(3, section="cluster", shown=True, report=True, ge=1, le=9,
                           help="Number of brokers.")
    controllers: int = setting(0, section="cluster", report=True, ge=0, le=5,
                               help="Dedicated KRaft controllers (0: combined mode).")
    kafka_version: str = setting(
        DEFAULT_KAFKA_VERSION, section="cluster", label="kafka", aliases=("kafka", "version"),
        shown=True, report=True, help="Kafka version (jars from Maven Central).")
    kafka_home: str | None = setting(
        None, section="cluster", fixed="compare Kafka versions with kafka_version",
        help="Unpacked Apache Kafka distribution; in a plan file, relative to the plan.")
    #: server properties for every broker beyond those the other settings set (plan files)
    broker_properties: dict[str, str] = setting(
        section="cluster", key="broker_config", flag="", default_factory=dict,
        fixed="set broker configs in the plan's cluster.broker_config",
        help="Server properties for every broker beyond those the other settings own.")
    topics: int = setting(1, section="topics", key="count", report=True, ge=1, le=16,
                          help="Topics the keys are spread over.")
    keys: int = setting(6, section="topics", report=True, ge=1, le=256,
                        help="Keys; each is one partition.")
    replication_factor: int = setting(
        3, section="topics", prop="default.replication.factor", label="replication.factor",
        shown=True, report=True, ge=1, help="Replication factor of the test topics.")
    min_insync_replicas: int = setting(
        2, section="topics", prop="min.insync.replicas", label="min.insync.replicas",
        shown=True, report=True, ge=1, help="min.insync.replicas.")
    unclean_leader_election: bool = setting(
        False, section="topics", prop="unclean.leader.election.enable", label="unclean",
        aliases=("unclean",), shown=True, report=True, help="unclean.leader.election.enable.")
    replica_lag_time_max_ms: int = setting(
        10000, section="topics", prop="replica.lag.time.max.ms", unit="ms",
        label="replica.lag.time.max.ms", ge=100, help="replica.lag.time.max.ms.")
    unclean_leader_election_interval_ms: int = setting(
        1000, section="topics", prop="unclean.leader.election.interval.ms", unit="ms", ge=100,
        help="unclean.leader.election.interval.ms: how often the controller looks for an "
        "unclean election to make (Kafka's default, 300000, would hide most of them).")
    time_limit_s: float = setting(30.0, section="workload", flag="--time-limit",
                                  label="time_limit", unit="s", report=True, gt=0,
                                  help="Seconds of workload.")
    rate: float = setting(200.0, section="workload", unit="ops/s", report=True, gt=0,
                          help="Target ops per second, all client processes together.")
    clients: int = setting(4, section="workload", report=True, ge=1, le=64,
                           help="Concurrent client processes.")
    ops_per_txn: tuple[int, int] = setting(
        (1, 4), section="workload",
        help="Micro-ops per op: sends of a send op, sends and polls of a transaction (N or "
        "MIN..MAX).")
    poll_p: float = setting(0.25, section="workload", ge=0, le=1,
                            help="Share of ops (or txn micro-ops) that poll.")
    sub_via: Literal["assign", "subscribe", "share"] = setting(
        "assign", section="workload", report=True,
        help="How consumers get records: assign, subscribe (a consumer group) or share (a "
        "share group, KIP-932; Kafka 4.2+).")
    group_protocol: Literal["classic", "consumer"] = setting(
        "classic", section="workload", prop="group.protocol", label="group.protocol",
        shown=True, report=True,
        help="The consumer group protocol of --sub-via subscribe: classic, or consumer "
        "(KIP-848; Kafka 4.0+).")
    share_lock_ms: int = setting(
        5000, section="workload", prop="group.share.record.lock.duration.ms",
        label="share.record.lock.duration.ms", unit="ms", ge=1000, le=3_600_000,
        help="--sub-via share: the acquisition lock of a delivered record (KIP-932), set on "
        "the brokers and the run's share group.")
    share_delivery_limit: int = setting(
        3, section="workload", prop="group.share.delivery.count.limit",
        label="share.delivery.count.limit", ge=2, le=10,
        help="--sub-via share: deliveries of a record before it is archived (KIP-932), set "
        "on the brokers and the run's share group.")
    sub_p: float = setting(0.02, section="workload", ge=0, lt=1,
                           help="Share of ops that re-assign / re-subscribe.")
    txn: bool = setting(False, section="workload", aliases=("transactions",), shown=True,
                        report=True, help="Transactions: each op is one transaction "
                        "(transactional.id producers, read-process-write).")
    abort_p: float = setting(0.0, section="workload", ge=0, le=1,
                             help="Share of transactions aborted on purpose.")
    txn_ids: Literal["slot", "process"] = setting(
        "slot", section="workload", report=True,
        help="--txn: whose transactional.id a producer has: its worker slot's (a restarted "
        "process fences its predecessor, KIP-98) or its process's own (a crashed process's "
        "id is never used again, as when the id names a host or pod).")
    isolation_level: Literal["read_committed", "read_uncommitted"] = setting(
        "read_committed", section="workload", prop="isolation.level", label="isolation.level",
        role="consumer", shown=True, report=True,
        help="Consumers' isolation.level: read_committed or read_uncommitted.")
    auto_commit: bool = setting(
        False, section="workload", prop="enable.auto.commit", role="consumer", report=True,
        help="enable.auto.commit (else a manual commit after polls with --sub-via subscribe).")
    auto_offset_reset: Literal["earliest", "latest"] = setting(
        "earliest", section="workload", prop="auto.offset.reset", role="consumer",
        help="auto.offset.reset: earliest or latest.")
    check_crcs: bool | None = setting(
        None, section="workload", prop="check.crcs", role="consumer", report=True,
        help="Consumers' check.crcs: verify each fetched batch's CRC-32C (a damaged one is "
        "a corrupt-read, and the consumer stays at it); unset: the client's own default "
        "(librdkafka: off, so a damaged record reads as its bytes; Java client: on).")
    crash_clients: bool = setting(False, section="workload",
                                  help="Drop a client without closing it now and then.")
    crash_client_interval_s: float = setting(
        10.0, section="workload", flag="--crash-client-interval", unit="s", gt=0,
        help="Seconds between client crashes.")
    acks: Literal["0", "1", "all"] = setting("all", section="workload", prop="acks",
                                             role="producer", shown=True, report=True,
                                             help="Producer acks: 0, 1 or all.")
    client: Literal[CLIENT_NAMES] = setting(  # type: ignore[valid-type]
        CLIENT_NAMES[0], section="workload", shown=True, report=True,
        help="The client library of the workload's processes: librdkafka (confluent-kafka) "
        "or java (kafka-clients on the JVM, --client-version).")
    client_version: str | None = setting(
        None, section="workload", label="client.version",
        help="The client release: --client java: kafka-clients (a Kafka release on Maven "
        "Central; default: --kafka-version's); --client librdkafka: confluent-kafka (a "
        "release on PyPI, whose wheel bundles its librdkafka, in a virtualenv of its own; "
        "default: the installed one).")
    idempotence: bool | None = setting(
        None, section="workload", prop="enable.idempotence", role="producer", shown=True,
        report=True,
        help="enable.idempotence (KIP-98); unset: the client's own default, recorded as "
        "resolved (librdkafka: off; Java client: on unless acks, retries or max.in.flight "
        "conflict, KIP-679).")
    retries: int = setting(2147483647, section="workload", prop="retries", role="producer",
                           report=True, ge=0, help="Producer retries.")
    max_in_flight: int = setting(
        5, section="workload", prop="max.in.flight.requests.per.connection", role="producer",
        label="max.in.flight", shown=True, report=True, ge=1,
        help="max.in.flight.requests.per.connection.")
    linger_ms: int = setting(5, section="workload", prop="linger.ms", role="producer",
                             unit="ms", ge=0, help="linger.ms.")
    delivery_timeout_ms: int = setting(10000, section="workload", prop="delivery.timeout.ms",
                                       role="producer", unit="ms", ge=1000,
                                       help="delivery.timeout.ms.")
    nemesis: list[str] = setting(
        section="nemesis", key="faults", aliases=("faults",), default_factory=list,
        shown=True, report=True,
        help="Faults: comma list of " + ", ".join(
            f"{name} ({kind.note})" if kind.note else name for name, kind in PACKAGES.items())
        + "; or none.")
    nemesis_interval_s: float = setting(
        10.0, section="nemesis", key="interval_s", flag="--nemesis-interval",
        label="nemesis_interval", unit="s", report=True, gt=0,
        help="Seconds between fault start and stop.")
    fault_last_broker: bool = setting(
        False, section="nemesis", report=True,
        help="On a cluster the tool did not create (docker-attach, ssh-attach), let kill, "
        "stop and pause take its last serving broker (refused by default).")
    damage_files: bool = setting(
        False, section="nemesis", report=True,
        help="On --backend ssh-attach, let the file and rollback faults damage your brokers' "
        "files: the data_dir the inventory names per node, over SFTP as its login user. The "
        "damage is not undone: Kafka's recovery and replicas repair what they can, and a "
        "broker that cannot read a file it needs stays down (docs/file-faults.md).")
    proxy: bool = setting(
        False, section="nemesis", report=True,
        help="Put the Kafka protocol proxy (docs/proxy.md) between the workload's clients "
        "and the brokers: a listener per broker, every reply that names a broker rewritten "
        "to it. Plaintext listeners only.")
    proxy_fault: str | None = setting(
        None, section="nemesis", report=True,
        help="A request fault of the Kafka proxy (a kind of docs/proxy.md, with the "
        "request package's defaults) active from the workload's start until the first "
        "request-heal or the final heal, e.g. forget-leader-epoch. Needs --proxy.")
    #: ``--nemesis-targets`` as given ("" = each fault's default targets)
    nemesis_targets: str = setting(
        "", section="nemesis", key="targets", report=True,
        help="Comma list of targets the faults draw from: one, leader, controller, follower, "
        "followers, minority, majority, all or node ids (kill, stop, pause, roll, clock, "
        "lose-unfsynced, file); lagging-leader (kill); lone-leader (kill, lose-unfsynced); "
        "in-sync-follower (leader); isolate-one, halves, isolate-leader, isolate-controller, "
        "bridge, leader-replication, zombie-leader, clients-leader, clients-one, "
        "majorities-ring, one-way (partition, loss); topic, cluster (unclean). Default: each "
        "fault's own.")
    scenario: str | None = setting(
        None, section="nemesis", shown=True, report=True,
        help="Scripted scenario: a built-in one (" + ", ".join(SCENARIOS) + ") or a schedule "
        "file (YAML, see docs/scenarios.md; in a plan file, relative to the plan).")
    #: the options the scenario set (field -> value; options the user gave are kept)
    scenario_settings: dict[str, Any] = setting(
        section=None, flag="", default_factory=dict, fixed="a scenario sets them itself",
        help="The settings the scenario set (those the user gave are kept).")
    seed: int = setting(0, section="", report=True, help="Seed of every random choice.",
                        fixed="every cell gets the same seeds, one per repeat (--repeats)")
    spark_master: str = setting("local[2]", section="checkers",
                                fixed="the analysis is not what is compared",
                                help="Spark master for the analysis.")
    #: anomalies the user permits, or forbids whatever Kafka documents (plan ``checkers:``)
    allow: list[str] = setting(
        section="checkers", flag="", default_factory=list,
        fixed="set it in the plan's checkers section",
        help="Anomaly names permitted whatever the configuration promises.")
    forbid: list[str] = setting(
        section="checkers", flag="", default_factory=list,
        fixed="set it in the plan's checkers section",
        help="Anomaly names that are violations even where Kafka documents them.")
    #: the live verdict (``kafka_chaos.live``): check the history every ``live_interval_s``
    #: seconds while the run goes; ``stop_on_violation`` (implies ``live``) ends the workload
    #: at the first anomaly counted under ``--fail-on``
    live: bool = setting(False, section="checkers",
                         help="Check the history while the run goes and show the anomalies "
                         "found so far (live.jsonl); the verdict is still the full analysis "
                         "at the end.")
    live_interval_s: float = setting(10.0, section="checkers", flag="--live-interval",
                                     unit="s", ge=1.0, le=3600.0,
                                     help="Seconds between live checks.")
    stop_on_violation: bool = setting(
        False, section="checkers",
        help="End the workload at the first anomaly a live check counts under --fail-on, "
        "then heal, read every partition and analyse (implies --live).")
    #: the steady-state limits (``kafka_chaos.steady``): judged on the availability figures
    max_unavailable: str | None = setting(
        None, section="checkers", label="max_unavailable",
        help="Exit 1 when no send was acknowledged for longer than this: a share of the "
        "workload's time (10%) or seconds in all (30s). The verdict on the data stays.")
    max_recovery_s: float | None = setting(
        None, section="checkers", flag="--max-recovery", unit="s", label="max_recovery",
        ge=0.0, help="Exit 1 when, after a fault is healed, the first acknowledged send takes "
        "longer than this many seconds, or never comes.")

    @field_validator("max_unavailable")
    @classmethod
    def _unavailable(cls, text: str | None) -> str | None:
        return None if text is None else steady.canonical(text)

    @model_validator(mode="after")
    def _combinations(self) -> "RunConfig":
        if self.idempotence is None:
            self.idempotence = default_idempotence(self.client, self.acks, self.retries,
                                                   self.max_in_flight)
        kind = CLIENTS[self.client]
        if self.client_version is not None and not _RELEASE.fullmatch(self.client_version):
            raise ValueError(f"--client-version {self.client_version!r}: a release of "
                             f"{kind.library}, MAJOR.MINOR.PATCH")
        least = self.linger_ms + REQUEST_TIMEOUT_MS
        if kind.checks_delivery_timeout and self.delivery_timeout_ms < least:
            raise ValueError(f"--delivery-timeout-ms {self.delivery_timeout_ms}: the "
                             f"{self.client} producer needs at least linger.ms + "
                             f"request.timeout.ms ({least})")
        if self.sub_via == "share":
            self._share_combinations()
        if self.group_protocol == "consumer" and self.sub_via != "subscribe":
            raise ValueError("--group-protocol consumer needs --sub-via subscribe: assigned "
                             "consumers join no group")
        if (self.group_protocol == "consumer" and self.backend not in ATTACHED
                and version_tuple(self.kafka_version) < (4, 0)):
            raise ValueError(f"--group-protocol consumer needs Kafka 4.0 or later (KIP-848), "
                             f"not --kafka-version {self.kafka_version}")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend {self.backend!r}: choose from {', '.join(BACKENDS)}")
        if self.image is not None and self.backend != "docker":
            raise ValueError("--image needs --backend docker")
        if (self.inventory is not None) != (self.backend in ("ssh", "ssh-attach")):
            raise ValueError("--backend ssh or ssh-attach and --inventory FILE go together")
        if self.accept_unknown_host_keys and self.backend not in ("ssh", "ssh-attach"):
            raise ValueError("--accept-unknown-host-keys needs --backend ssh or ssh-attach")
        if (self.bootstrap_servers is not None) != (self.backend in ATTACHED):
            raise ValueError(f"--bootstrap-servers goes with --backend {' or '.join(ATTACHED)}"
                             " (a running cluster), and they need it")
        if (self.compose_project or self.containers) and self.backend != "docker-attach":
            raise ValueError("--compose-project and --containers need --backend docker-attach")
        if self.client_properties is not None and self.backend not in ATTACHED:
            raise ValueError(f"--client-properties: --backend {self.backend} makes a "
                             f"plaintext cluster of its own; attach with "
                             f"{' or '.join(ATTACHED)}")
        if self.proxy and self.client_properties is not None:
            raise ValueError("--proxy with --client-properties: the proxy speaks plaintext "
                             "only (it does not end TLS or SASL)")
        if self.damage_files and self.backend != "ssh-attach":
            raise ValueError(f"--damage-files is for --backend ssh-attach (its inventory's "
                             f"data_dir), not {self.backend}"
                             + (": the file faults take a cluster of the tool's own without "
                                "it" if self.backend not in ATTACHED else ""))
        if self.fault_last_broker and self.backend not in ATTACHED:
            raise ValueError(f"--fault-last-broker: --backend {self.backend} makes its own "
                             "cluster, whose brokers every fault may take")
        if self.keep_topics and self.backend not in ATTACHED:
            raise ValueError(f"--keep-topics: --backend {self.backend} removes its whole "
                             "cluster at the end")
        if self.backend == "external" and (self.nemesis or self.scenario):
            raise ValueError("--backend external observes a cluster it cannot fault: use "
                             "--nemesis none and no --scenario (attach with docker or ssh "
                             "for faults)")
        for key in self.broker_properties:
            owner = next((s for s in SETTINGS.values()
                          if s.section == "topics" and s.prop == key), None)
            if owner is not None:  # a server property the verdict judges by
                raise ValueError(f"broker_config {key}: set it with {owner.flag}")
            if key in _GENERATED_PROPERTIES:
                raise ValueError(f"broker_config {key}: the cluster backend sets it per node")
        lo, hi = self.ops_per_txn
        if not 1 <= lo <= hi <= 10_000:
            raise ValueError(f"--ops-per-txn {lo}..{hi}: need 1 <= MIN <= MAX <= 10000")
        if (self.idempotence or self.txn) and self.acks != "all":
            raise ValueError(f"--acks {self.acks} with --{'txn' if self.txn else 'idempotence'}: "
                             "the idempotent producer needs acks=all (KIP-98)")
        if (self.idempotence or self.txn) and self.max_in_flight > 5:
            raise ValueError("--idempotence allows at most 5 in-flight requests per connection")
        if self.txn and self.auto_commit:
            raise ValueError("--auto-commit with --txn: a transaction commits its consumer "
                             "offsets itself (send_offsets_to_transaction)")
        if self.abort_p and not self.txn:
            raise ValueError("--abort-p needs --txn")
        if self.txn_ids != "slot" and not self.txn:
            raise ValueError("--txn-ids needs --txn")
        if self.topics > self.keys:
            raise ValueError(f"--topics {self.topics} exceeds --keys {self.keys}")
        # an attached cluster's brokers are counted once it answers (kafka_chaos.attach)
        if self.replication_factor > self.brokers and self.backend not in ATTACHED:
            raise ValueError(f"--replication-factor {self.replication_factor} exceeds "
                             f"--brokers {self.brokers}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"--min-insync-replicas {self.min_insync_replicas} exceeds the "
                             f"replication factor {self.replication_factor}: no write could "
                             "succeed")
        parse_packages(",".join(self.nemesis))  # a plan's nemesis list, checked as --nemesis is
        for key in ("allow", "forbid"):
            unknown = [n for n in getattr(self, key) if n not in ANOMALIES]
            if unknown:
                raise ValueError(f"checkers.{key}: unknown anomaly {unknown[0]!r}; choose from "
                                 f"{', '.join(ANOMALIES)}")
        if both := set(self.allow) & set(self.forbid):
            raise ValueError(f"checkers: {sorted(both)[0]!r} is both allowed and forbidden")
        parse_targets(self.nemesis_targets, self.nemesis)
        if "request" in self.nemesis and not self.proxy:
            raise ValueError("--nemesis request: request faults happen in the Kafka protocol "
                             "proxy; add --proxy")
        if self.proxy_fault is not None:
            if self.proxy_fault not in REQUEST_KINDS:
                raise ValueError(f"--proxy-fault {self.proxy_fault!r}: choose from "
                                 f"{', '.join(REQUEST_KINDS)}")
            if not self.proxy:
                raise ValueError("--proxy-fault: request faults happen in the Kafka protocol "
                                 "proxy; add --proxy")
        if self.scenario is not None and self.nemesis:
            raise ValueError("--scenario runs its own faults: use it with --nemesis none")
        if self.backend in ATTACHED:
            self._attachable()
        if (self.scenario in ("isr-shrink-unclean", "last-replica-standing")
                and (self.brokers < 3 or self.acks != "all")):
            raise ValueError(f"--scenario {self.scenario} needs --brokers >= 3 and --acks all")
        return self

    def _share_combinations(self) -> None:
        """Refuse what a share-group run cannot be: share consumers take no part in
        transactions (KIP-932 leaves exactly-once out), join no consumer group, and need
        Kafka 4.2+, where share groups are production-ready (kafka-clients 4.2+ on the JVM;
        an attached cluster is asked at the start: ``attach.create_topics``)."""
        if self.txn:
            raise ValueError("--sub-via share with --txn: share consumers take no part in "
                             "transactions (KIP-932)")
        if self.group_protocol != "classic":
            raise ValueError("--group-protocol is for --sub-via subscribe, not share")
        since = CLIENTS[self.client].share_since
        if since and self.client_version is not None and version_tuple(self.client_version) < since:
            raise ValueError(f"--sub-via share with --client {self.client} needs "
                             f"{CLIENTS[self.client].library} {'.'.join(map(str, since))} or "
                             f"later (KIP-932), not --client-version {self.client_version}")
        if self.backend not in ATTACHED and version_tuple(self.kafka_version) < (4, 2):
            raise ValueError(f"--sub-via share needs Kafka 4.2 or later (KIP-932), not "
                             f"--kafka-version {self.kafka_version}")

    def _attachable(self) -> None:
        """Refuse faults a cluster the tool did not create must not get: those needing a
        cluster of ours (libfaketime, the lossy filesystem), and any cluster-wide config
        change: the unclean toggle only on the run's own topics, asked for explicitly. A
        scenario's steps are checked on admission (``kafka_chaos.admission``)."""
        for name in own_cluster_only(self.damage_files):
            if name in self.nemesis:
                raise ValueError(f"the {name} faults need a cluster of the tool's own, not "
                                 f"--backend {self.backend}"
                                 + (" (or --backend ssh-attach with --damage-files)"
                                    if name in OPT_IN_FILES else ""))
        if "unclean" not in self.nemesis:
            return
        if "cluster" in parse_targets(self.nemesis_targets, self.nemesis)["unclean"]:
            raise ValueError(f"--nemesis unclean on --backend {self.backend}: its cluster "
                             "target changes a cluster-wide config of a cluster the tool did "
                             "not create; give --nemesis-targets topic (the run's own topics)")

    @property
    def follows_live(self) -> bool:
        """Whether the run checks its history while it goes (``--live`` or
        ``--stop-on-violation``)."""
        return self.live or self.stop_on_violation

    @property
    def idempotent(self) -> bool:
        """Whether producers are idempotent: ``--idempotence``, or implied by ``--txn``."""
        return bool(self.idempotence) or self.txn

    def broker_config(self) -> dict[str, str]:
        """Server properties this run sets on every broker: its ``broker_properties``, every
        ``broker`` setting under its own Kafka property (the settings table's ``prop``: the
        replication factor, ``min.insync.replicas``, unclean leader election and its interval,
        ``replica.lag.time.max.ms``), and the group settings its groups need."""
        return {
            **self.broker_properties,
            **{s.prop: _property(getattr(self, name)) for name, s in SETTINGS.items()
               if s.role == "broker"},
            **(_CONSUMER_GROUPS if version_tuple(self.kafka_version) >= (4, 0) else {}),
            **(self._share_groups() if self.sub_via == "share" else {}),
        }

    def _share_groups(self) -> dict[str, str]:
        """Brokers' share-group settings (KIP-932): the lock and the delivery limit the
        checker judges by, their bounds opened to them, and a session of 6 s as consumer
        groups get (``_CONSUMER_GROUPS``), so that a crashed member leaves within seconds."""
        lock = str(self.share_lock_ms)
        return {"group.share.record.lock.duration.ms": lock,
                "group.share.min.record.lock.duration.ms": lock,
                "group.share.max.record.lock.duration.ms": str(max(self.share_lock_ms, 60000)),
                "group.share.delivery.count.limit": str(self.share_delivery_limit),
                "group.share.min.delivery.count.limit": "2",
                "group.share.session.timeout.ms": "6000",
                "group.share.min.session.timeout.ms": "6000",
                "group.share.heartbeat.interval.ms": "2000",
                "group.share.min.heartbeat.interval.ms": "1000"}


#: Configuration fields that do not make two runs different configurations.
IGNORED = ("seed", "spark_master", "time_limit_s", "max_unavailable", "max_recovery_s")
#: The settings table (``kafka_chaos.settings``): field -> ``Setting``, in field order.
SETTINGS: dict[str, Setting] = table(RunConfig)
#: Settings shown in a configuration's short name, when they differ from the default.
SHOWN = tuple(name for name, s in SETTINGS.items() if s.shown)


def fingerprint(config: dict[str, Any]) -> str:
    """Eight hex digits that name a configuration (a ``RunConfig`` dump) whatever its
    ``IGNORED`` settings: runs with one fingerprint are one configuration, night after night
    (the JUnit test case's name, the trends' groups)."""
    kept = {k: v for k, v in sorted(config.items()) if k not in IGNORED}
    return hashlib.sha1(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:8]


def label(config: dict[str, Any]) -> str:
    """A configuration in short: the ``SHOWN`` settings that differ from the defaults, e.g.
    ``acks=1 nemesis=kill,partition``; ``defaults`` when none does, ``unknown`` without one."""
    if not config:
        return "unknown configuration"
    defaults = RunConfig().model_dump(mode="json")
    parts = []
    for key in SHOWN:
        value = config.get(key)
        if key in config and value != defaults.get(key):
            if key == "scenario":
                value = Path(str(value)).stem
            shown = ",".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{key}={str(shown).lower() if isinstance(value, bool) else shown}")
    return " ".join(parts) or "defaults"
