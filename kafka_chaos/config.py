"""The run configuration: one validated model, written to ``config.json`` of every run.

Invalid combinations are refused here, before anything starts, with one message naming the
option.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from clusters.dist import DEFAULT_KAFKA_VERSION

SCENARIOS = ("isr-shrink-unclean",)


class RunConfig(BaseModel):
    """Everything that determines a run (with ``seed``, enough to rerun it).

    Units: ``time_limit_s`` and ``nemesis_interval_s`` in seconds, ``rate`` in sends/s,
    ``*_ms`` in milliseconds.
    """

    brokers: int = Field(3, ge=1, le=9)
    controllers: int = Field(0, ge=0, le=5)
    kafka_version: str = DEFAULT_KAFKA_VERSION
    kafka_home: str | None = None
    time_limit_s: float = Field(30.0, gt=0)
    rate: float = Field(100.0, gt=0)
    clients: int = Field(4, ge=1, le=64)
    keys: int = Field(3, ge=1, le=64)
    acks: Literal["0", "1", "all"] = "all"
    idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    delivery_timeout_ms: int = Field(10000, ge=1000)
    replication_factor: int = Field(3, ge=1)
    min_insync_replicas: int = Field(2, ge=1)
    unclean_leader_election: bool = False
    replica_lag_time_max_ms: int = Field(10000, ge=100)
    unclean_leader_election_interval_ms: int = Field(1000, ge=100)
    nemesis: list[str] = Field(default_factory=list)
    nemesis_interval_s: float = Field(10.0, gt=0)
    scenario: str | None = None
    seed: int = 0
    spark_master: str = "local[2]"

    @model_validator(mode="after")
    def _combinations(self) -> "RunConfig":
        if self.idempotence and self.acks != "all":
            raise ValueError(f"--acks {self.acks} with --idempotence: the idempotent producer "
                             "needs acks=all (KIP-98)")
        if self.idempotence and self.max_in_flight > 5:
            raise ValueError("--idempotence allows at most 5 in-flight requests per connection")
        if self.replication_factor > self.brokers:
            raise ValueError(f"--replication-factor {self.replication_factor} exceeds "
                             f"--brokers {self.brokers}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"--min-insync-replicas {self.min_insync_replicas} exceeds the "
                             f"replication factor {self.replication_factor}: no write could succeed")
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise ValueError(f"--scenario {self.scenario!r}: choose from {', '.join(SCENARIOS)}")
        if self.scenario is not None and self.nemesis:
            raise ValueError("--scenario runs its own faults: use it with --nemesis none")
        if self.scenario == "isr-shrink-unclean" and (self.brokers < 3 or self.acks != "all"):
            raise ValueError("--scenario isr-shrink-unclean needs --brokers >= 3 and --acks all")
        return self

    def broker_config(self) -> dict[str, str]:
        """Server properties this run sets on every broker."""
        return {
            "default.replication.factor": str(self.replication_factor),
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
            "replica.lag.time.max.ms": str(self.replica_lag_time_max_ms),
            "unclean.leader.election.interval.ms": str(self.unclean_leader_election_interval_ms),
        }
