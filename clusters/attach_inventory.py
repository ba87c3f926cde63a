"""The ssh-attach backend's inventory: the hosts where your brokers already run, and how you
start, stop and kill each one. Nothing is installed or uploaded; these commands are all the
tool runs besides ``iptables`` (partitions) and reading logs::

    defaults:
      user: kafka
      key_file: ~/.ssh/id_ed25519
      sudo: true                               # commands and iptables via `sudo -n`
      start: systemctl start kafka
      stop: systemctl stop kafka
      kill: systemctl kill --signal=KILL kafka # default: kill -KILL of the pid below
      pid: systemctl show --property MainPID --value kafka   # pause/resume, is it running
      logs: [/var/log/kafka/server.log]        # fetched into the run directory
      data_dir: /var/lib/kafka/data            # log.dirs: only for --damage-files
      # metadata_dir: /var/lib/kafka/meta      # metadata.log.dir, when it is another one
    nodes:
      - {host: 10.0.0.11, node_id: 1}
      - {host: 10.0.0.12, node_id: 2}

``node_id`` is the broker's ``node.id``: the run matches it to the brokers of a Metadata
answer and refuses an inventory that misses one. ``data_dir`` is read and written over SFTP
as the login ``user`` (``sudo`` is for commands only), and only when the run opts in to file
faults (``--damage-files``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafka_chaos.clusters import yamlfile
from kafka_chaos.clusters.errors import EnvironmentUnsupported
from kafka_chaos.clusters.inventory import Login, unique

#: Settings a node takes from ``defaults`` unless it sets them itself. ``pid`` prints the
#: broker's pid (empty or 0 when it is not running).
DEFAULTS: dict[str, object] = {
    "port": 22, "user": "root", "key_file": None, "known_hosts": "~/.ssh/known_hosts",
    "sudo": False, "start": None, "stop": None, "kill": None,
    "pid": "pgrep -o -f 'kafka[.]Kafka'", "logs": [], "data_dir": None, "metadata_dir": None}


class _Commands(Login):
    start: str | None = Field(None, description="shell command that starts the broker")
    stop: str | None = Field(None, description="shell command that stops it (SIGTERM)")
    kill: str | None = Field(None, description="shell command that SIGKILLs it")
    pid: str | None = Field(None, description="shell command printing its pid")
    logs: list[str] | None = Field(None, description="its log files")
    data_dir: str | None = Field(None, description="its log.dirs (one directory)")
    metadata_dir: str | None = Field(None, description="its metadata.log.dir, if another")


class _Node(_Commands):
    host: str = Field(description="SSH address of the host")
    node_id: int = Field(ge=0)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: _Commands = _Commands()
    nodes: list[_Node] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "_File":
        unique(self.nodes, ("node_id", "host"))
        return self


@dataclasses.dataclass(frozen=True)
class AttachHost:
    """One host of the inventory, every setting resolved; what ``remote.Remote`` connects
    with (``host``, ``port``, ``user``, ``key_file``, ``known_hosts``) and the commands."""

    node_id: int
    host: str
    port: int
    user: str
    key_file: str | None
    known_hosts: str
    sudo: bool
    start: str
    stop: str
    kill: str | None
    pid: str
    logs: tuple[str, ...]
    #: the broker's ``log.dirs`` (absolute, one directory) and ``metadata.log.dir`` (None:
    #: the same), for the file faults (``--damage-files``); None when the inventory names none
    data_dir: str | None = None
    metadata_dir: str | None = None


def load(path: Path) -> list[AttachHost]:
    """The hosts of inventory ``path``, in file order. Raises ``EnvironmentUnsupported``
    naming the file, line and key of the first problem (a missing ``start``/``stop``, an
    unknown key, a key file that does not exist, a relative ``data_dir``)."""
    try:
        inv = yamlfile.load(Path(path), _File)
    except yamlfile.YamlFileError as exc:
        raise EnvironmentUnsupported(f"--inventory {exc}") from None
    base = {**DEFAULTS, **inv.defaults.model_dump(exclude_none=True)}
    hosts = []
    for i, entry in enumerate(inv.nodes):
        s = {**base, **entry.model_dump(exclude_none=True, include=set(DEFAULTS))}
        for key in ("start", "stop"):
            if not s[key]:
                raise EnvironmentUnsupported(f"--inventory {path}, nodes.{i}: no {key} command "
                                             "(set it there or in defaults)")
        key_file = None if s["key_file"] is None else str(Path(s["key_file"]).expanduser())
        if key_file is not None and not Path(key_file).is_file():
            raise EnvironmentUnsupported(f"--inventory {path}, nodes.{i}.key_file: "
                                         f"{key_file} does not exist")
        for key in ("data_dir", "metadata_dir"):
            if s[key] is not None and not s[key].startswith("/"):
                raise EnvironmentUnsupported(f"--inventory {path}, nodes.{i}.{key}: {s[key]} "
                                             "is not an absolute path on the host")
        hosts.append(AttachHost(entry.node_id, entry.host, s["port"], s["user"], key_file,
                                str(Path(s["known_hosts"]).expanduser()), s["sudo"],
                                s["start"], s["stop"], s["kill"], s["pid"], tuple(s["logs"]),
                                s["data_dir"], s["metadata_dir"]))
    return hosts
