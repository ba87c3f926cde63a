"""File faults: a broker's own files damaged while it is down, after Jepsen's file-corruption
nemesis (``jepsen.nemesis.file``: bits flipped, files truncated, chunks zeroed on one node or a
minority).

``bitflip``, ``truncate`` and ``zero`` SIGKILL their target nodes, damage one file of each
(named as Kafka names its files: ``FILE_KINDS``), and leave them down; ``start`` (the process
nemesis) brings them back, so Kafka's recovery at startup meets the damage. Each completion
records exactly what was done: the node, the file (relative to its log directory), its kind,
the byte region or bits changed, and the file's size and SHA-256 before and after, so that a
finding can be located on that node, file and offset.

Only on clusters whose log directories are on this host (``clusters.base.FilesOnHost``: the
local and docker backends).
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

from kafka_chaos.clusters.base import FilesOnHost, Killable, Node
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import pick

#: The damages: the ``f`` of each file fault.
DAMAGES = ("bitflip", "truncate", "zero")
#: Bits a ``bitflip`` flips, each at a random position of the file.
BITS = 8
#: Bytes a ``zero`` overwrites at most, at a random position.
ZERO_BYTES = 512
#: The files a fault may damage, as Kafka names them (``kafka.log.UnifiedLog``,
#: ``LogManager``, ``ReplicaManager``): the fault's partition's, then the node's.
FILE_KINDS = {
    "segment": "the partition's active log segment (<base offset>.log)",
    "index": "its offset index (.index)",
    "timeindex": "its time index (.timeindex)",
    "snapshot": "its newest producer-state snapshot (.snapshot)",
    "leader-epoch-checkpoint": "its leader epochs and their start offsets",
    "replication-offset-checkpoint": "the node's high watermark of each partition",
    "recovery-point-offset-checkpoint": "the node's flushed offset of each partition",
    "log-start-offset-checkpoint": "the node's log start offset of each partition",
}
_SUFFIX = {"segment": ".log", "index": ".index", "timeindex": ".timeindex",
           "snapshot": ".snapshot"}


def find(data_dir: Path, kind: str, topic: str, partition: int) -> Path | None:
    """The file of ``kind`` (``FILE_KINDS``) in ``data_dir`` for ``topic``-``partition``:
    for a segment's files, the one with the highest base offset (the active segment's);
    None when the node has none (a producer snapshot is written at a segment roll or a clean
    shutdown only). Raises ``ValueError`` for an unknown kind."""
    if kind not in FILE_KINDS:
        raise ValueError(f"file kind {kind!r}: choose from {', '.join(FILE_KINDS)}")
    part = data_dir / f"{topic}-{partition}"
    if kind in _SUFFIX:
        found = sorted(part.glob(f"*{_SUFFIX[kind]}"))
        return found[-1] if found else None
    path = (part if kind == "leader-epoch-checkpoint" else data_dir) / kind
    return path if path.is_file() else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def damage(path: Path, how: str, rng: random.Random) -> dict[str, Any]:
    """Damage the file at ``path`` in place (``DAMAGES``): ``bitflip`` flips ``BITS`` bits at
    random positions, ``truncate`` cuts it to a random shorter length, ``zero`` overwrites up
    to ``ZERO_BYTES`` bytes at a random position with zeros; each change reaches the disk
    (fsync) before it returns. Returns ``{"size": [before, after], "sha256": [before,
    after]}`` (bytes; hex digests) plus ``"bits": [bit positions]`` (bitflip) or ``"region":
    [first byte, end byte)`` (truncate: what was cut off; zero: what was zeroed). Raises
    ``NemesisError`` for an empty file (nothing to damage) or an unknown ``how``."""
    size = path.stat().st_size
    if size == 0:
        raise NemesisError(f"{path.name} is empty: nothing to damage")
    before = _sha256(path)
    out: dict[str, Any] = {}
    with open(path, "r+b") as fh:
        if how == "bitflip":
            bits = sorted(rng.sample(range(size * 8), min(BITS, size * 8)))
            for bit in bits:
                fh.seek(bit // 8)
                byte = fh.read(1)[0]
                fh.seek(bit // 8)
                fh.write(bytes([byte ^ (1 << (bit % 8))]))
            out["bits"] = bits
        elif how == "truncate":
            keep = rng.randrange(size)
            fh.truncate(keep)
            out["region"] = [keep, size]
        elif how == "zero":
            length = min(ZERO_BYTES, size)
            start = rng.randrange(size - length + 1)
            fh.seek(start)
            fh.write(bytes(length))
            out["region"] = [start, start + length]
        else:
            raise NemesisError(f"unknown damage {how!r}; choose from {', '.join(DAMAGES)}")
        fh.flush()
        os.fsync(fh.fileno())
    out["size"] = [size, path.stat().st_size]
    out["sha256"] = [before, _sha256(path)]
    return out


class FileNemesis(Nemesis):
    """``bitflip``, ``truncate``, ``zero`` (``DAMAGES``) of one file on each target node.

    ``value``: ``{"target": a process target (``nemesis.targets.pick``), "topic", "partition",
    "file": a ``FILE_KINDS`` name (optional)}``. Without ``file``, the kinds are tried in a
    random order until one exists on the node. Completes with ``{"killed": [names],
    "damaged": {name: {"file": path relative to the log directory, "kind", ...``damage``'s
    record}}}``; a node with no file of the kinds tried is killed all the same and named in
    ``"nothing": [names]``. Raises ``NemesisError`` on a cluster without ``FilesOnHost``."""

    fs = frozenset(DAMAGES)
    name = "file"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        #: every file damaged so far: ``{"node", "file", "kind", "damage"}`` (the run's facts)
        self.damaged: list[dict[str, str]] = []

    def invoke(self, f: str, value: Any) -> Any:
        if not (isinstance(self.cluster, FilesOnHost) and isinstance(self.cluster, Killable)):
            raise NemesisError("this cluster backend's log directories are not on this host: "
                               "file faults run on the local and docker backends")
        value = value or {}
        live = [n for n in self.cluster.nodes if self.cluster.is_running(n)]
        nodes = pick(self.cluster, self.rng, live, value)
        out: dict[str, Any] = {"killed": [], "damaged": {}}
        for node in nodes:
            self.cluster.kill(node)  # nothing may write the file while it is damaged
            out["killed"].append(node.name)
            done = self._damage(node, f, value)
            if done is None:
                out.setdefault("nothing", []).append(node.name)
            else:
                out["damaged"][node.name] = done
                self.damaged.append({"node": node.name, "file": done["file"],
                                     "kind": done["kind"], "damage": f})
        return out

    def _damage(self, node: Node, how: str, value: dict) -> dict[str, Any] | None:
        data = self.cluster.data_dir(node)
        kinds = [value["file"]] if value.get("file") else self.rng.sample(
            list(FILE_KINDS), len(FILE_KINDS))
        for kind in kinds:
            path = find(data, kind, value.get("topic", ""), value.get("partition", 0))
            if path is not None and path.stat().st_size > 0:
                return {"file": str(path.relative_to(data)), "kind": kind,
                        **damage(path, how, self.rng)}
        return None
