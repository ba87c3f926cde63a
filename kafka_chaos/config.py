"""The run configuration: one validated model, written to ``config.json`` of every run and to
the history's header (the verdict judges anomalies against it, ``analysis/promises.py``).

Invalid combinations are refused here, before anything starts, with one message naming the
option.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from kafka_chaos.clusters import backends
from kafka_chaos.clusters.dist import DEFAULT_KAFKA_VERSION
from kafka_chaos.analysis.names import ANOMALIES
from kafka_chaos.nemesis import script
from kafka_chaos.nemesis.schedule import PACKAGES, parse_packages, parse_targets

SCENARIOS = tuple(script.names())
_RANGE = re.compile(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?")


def parse_range(text: str) -> tuple[int, int]:
    """``"1..4"`` -> ``(1, 4)``; ``"3"`` -> ``(3, 3)``. Raises ``ValueError`` otherwise."""
    m = _RANGE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not N or MIN..MAX")
    lo = int(m[1])
    return lo, int(m[2]) if m[2] is not None else lo


#: Server properties the run's options set (the verdict judges by them): property -> option
#: (None: no option, the run's own value).
_OWNED_PROPERTIES = {
    "default.replication.factor": "replication-factor", "min.insync.replicas":
    "min-insync-replicas", "unclean.leader.election.enable": "unclean-leader-election",
    "replica.lag.time.max.ms": "replica-lag-time-max-ms",
    "unclean.leader.election.interval.ms": None}
#: Server properties each backend writes per node (``clusters/kafka_config.server_properties``).
_GENERATED_PROPERTIES = frozenset({
    "process.roles", "node.id", "controller.quorum.voters", "controller.listener.names",
    "listener.security.protocol.map", "log.dirs", "listeners", "advertised.listeners",
    "inter.broker.listener.name"})


def load_scenario(spec: str) -> script.Script:
    """``--scenario``: a built-in scenario's name, or the path of a schedule file (YAML,
    ``nemesis.script``). Raises ``ValueError`` naming the choices, or the file, line and key."""
    if spec in SCENARIOS:
        return script.built_in(spec)
    if not spec.endswith((".yaml", ".yml")) and not Path(spec).exists():
        raise ValueError(f"--scenario {spec!r}: choose from {', '.join(SCENARIOS)}, or give a "
                         "schedule file (.yaml)")
    return script.load(Path(spec))


class RunConfig(BaseModel):
    """Everything that determines a run (with ``seed``, enough to rerun it).

    Units: ``time_limit_s``, ``nemesis_interval_s``, ``crash_client_interval_s`` in seconds,
    ``rate`` in ops/s (all client processes together), ``*_ms`` in milliseconds. ``ops_per_txn``
    is ``(min, max)`` micro-ops per op (sends of a ``send`` op, mops of a transaction).
    """

    backend: str = "local"
    image: str | None = None
    inventory: str | None = None
    accept_unknown_host_keys: bool = False
    brokers: int = Field(3, ge=1, le=9)
    controllers: int = Field(0, ge=0, le=5)
    kafka_version: str = DEFAULT_KAFKA_VERSION
    kafka_home: str | None = None
    time_limit_s: float = Field(30.0, gt=0)
    rate: float = Field(200.0, gt=0)
    clients: int = Field(4, ge=1, le=64)
    keys: int = Field(6, ge=1, le=256)
    topics: int = Field(1, ge=1, le=16)
    ops_per_txn: tuple[int, int] = (1, 4)
    poll_p: float = Field(0.25, ge=0, le=1)
    sub_via: Literal["assign", "subscribe"] = "assign"
    sub_p: float = Field(0.02, ge=0, lt=1)
    txn: bool = False
    abort_p: float = Field(0.0, ge=0, le=1)
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    auto_commit: bool = False
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    crash_clients: bool = False
    crash_client_interval_s: float = Field(10.0, gt=0)
    acks: Literal["0", "1", "all"] = "all"
    idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    linger_ms: int = Field(5, ge=0)
    delivery_timeout_ms: int = Field(10000, ge=1000)
    replication_factor: int = Field(3, ge=1)
    min_insync_replicas: int = Field(2, ge=1)
    unclean_leader_election: bool = False
    replica_lag_time_max_ms: int = Field(10000, ge=100)
    unclean_leader_election_interval_ms: int = Field(1000, ge=100)
    nemesis: list[str] = Field(default_factory=list)
    nemesis_interval_s: float = Field(10.0, gt=0)
    #: ``--nemesis-targets`` as given ("" = each fault's default targets)
    nemesis_targets: str = ""
    scenario: str | None = None
    #: the options the scenario set (field -> value; options the user gave are kept)
    scenario_settings: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    spark_master: str = "local[2]"
    #: server properties for every broker beyond those the options above set (plan files)
    broker_properties: dict[str, str] = Field(default_factory=dict)
    #: anomalies the user permits, or forbids whatever Kafka documents (plan ``checkers:``)
    allow: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    #: the live verdict (``kafka_chaos.live``): check the history every ``live_interval_s``
    #: seconds while the run goes; ``stop_on_violation`` (implies ``live``) ends the workload
    #: at the first anomaly counted under ``--fail-on``
    live: bool = False
    live_interval_s: float = Field(10.0, ge=1.0, le=3600.0)
    stop_on_violation: bool = False

    @model_validator(mode="after")
    def _combinations(self) -> "RunConfig":
        if self.backend not in backends.NAMES:
            raise ValueError(f"--backend {self.backend!r}: choose from {', '.join(backends.NAMES)}")
        if self.image is not None and self.backend != "docker":
            raise ValueError("--image needs --backend docker")
        if (self.inventory is not None) != (self.backend == "ssh"):
            raise ValueError("--backend ssh and --inventory FILE go together")
        if self.accept_unknown_host_keys and self.backend != "ssh":
            raise ValueError("--accept-unknown-host-keys needs --backend ssh")
        for key in self.broker_properties:
            if key in _OWNED_PROPERTIES:
                option = _OWNED_PROPERTIES[key]
                raise ValueError(f"broker_config {key}: " + (f"set it with --{option}" if option
                                 else "the run sets it (scenarios rely on its value)"))
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
        if self.topics > self.keys:
            raise ValueError(f"--topics {self.topics} exceeds --keys {self.keys}")
        if self.replication_factor > self.brokers:
            raise ValueError(f"--replication-factor {self.replication_factor} exceeds "
                             f"--brokers {self.brokers}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"--min-insync-replicas {self.min_insync_replicas} exceeds the "
                             f"replication factor {self.replication_factor}: no write could succeed")
        parse_packages(",".join(self.nemesis))  # a plan's nemesis list, checked as --nemesis is
        for key in ("allow", "forbid"):
            unknown = [n for n in getattr(self, key) if n not in ANOMALIES]
            if unknown:
                raise ValueError(f"checkers.{key}: unknown anomaly {unknown[0]!r}; choose from "
                                 f"{', '.join(ANOMALIES)}")
        if both := set(self.allow) & set(self.forbid):
            raise ValueError(f"checkers: {sorted(both)[0]!r} is both allowed and forbidden")
        parse_targets(self.nemesis_targets, self.nemesis)
        if self.scenario is not None:
            load_scenario(self.scenario)
        if self.scenario is not None and self.nemesis:
            raise ValueError("--scenario runs its own faults: use it with --nemesis none")
        if (self.scenario in ("isr-shrink-unclean", "last-replica-standing")
                and (self.brokers < 3 or self.acks != "all")):
            raise ValueError(f"--scenario {self.scenario} needs --brokers >= 3 and --acks all")
        return self

    @property
    def follows_live(self) -> bool:
        """Whether the run checks its history while it goes (``--live`` or
        ``--stop-on-violation``)."""
        return self.live or self.stop_on_violation

    @property
    def idempotent(self) -> bool:
        """Whether producers are idempotent: ``--idempotence``, or implied by ``--txn``."""
        return self.idempotence or self.txn

    def backend_options(self):
        """The ``clusters.backends.BackendOptions`` of this run."""
        return backends.BackendOptions(
            image=self.image, inventory=Path(self.inventory) if self.inventory else None,
            accept_unknown_host_keys=self.accept_unknown_host_keys,
            lossy_fs="lose-unfsynced" in self.faults(),
            clock=bool({"clock-bump", "clock-strobe"} & self.faults()))

    def faults(self) -> set[str]:
        """Every nemesis ``f`` this run may start: its packages', or its scenario's steps'."""
        if self.scenario:
            return {f for step in load_scenario(self.scenario).steps for f in step.do}
        starts = [PACKAGES[name]["start"] for name in self.nemesis]
        return {f for start in starts for f in ([start] if isinstance(start, str) else start)}

    def broker_config(self) -> dict[str, str]:
        """Server properties this run sets on every broker."""
        return {
            **self.broker_properties,
            "default.replication.factor": str(self.replication_factor),
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
            "replica.lag.time.max.ms": str(self.replica_lag_time_max_ms),
            "unclean.leader.election.interval.ms": str(self.unclean_leader_election_interval_ms),
        }

    def workload_settings(self):
        """The ``workloads.settings.WorkloadSettings`` of this run."""
        from kafka_chaos.workloads.settings import WorkloadSettings

        return WorkloadSettings(
            clients=self.clients, rate=self.rate, mops_min=self.ops_per_txn[0],
            mops_max=self.ops_per_txn[1], poll_p=self.poll_p, sub_via=self.sub_via,
            sub_p=self.sub_p, txn=self.txn, abort_p=self.abort_p,
            crash_interval_s=self.crash_client_interval_s if self.crash_clients else 0.0,
            acks=self.acks, idempotence=self.idempotence, retries=self.retries,
            max_in_flight=self.max_in_flight, delivery_timeout_ms=self.delivery_timeout_ms,
            linger_ms=self.linger_ms, auto_commit=self.auto_commit,
            auto_offset_reset=self.auto_offset_reset, isolation_level=self.isolation_level)


#: Configuration fields that do not make two runs different configurations.
IGNORED = ("seed", "spark_master", "time_limit_s")
#: Settings shown in a group's name, when they differ from the default.
SHOWN = ("kafka_version", "backend", "acks", "min_insync_replicas", "replication_factor",
         "idempotence", "txn", "isolation_level", "max_in_flight", "unclean_leader_election",
         "nemesis", "scenario", "brokers")


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
