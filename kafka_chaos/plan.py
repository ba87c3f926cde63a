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
    checkers: {fail_on: violation, forbid: [duplicate], allow: [], spark_master: "local[2]"}
    # the live verdict: check while the run goes, end it at the first violation
    # checkers: {live: true, live_interval_s: 10, stop_on_violation: true}
    seed: 7
    # kafka-chaos compare only: the cells are every combination; each runs `repeats` times
    # with seeds seed, seed+1, ... (the same in every cell)
    matrix: {acks: ["1", all], min.insync.replicas: [1, 2]}
    repeats: 2

Each key takes the values of the ``run`` option of the same meaning: sections and keys come
from the settings table (``kafka_chaos.settings``), as the options do (``kafka-chaos plan
schema`` prints the JSON schema, with each key's help). Unknown keys and bad values are
refused; every error names the file, the line and the key path. Matrix keys and values are
those of ``compare --matrix`` (``kafka_chaos.matrix``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic.fields import FieldInfo

from kafka_chaos import matrix as matrices
from kafka_chaos.catalogue.anomalies import ANOMALIES
from kafka_chaos.clusters import yamlfile
from kafka_chaos.config import PATHS, SETTINGS, RunConfig
from kafka_chaos.settings import SECTIONS


def keys_of(section: str) -> dict[str, str]:
    """Plan key -> ``RunConfig`` field of a plan file section (the settings table,
    ``kafka_chaos.settings``), in field order."""
    return {s.key: name for name, s in SETTINGS.items() if s.section == section}


def _acks_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _section(name: str, section: str, doc: str) -> Any:
    """A section model whose keys carry the type, bounds and help of their ``RunConfig``
    field (each optional: absent, the ``run`` option's default)."""
    keys = keys_of(section)
    fields: dict[str, Any] = {}
    for key, field in keys.items():
        info = RunConfig.model_fields[field]
        fields[key] = (Optional[info.annotation],
                       FieldInfo.merge_field_infos(info, default=None, default_factory=None))
    validators = {"acks_text": field_validator("acks", mode="before")(_acks_text)} \
        if "acks" in keys else {}  # YAML reads acks: 1 as a number
    return create_model(name, __config__=ConfigDict(extra="forbid"), __doc__=doc,
                        __validators__=validators, **fields)


class ClusterPlan(_section("ClusterBase", "cluster", "")):  # type: ignore[misc]
    """The ``cluster:`` section: where and what Kafka runs. ``broker_config`` holds Kafka
    broker configs (server properties) for every broker; ``RunConfig`` refuses those its
    own settings or the backend set."""

    inventory: Optional[Path] = Field(None, description="relative to the plan file")
    kafka_home: Optional[Path] = Field(None, description="relative to the plan file")
    client_properties: Optional[Path] = Field(None, description="relative to the plan file")
    broker_config: dict[str, str | int | float | bool] = {}


TopicsPlan = _section("TopicsPlan", "topics", "The ``topics:`` section: the workload's topics.")
WorkloadPlan = _section("WorkloadPlan", "workload", "The ``workload:`` section: clients, "
                        "producer, consumer and transaction settings.")


class NemesisPlan(_section("NemesisBase", "nemesis", "")):  # type: ignore[misc]
    """The ``nemesis:`` section: ``faults`` (``--nemesis`` packages), ``targets``
    (``--nemesis-targets``, as a list), ``interval_s``, or a ``scenario`` (a name, or a
    schedule file relative to the plan)."""

    targets: Optional[list[str | int]] = None


class CheckersPlan(_section("CheckersBase", "checkers", "")):  # type: ignore[misc]
    """The ``checkers:`` section: ``fail_on`` (``--fail-on``); ``allow``: anomaly names
    permitted whatever the configuration promises; ``forbid``: anomaly names that are
    violations even where Kafka documents them (e.g. ``duplicate`` for a pipeline that
    cannot take one); ``live``, ``live_interval_s``, ``stop_on_violation``: the live verdict
    (``--live``, ``--live-interval``, ``--stop-on-violation``); ``spark_master``: where the
    analysis runs."""

    fail_on: Optional[Literal["violation", "any"]] = None

    @field_validator("allow", "forbid")
    @classmethod
    def _known(cls, names: list[str] | None) -> list[str] | None:
        for name in names or []:
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
    """The plan's ``matrix:`` section as ``kafka_chaos.matrix`` dimensions, in file order.
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
    base = Path(plan_path).resolve().parent
    fields: dict[str, Any] = {}
    for name in SECTIONS[:-1]:
        keys = keys_of(name)
        dumped = getattr(plan, name).model_dump(exclude_none=True)
        fields.update({keys[k]: v for k, v in dumped.items() if k in keys})
    for key in PATHS:
        if key in fields:
            fields[key] = str((base / fields[key]).resolve())
    fields.pop("broker_properties", None)
    if plan.cluster.broker_config:
        fields["broker_properties"] = {k: str(v).lower() if isinstance(v, bool) else str(v)
                                       for k, v in plan.cluster.broker_config.items()}
    if plan.nemesis.targets is not None:
        fields["nemesis_targets"] = ",".join(str(t) for t in plan.nemesis.targets)
    scenario = fields.get("scenario")
    if scenario is not None and scenario.endswith((".yaml", ".yml")):
        fields["scenario"] = str((base / scenario).resolve())
    for key in ("allow", "forbid"):  # an empty list sets nothing
        if not fields.get(key):
            fields.pop(key, None)
    if plan.checkers.fail_on is not None:
        fields["fail_on"] = plan.checkers.fail_on
    if plan.seed is not None:
        fields["seed"] = plan.seed
    return fields
