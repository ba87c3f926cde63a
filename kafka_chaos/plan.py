"""Plan files (``kafka-chaos run --plan FILE``): a run's settings in YAML, flags overriding them.

This holds the ``cluster:`` section: where and what Kafka runs. ::

    cluster:
      backend: ssh
      inventory: hosts.yaml          # relative to the plan file
      brokers: 3
      kafka_version: 3.9.1
      broker_config:                 # any server property the run's options do not own
        num.replica.fetchers: 2
        log.flush.interval.messages: 1

Unknown keys are refused; every error names the file, the line and the key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clusters import yamlfile


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


class Plan(BaseModel):
    """A whole plan file."""

    model_config = ConfigDict(extra="forbid")

    cluster: ClusterPlan = ClusterPlan()


def load(path: Path) -> Plan:
    """Read and validate plan ``path``. Raises ``ValueError`` naming file, line and key."""
    try:
        return yamlfile.load(Path(path), Plan)
    except yamlfile.YamlFileError as exc:
        raise ValueError(f"--plan {exc}") from None


def run_fields(plan: Plan, plan_path: Path) -> dict[str, Any]:
    """The ``RunConfig`` fields the plan sets (paths resolved against the plan's directory;
    booleans in ``broker_config`` written as Kafka spells them, ``true``/``false``)."""
    c = plan.cluster
    base = Path(plan_path).resolve().parent
    fields: dict[str, Any] = c.model_dump(exclude_none=True, exclude={"broker_config"})
    for key in ("inventory", "kafka_home"):
        if key in fields:
            fields[key] = str((base / fields[key]).resolve())
    if c.broker_config:
        fields["broker_properties"] = {k: str(v).lower() if isinstance(v, bool) else str(v)
                                       for k, v in c.broker_config.items()}
    return fields
