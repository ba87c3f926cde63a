"""Plan files (``kafka-chaos run --plan FILE``): a run's settings in YAML, flags overriding them.

Sections (every key optional; absent: the ``run`` option's default)::

    cluster:                         # where and what Kafka runs
      backend: ssh
      inventory: hosts.yaml          # relative to the plan file
      brokers: 3
      kafka_version: 3.9.1
      broker_config:                 # any server property the run's options do not own
        num.replica.fetchers: 2
    topics: {count: 1, keys: 6, replication_factor: 3, min_insync_replicas: 2,
             unclean_leader_election: false, replica_lag_time_max_ms: 10000}
    workload:                        # clients, producers, consumers, transactions
      time_limit_s: 600
      acks: all
      idempotence: true
      ops_per_txn: [1, 4]
    nemesis: {faults: [kill, partition], targets: [leader, halves], interval_s: 10}
    # or: nemesis: {scenario: isr-shrink-unclean}    (a name, or a file relative to the plan)
    checkers: {fail_on: violation, forbid: [duplicate], allow: []}
    # the live verdict: check while the run goes, end it at the first violation
    # checkers: {live: true, live_interval_s: 10, stop_on_violation: true}
    seed: 7
    # kafka-chaos compare only: the cells are every combination; each runs `repeats` times
    # with seeds seed, seed+1, ... (the same in every cell)
    matrix: {acks: ["1", all], min.insync.replicas: [1, 2]}
    repeats: 2

Each key takes the values of the ``run`` option of the same meaning (``kafka-chaos plan
schema`` prints the JSON schema). Unknown keys and bad values are refused; every error names
the file, the line and the key path. Matrix keys and values are those of ``compare
--matrix`` (``kafka_chaos.compare.matrix``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic.fields import FieldInfo

from kafka_chaos.compare import matrix as matrices
from kafka_chaos.analysis.names import ANOMALIES
from kafka_chaos.clusters import yamlfile
from kafka_chaos.config import RunConfig


class ClusterPlan(BaseModel):
    """The ``cluster:`` section; each key is the ``run`` option of the same name (None: the
    option's default). ``broker_config`` holds Kafka broker configs (server properties) for
    every broker; ``RunConfig`` refuses those its own options or the backend set."""

    model_config = ConfigDict(extra="forbid")

    backend: str | None = None
    image: str | None = None
    inventory: Path | None = Field(None, description="relative to the plan file")
    accept_unknown_host_keys: bool | None = None
    brokers: int | None = None
    controllers: int | None = None
    kafka_version: str | None = None
    kafka_home: Path | None = Field(None, description="relative to the plan file")
    broker_config: dict[str, str | int | float | bool] = {}


#: Plan key -> ``RunConfig`` field, per section (keys named as the ``run`` options are).
TOPICS = {"count": "topics", "keys": "keys", "replication_factor": "replication_factor",
          "min_insync_replicas": "min_insync_replicas",
          "unclean_leader_election": "unclean_leader_election",
          "replica_lag_time_max_ms": "replica_lag_time_max_ms",
          "unclean_leader_election_interval_ms": "unclean_leader_election_interval_ms"}
WORKLOAD = {k: k for k in (
    "time_limit_s", "rate", "clients", "ops_per_txn", "poll_p", "sub_via", "sub_p", "txn",
    "abort_p", "isolation_level", "auto_commit", "auto_offset_reset", "crash_clients",
    "crash_client_interval_s", "acks", "idempotence", "retries", "max_in_flight", "linger_ms",
    "delivery_timeout_ms")}
NEMESIS = {"faults": "nemesis", "interval_s": "nemesis_interval_s", "scenario": "scenario"}


def _acks_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _section(name: str, keys: dict[str, str], doc: str) -> type[BaseModel]:
    """A section model whose keys carry the type and bounds of their ``RunConfig`` field."""
    fields: dict[str, Any] = {}
    for key, field in keys.items():
        info = RunConfig.model_fields[field]
        fields[key] = (Optional[info.annotation],
                       FieldInfo.merge_field_infos(info, default=None, default_factory=None))
    validators = {"acks_text": field_validator("acks", mode="before")(_acks_text)} \
        if "acks" in keys else {}  # YAML reads acks: 1 as a number
    return create_model(name, __config__=ConfigDict(extra="forbid"), __doc__=doc,
                        __validators__=validators, **fields)


TopicsPlan = _section("TopicsPlan", TOPICS, "The ``topics:`` section: the workload's topics.")
WorkloadPlan = _section("WorkloadPlan", WORKLOAD, "The ``workload:`` section: clients, "
                        "producer, consumer and transaction settings.")
_NemesisBase = _section("NemesisPlan", NEMESIS, "The ``nemesis:`` section.")


class NemesisPlan(_NemesisBase):  # type: ignore[misc, valid-type]
    """The ``nemesis:`` section: ``faults`` (``--nemesis`` packages), ``targets``
    (``--nemesis-targets``), ``interval_s``, or a ``scenario`` (a name, or a schedule file
    relative to the plan)."""

    targets: Optional[list[str | int]] = None


class CheckersPlan(BaseModel):
    """The ``checkers:`` section: ``fail_on`` (``--fail-on``); ``allow``: anomaly names
    permitted whatever the configuration promises; ``forbid``: anomaly names that are
    violations even where Kafka documents them (e.g. ``duplicate`` for a pipeline that
    cannot take one); ``live``, ``live_interval_s``, ``stop_on_violation``: the live verdict
    (``--live``, ``--live-interval``, ``--stop-on-violation``)."""

    model_config = ConfigDict(extra="forbid")

    fail_on: Optional[Literal["violation", "any"]] = None
    allow: list[str] = []
    forbid: list[str] = []
    live: Optional[bool] = None
    live_interval_s: Optional[float] = Field(None, ge=1.0, le=3600.0)
    stop_on_violation: Optional[bool] = None

    @field_validator("allow", "forbid")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in ANOMALIES:
                raise ValueError(f"unknown anomaly {name!r}; choose from {', '.join(ANOMALIES)}")
        return names


class Plan(BaseModel):
    """A whole plan file."""

    model_config = ConfigDict(extra="forbid")

    cluster: ClusterPlan = ClusterPlan()
    topics: TopicsPlan = TopicsPlan()  # type: ignore[valid-type]
    workload: WorkloadPlan = WorkloadPlan()  # type: ignore[valid-type]
    nemesis: NemesisPlan = NemesisPlan()
    checkers: CheckersPlan = CheckersPlan()
    seed: Optional[int] = None
    matrix: dict[str, list[Any]] = Field(
        {}, description="kafka-chaos compare: setting -> values (as --matrix); the cells are "
        "every combination")
    repeats: Optional[int] = Field(None, ge=1, le=1000, description="kafka-chaos compare: "
                                   "runs per cell, with seeds seed .. seed+repeats-1")

    @property
    def compares(self) -> bool:
        """Whether the plan is a comparison's (a ``matrix`` or ``repeats`` section)."""
        return bool(self.matrix) or self.repeats is not None


def schema() -> dict[str, Any]:
    """The plan file's JSON schema (``kafka-chaos plan schema``)."""
    return Plan.model_json_schema()


def load(path: Path) -> Plan:
    """Read and validate plan ``path``. Raises ``ValueError`` naming file, line and key."""
    try:
        plan = yamlfile.load(Path(path), Plan)
        dimensions(plan, path)
    except yamlfile.YamlFileError as exc:
        raise ValueError(f"--plan {exc}") from None
    return plan


def dimensions(plan: Plan, path: Path) -> list[matrices.Dimension]:
    """The plan's ``matrix:`` section as ``kafka_chaos.compare.matrix`` dimensions, in file order.
    Raises ``yamlfile.YamlFileError`` naming the line and key (``matrix.acks``)."""
    dims: dict[str, matrices.Dimension] = {}
    for key, values in plan.matrix.items():
        try:
            dim = matrices.dimension(key, values, f"matrix.{key}")
        except ValueError as exc:
            message = str(exc).removeprefix(f"matrix.{key}: ")
            raise yamlfile.error_at(path, ("matrix", key), message) from None
        if dim.field in dims:
            raise yamlfile.error_at(path, ("matrix", key), f"{dim.label} is given twice")
        dims[dim.field] = dim
    return list(dims.values())


def run_fields(plan: Plan, plan_path: Path) -> dict[str, Any]:
    """The ``RunConfig`` fields the plan sets (paths resolved against the plan's directory;
    booleans in ``broker_config`` written as Kafka spells them, ``true``/``false``), plus
    ``fail_on`` when its ``checkers`` section sets it."""
    c = plan.cluster
    base = Path(plan_path).resolve().parent
    fields: dict[str, Any] = c.model_dump(exclude_none=True, exclude={"broker_config"})
    for key in ("inventory", "kafka_home"):
        if key in fields:
            fields[key] = str((base / fields[key]).resolve())
    if c.broker_config:
        fields["broker_properties"] = {k: str(v).lower() if isinstance(v, bool) else str(v)
                                       for k, v in c.broker_config.items()}
    for section, keys in ((plan.topics, TOPICS), (plan.workload, WORKLOAD),
                          (plan.nemesis, NEMESIS)):
        fields.update({keys[k]: v for k, v in section.model_dump(exclude_none=True).items()
                       if k in keys})
    if plan.nemesis.targets is not None:
        fields["nemesis_targets"] = ",".join(str(t) for t in plan.nemesis.targets)
    scenario = fields.get("scenario")
    if scenario is not None and scenario.endswith((".yaml", ".yml")):
        fields["scenario"] = str((base / scenario).resolve())
    if plan.checkers.fail_on is not None:
        fields["fail_on"] = plan.checkers.fail_on
    for key in ("allow", "forbid"):
        if getattr(plan.checkers, key):
            fields[key] = getattr(plan.checkers, key)
    fields.update(plan.checkers.model_dump(
        include={"live", "live_interval_s", "stop_on_violation"}, exclude_none=True))
    if plan.seed is not None:
        fields["seed"] = plan.seed
    return fields
