"""The ssh backend's inventory: which hosts run which Kafka nodes, and how to reach them.

A YAML file (``--inventory FILE``)::

    defaults:                      # optional; any host setting, for every node
      user: kafka
      key_file: ~/.ssh/id_ed25519  # else ssh-agent and ~/.ssh/id_*
      sudo: true                   # iptables (and Cluster.exec) via `sudo -n`
      kafka_home: upload           # or a directory with libs/kafka_2.13-<version>.jar
    nodes:
      - {host: 10.0.0.11, node_id: 1, roles: [broker, controller]}
      - {host: 10.0.0.12, node_id: 2, roles: [broker, controller]}
      - {host: 10.0.0.13, node_id: 3, roles: [broker, controller], port: 2222}

No passwords: authentication is by key file or ssh-agent, so no secret is ever in the
inventory, the run's ``config.json`` or its logs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kafka_chaos.clusters import yamlfile
from kafka_chaos.clusters.base import Node
from kafka_chaos.clusters.errors import EnvironmentUnsupported

#: Host settings a node takes from ``defaults`` unless it sets them itself.
DEFAULTS: dict[str, object] = {
    "port": 22, "user": "root", "key_file": None, "known_hosts": "~/.ssh/known_hosts",
    "sudo": False, "kafka_home": "upload", "work_dir": "/var/tmp/kafka-chaos", "java": "java",
    "heap_mb": 512,
}


def unique(nodes: list, fields: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the first of ``fields`` whose value (None aside) two
    ``nodes`` share."""
    for what in fields:
        values = [getattr(n, what) for n in nodes if getattr(n, what) is not None]
        if dups := sorted({v for v in values if values.count(v) > 1}, key=str):
            raise ValueError(f"nodes: {what} {dups[0]} appears more than once")


class Login(BaseModel):
    """How to reach a host; None means "inherit" (from ``defaults``, then the defaults of
    the inventory's kind)."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(None, ge=1, le=65535, description="SSH port")
    user: str | None = Field(None, description="SSH user; Kafka runs as this user")
    key_file: str | None = Field(None, description="private key; else ssh-agent, ~/.ssh/id_*")
    known_hosts: str | None = Field(None, description="host keys to verify against")
    sudo: bool | None = Field(None, description="run iptables and exec via `sudo -n`")

    @model_validator(mode="before")
    @classmethod
    def _no_passwords(cls, data):
        if isinstance(data, dict) and any("pass" in str(k).lower() for k in data):
            raise ValueError("passwords are not accepted: use key_file or ssh-agent")
        return data


class _Settings(Login):
    """Host settings of a node the ssh backend installs and runs."""

    kafka_home: str | None = Field(None, description='"upload" or a remote Kafka directory')
    work_dir: str | None = Field(None, description="remote directory for node dirs and jars")
    java: str | None = Field(None, description="remote java 17+ executable")
    heap_mb: int | None = Field(None, ge=128, description="broker JVM heap, MiB")

    @field_validator("kafka_home", "work_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and value != "upload" and not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute remote path")
        return value


class _NodeEntry(_Settings):
    host: str = Field(description="SSH address of the host")
    address: str | None = Field(None, description="Kafka listener address (default: host)")
    node_id: int = Field(ge=0)
    name: str | None = Field(None, pattern=r"^[a-z][a-z0-9]{0,11}$")
    roles: list[Literal["broker", "controller"]] = Field(min_length=1)
    broker_port: int = Field(9092, ge=1, le=65535)
    controller_port: int = Field(9093, ge=1, le=65535)


class _InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: _Settings = _Settings()
    nodes: list[_NodeEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "_InventoryFile":
        # one node per host: the tool's iptables chains (partitions) are per host
        unique(self.nodes, ("node_id", "name", "host"))
        roles = {r for n in self.nodes for r in n.roles}
        if roles != {"broker", "controller"}:
            raise ValueError("nodes: need at least one broker and one controller")
        return self


@dataclasses.dataclass(frozen=True)
class SshHost:
    """One inventory node with every setting resolved (paths ``~``-expanded).

    ``node`` is what the rest of the tool sees; the other fields say how to reach and run it.
    ``port`` is the SSH port; ``heap_mb`` in MiB.
    """

    node: Node
    host: str
    port: int
    user: str
    key_file: str | None
    known_hosts: str
    sudo: bool
    kafka_home: str
    work_dir: str
    java: str
    heap_mb: int

    def as_record(self) -> dict:
        """JSON-able form for the backend's state file (no secrets: there are none)."""
        record = dataclasses.asdict(self)
        record["node"]["roles"] = list(self.node.roles)
        return record

    @classmethod
    def from_record(cls, record: dict) -> "SshHost":
        """Inverse of ``as_record``."""
        node = dict(record["node"], roles=tuple(record["node"]["roles"]))
        return cls(**{**record, "node": Node(**node)})


def _expand(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser())


def load(path: Path) -> list[SshHost]:
    """The hosts of inventory ``path``, in file order.

    Raises ``EnvironmentUnsupported`` naming the file, line and key of the first problem (bad
    YAML, unknown key, wrong type, duplicate node id, a key file that does not exist).
    """
    try:
        inv = yamlfile.load(Path(path), _InventoryFile)
    except yamlfile.YamlFileError as exc:
        raise EnvironmentUnsupported(f"--inventory {exc}") from None
    base = {**DEFAULTS, **inv.defaults.model_dump(exclude_none=True)}
    hosts = []
    for i, entry in enumerate(inv.nodes):
        s = {**base, **entry.model_dump(exclude_none=True, include=set(DEFAULTS))}
        key_file = _expand(s["key_file"])
        if key_file is not None and not Path(key_file).is_file():
            raise EnvironmentUnsupported(f"--inventory {path}, nodes.{i}.key_file: "
                                         f"{key_file} does not exist")
        name = entry.name or f"n{entry.node_id}"
        node = Node(entry.node_id, name, entry.address or entry.host, tuple(entry.roles),
                    entry.broker_port, entry.controller_port)
        hosts.append(SshHost(node, entry.host, s["port"], s["user"], key_file,
                             _expand(s["known_hosts"]), s["sudo"], s["kafka_home"],
                             s["work_dir"], s["java"], s["heap_mb"]))
    return hosts


def check_shape(hosts: list[SshHost], brokers: int, controllers: int, path: Path) -> None:
    """Raise ``EnvironmentUnsupported`` unless the inventory has ``brokers`` broker nodes and
    ``controllers`` controller-only nodes (the counts ``--brokers``/``--controllers`` ask for)."""
    has_b = sum(h.node.is_broker for h in hosts)
    has_c = sum(h.node.roles == ("controller",) for h in hosts)
    if (has_b, has_c) != (brokers, controllers):
        raise EnvironmentUnsupported(
            f"--inventory {path} lists {has_b} broker and {has_c} controller-only nodes, but the "
            f"run asks for --brokers {brokers} --controllers {controllers}: make them agree")

