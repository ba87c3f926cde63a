"""File faults: a broker's own files damaged while it is down (or while it runs), or put back
as they were earlier, after Jepsen's file-corruption nemesis (``jepsen.nemesis.file``: bits
flipped, files truncated, chunks zeroed, file chunks snapshotted and restored, on one node or
a minority).

``bitflip``, ``truncate`` and ``zero`` SIGKILL their target nodes, damage one file of each
(named as Kafka names its files: ``FILE_KINDS``), and leave them down; ``start`` (the process
nemesis) brings them back, so Kafka's recovery at startup meets the damage. With ``running``
the node is not killed: the file changes under the running broker. ``snapshot-file`` copies
one file of each target while it runs, and ``restore-file``, the end of that fault, kills the
node, puts the old copy back and starts it: a rollback (a disk or a backup restore that lost
the latest writes of one file). Each completion records exactly what was done: the node, the
file (relative to its directory), its kind, the byte region or bits changed, and the file's
size and SHA-256 before and after, so that a finding can be located on that node, file and
offset.

On clusters whose log directories the tool can reach (``clusters.base.NodeFiles``: the local
and docker backends' on this host, the ssh backend's over SFTP).
"""

from __future__ import annotations

import hashlib
import posixpath
import random
from typing import Any

from kafka_chaos.catalogue.faults import FILE_KINDS, METADATA_KINDS, SEGMENT_KINDS
from kafka_chaos.clusters.base import FileAccess, Killable, Node, NodeFiles
from kafka_chaos.nemesis import checkpoints, records
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import pick

#: The damages: the ``f`` of each file fault; the rollback's start and end.
DAMAGES = ("bitflip", "truncate", "zero")
SNAPSHOT, RESTORE = "snapshot-file", "restore-file"
#: Bits a ``bitflip`` flips, each at a random position of the file.
BITS = 8
#: Bytes a ``zero`` overwrites at most, at a random position.
ZERO_BYTES = 512
#: Where a ``bitflip`` flips: ``any`` (``BITS`` bits anywhere in the file) or ``value`` (one
#: bit of one record's value, in a segment: ``value_spans``).
FLIPS = ("any", "value")
#: The bit a ``value`` flip flips in a byte of the value (counting from the lowest).
VALUE_BIT = 6
_SUFFIX = {"segment": ".log", "index": ".index", "timeindex": ".timeindex",
           "snapshot": ".snapshot", "metadata-segment": ".log",
           "metadata-snapshot": ".checkpoint"}
_METADATA = "__cluster_metadata-0"


def find(files: FileAccess, data_dir: str, kind: str, topic: str, partition: int,
         metadata_dir: str | None = None) -> str | None:
    """The path of the file of ``kind`` (``FILE_KINDS``, ``METADATA_KINDS``) in ``data_dir``
    for ``topic``-``partition`` (the metadata log's in ``metadata_dir``, default
    ``data_dir``), read through ``files``: for a segment's files, the one with the highest
    base offset (the active segment's), or for ``old-segment`` the lowest of two or more;
    None when the node has none (a producer snapshot is written at a segment roll or a clean
    shutdown only). Raises ``ValueError`` for an unknown kind."""
    if kind not in FILE_KINDS and kind not in METADATA_KINDS:
        raise ValueError(f"file kind {kind!r}: choose from "
                         f"{', '.join([*FILE_KINDS, *METADATA_KINDS])}")
    part = posixpath.join(data_dir, f"{topic}-{partition}")
    if kind in METADATA_KINDS and kind != "meta.properties":
        part = posixpath.join(metadata_dir or data_dir, _METADATA)
    suffix = ".log" if kind == "old-segment" else _SUFFIX.get(kind)
    if suffix is not None:
        found = [posixpath.join(part, n) for n in files.listdir(part) if n.endswith(suffix)]
        if kind == "old-segment":  # the oldest of several: never the active one
            return found[0] if len(found) > 1 else None
        return found[-1] if found else None
    path = posixpath.join(part if kind in ("leader-epoch-checkpoint", "quorum-state")
                          else data_dir, kind)
    return path if files.size(path) is not None else None


def recovery_facts(files: FileAccess, data_dir: str, path: str, topic: str,
                   partition: int) -> dict[str, Any]:
    """Whether Kafka's recovery at the next start of a killed broker reads the segment at
    ``path``: it recovers every segment from the one holding the partition's recovery point
    to the end, the active one always (``docs/file-faults.md``, R1, R2), so a rolled segment
    is read only when its successor's base offset lies above the recovery point the broker
    last checkpointed (``recovery-point-offset-checkpoint`` in ``data_dir``, read now: the
    broker is down, so this is what its start reads). Returns ``{"recovery_point": offset
    or None, "next_base": the next segment's base offset or None (the active one),
    "recovered": bool or None (None: no recovery point for the partition could be read)}``."""
    part, name = posixpath.split(path)
    mine = int(name[:-4]) if name[:-4].isdigit() else None
    nxt = None if mine is None else min(
        (int(n[:-4]) for n in files.listdir(part) if n.endswith(".log") and n[:-4].isdigit()
         and int(n[:-4]) > mine), default=None)
    point = None
    try:
        lines = files.read(posixpath.join(data_dir, "recovery-point-offset-checkpoint")
                           ).decode().splitlines()
        for line in lines[2:]:  # version, count, then "topic partition offset"
            t, p, o = line.split()
            if t == topic and int(p) == partition:
                point = int(o)
    except (OSError, UnicodeDecodeError, ValueError):
        point = None
    recovered = True if nxt is None else (None if point is None else nxt > point)
    return {"recovery_point": point, "next_base": nxt, "recovered": recovered}


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


#: Bytes at the head of a record batch (magic 2) that its CRC-32C does not cover: base offset
#: (8), length (4), partition leader epoch (4), magic (1) (``DefaultRecordBatch``: "The CRC
#: covers the data from the attributes to the end of the batch"). A change confined to them
#: passes the CRC checks of recovery, followers and clients (``docs/file-faults.md``, B1).
UNCHECKED_HEAD = 17


def batch_spans(content: bytes) -> list[tuple[int, int, int]]:
    """``(base offset, first byte, end byte)`` of each record batch of a log segment's
    ``content``, in file order (``records.batches``: the walk stops at a torn or damaged
    tail, whose bytes belong to no batch)."""
    return [tuple(b) for b in records.batches(content)]


def hit_batches(spans: list[tuple[int, int, int]], lo: int, hi: int) -> list[int]:
    """The base offsets of the batches of ``spans`` that bytes ``[lo, hi)`` touch."""
    return [base for base, a, b in spans if a < hi and lo < b]


def segment_facts(content: bytes, regions: list[tuple[int, int]]) -> dict[str, Any]:
    """What a damage of byte ``regions`` (``[lo, hi)`` each) did to the batches of a segment
    whose bytes before it were ``content``: ``batches`` (base offsets touched), ``offsets``
    (``[base, last]`` of each, from its header: the records it held), ``unchecked`` (the
    base offsets of those touched only in their first ``UNCHECKED_HEAD`` bytes, which no CRC
    covers) and ``past_batches`` (bytes after the last whole batch were touched)."""
    found = records.batches(content)
    touched = [b for b in found if any(b.start < hi and lo < b.end for lo, hi in regions)]
    parsed = found[-1].end if found else 0
    return {"batches": [b.base for b in touched],
            "offsets": [[b.base, records.last_offset(content, b)] for b in touched],
            "unchecked": [b.base for b in touched
                          if all(hi <= b.start + UNCHECKED_HEAD or lo >= b.end or hi <= b.start
                                 for lo, hi in regions)],
            "past_batches": any(hi > parsed for _, hi in regions)}


def value_spans(content: bytes) -> list[tuple[int, int, int]]:
    """``(offset, first byte, end byte)`` of each non-empty record value in the uncompressed
    data batches of a log segment's ``content`` (``records.values``). Compressed and control
    batches are passed over (their values are not stored as written); so is a batch whose
    records do not parse."""
    out = []
    for batch in records.batches(content):
        if not records.plain(content, batch) or records.control(content, batch):
            continue
        try:
            out.extend((v.offset, v.start, v.end) for v in records.values(content, batch)
                       if v.end > v.start)
        except ValueError:
            continue
    return out


def damage(files: FileAccess, path: str, how: str, rng: random.Random,
           flip: str = "any") -> dict[str, Any]:
    """Damage the file at ``path`` in place through ``files`` (``DAMAGES``): ``bitflip``
    flips ``BITS`` bits at random positions (``flip="value"``: bit ``VALUE_BIT`` of one byte
    of one record's value, which makes the value unreadable, the record's offset recorded as
    ``"record"``; a segment only), ``truncate`` cuts it to a random shorter length, ``zero``
    overwrites up to ``ZERO_BYTES`` bytes at a random position with zeros; each change
    reaches the disk (fsync) before it returns. Returns ``{"size": [before, after],
    "sha256": [before, after]}`` (bytes; hex digests) plus ``"bits": [bit positions]``
    (bitflip) or ``"region": [first byte, end byte)`` (truncate: what was cut off; zero:
    what was zeroed); for a log segment (``.log``) also ``"batches"``, ``"offsets"``,
    ``"unchecked"`` and ``"past_batches"`` (``segment_facts``: the record batches the change
    touched, as ``batch_spans`` found them before it); for an offset checkpoint
    (``checkpoints.OFFSET_CHECKPOINTS``) ``"checkpoint"``: ``checkpoints.change`` of its
    bytes (whether the offsets Kafka loads from it went down). Raises ``NemesisError`` for
    an empty file (nothing to damage), an unknown ``how`` or ``flip``, or a ``value`` flip
    in a file with no record value; ``OSError`` when the file cannot be read or written."""
    content = files.read(path)  # before the damage: which records it can reach
    size = len(content)
    if size == 0:
        raise NemesisError(f"{posixpath.basename(path)} is empty: nothing to damage")
    out: dict[str, Any] = {}
    segment = path.endswith(".log")
    if flip not in FLIPS or (flip != "any" and how != "bitflip"):
        raise NemesisError(f"flip {flip!r}: a bitflip's flip is one of {', '.join(FLIPS)}")
    if how == "bitflip":
        if flip == "value":
            values = value_spans(content if segment else b"")
            if not values:
                raise NemesisError(f"{posixpath.basename(path)} holds no record value to "
                                   "flip a bit of (no uncompressed data batch)")
            offset, first, end = rng.choice(values)
            # bit 6 of one of its bytes: a digit (0x30-0x39) becomes a letter, so the record
            # reads as no value at all, never as another written one (which would also move
            # the value's place in each key's order: a finding of every kind)
            bits = [rng.randrange(first, end) * 8 + VALUE_BIT]
            out["record"] = offset
        else:
            bits = sorted(rng.sample(range(size * 8), min(BITS, size * 8)))
        changed = bytearray(content)
        for bit in bits:
            changed[bit // 8] ^= 1 << (bit % 8)
        for at in sorted({bit // 8 for bit in bits}):
            files.write_at(path, at, bytes(changed[at:at + 1]))
        out["bits"] = bits
    elif how == "truncate":
        keep = rng.randrange(size)
        files.truncate(path, keep)
        out["region"] = [keep, size]
    elif how == "zero":
        length = min(ZERO_BYTES, size)
        start = rng.randrange(size - length + 1)
        files.write_at(path, start, bytes(length))
        out["region"] = [start, start + length]
    else:
        raise NemesisError(f"unknown damage {how!r}; choose from {', '.join(DAMAGES)}")
    after = files.read(path)
    out["size"] = [size, len(after)]
    out["sha256"] = [_sha256(content), _sha256(after)]
    if segment:
        regions = ([(b // 8, b // 8 + 1) for b in out["bits"]] if "bits" in out
                   else [tuple(out["region"])])
        out.update(segment_facts(content, regions))
    if posixpath.basename(path) in checkpoints.OFFSET_CHECKPOINTS:
        out["checkpoint"] = checkpoints.change(content, after)
    return out


def restore(files: FileAccess, path: str, old: bytes) -> dict[str, Any]:
    """Put ``old`` back as the whole content of the file at ``path`` (fsynced). Returns
    ``{"size": [before, after], "sha256": [before, after]}`` as ``damage`` does; for a log
    segment (``.log``) also ``"prefix"`` (the old copy is where the file began: the rollback
    cut its tail, as a ``truncate`` to the copy's length would) and, when it is and the file
    had grown, ``segment_facts`` of that cut (the batches of the tail it took); for an offset
    checkpoint ``"checkpoint"`` as ``damage`` records it."""
    before = files.read(path)
    files.write_at(path, 0, old)
    files.truncate(path, len(old))
    out: dict[str, Any] = {"size": [len(before), len(old)],
                           "sha256": [_sha256(before), _sha256(files.read(path))]}
    if path.endswith(".log"):
        out["prefix"] = before.startswith(old)
        if out["prefix"] and len(before) > len(old):
            out.update(segment_facts(before, [(len(old), len(before))]))
    if posixpath.basename(path) in checkpoints.OFFSET_CHECKPOINTS:
        out["checkpoint"] = checkpoints.change(before, old)
    return out


def _keep(done: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The entries of ``done`` under ``keys`` that it has: what the run's facts keep of an
    op's record."""
    return {k: done[k] for k in keys if k in done}


class FileNemesis(Nemesis):
    """``bitflip``, ``truncate``, ``zero`` (``DAMAGES``) of one file on each target node, and
    its rollback: ``snapshot-file`` then ``restore-file``.

    ``value``: ``{"target": a process target (``nemesis.targets.pick``), "topic", "partition",
    "file": a ``FILE_KINDS`` or ``METADATA_KINDS`` name (optional), "running": true
    (optional: damage without a kill)}``. Without ``file``, the kinds of ``FILE_KINDS`` are
    tried in a random order until one exists on the node. A damage completes with
    ``{"killed": [names], "damaged": {name: {"file": path relative to the node's directory,
    "kind", ...``damage``'s record}}}`` (``"running": [names]`` instead of killed ones); a node
    with no file of the kinds tried is named in ``"nothing": [names]``; a segment damaged
    after a kill also gets ``recovery_facts`` (whether the next start's recovery reads it).
    ``snapshot-file``
    completes with ``{"copied": {name: {"file", "kind", "size", "sha256"}}}``;
    ``restore-file`` with ``{"restored": {name: {"file", "kind", "size": [before, after],
    "sha256": [before, after]}}, "started": [names]}`` (each node killed, its copy put back,
    started; a segment's also with ``restore``'s ``prefix`` and the cut's batches, and
    ``recovery_facts``; ``"unchanged": true`` where the broker had not changed the file
    since its copy: no damage). Raises ``NemesisError`` on a cluster without ``NodeFiles``,
    or when a file cannot be read or written (``OSError``)."""

    fs = frozenset((*DAMAGES, SNAPSHOT, RESTORE))
    name = "file"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        #: every file damaged so far: ``{"node", "file", "kind", "damage", "running"}`` (the
        #: run's facts; ``running`` absent for a rollback, which kills the node), and an
        #: offset checkpoint's ``"checkpoint"`` (``checkpoints.change``)
        self.damaged: list[dict[str, str]] = []
        #: node id -> (path, kind, path as recorded, the bytes copied, (topic, partition))
        #: of the rollback in progress
        self.copies: dict[int, tuple[str, str, str, bytes, tuple[str, int]]] = {}

    def invoke(self, f: str, value: Any) -> Any:
        if not (isinstance(self.cluster, NodeFiles) and isinstance(self.cluster, Killable)):
            raise NemesisError("this cluster backend's log directories are not the tool's: "
                               "file faults run on the local, docker and ssh backends, and on "
                               "ssh-attach with --damage-files")
        try:
            return self._invoke(f, value)
        except OSError as exc:  # a file gone or unreadable, the SFTP session lost
            raise NemesisError(f"{f}: {exc}") from exc

    def _invoke(self, f: str, value: Any) -> Any:
        if f == RESTORE:
            return self._restore()
        value = value or {}
        live = [n for n in self.cluster.nodes if self.cluster.is_running(n)]
        nodes = pick(self.cluster, self.rng, live, value)
        if f == SNAPSHOT:
            return self._snapshot(nodes, value)
        running = bool(value.get("running"))
        out: dict[str, Any] = {"running" if running else "killed": [], "damaged": {}}
        for node in nodes:
            if not running:
                self.cluster.kill(node)  # nothing may write the file while it is damaged
            out["running" if running else "killed"].append(node.name)
            found = self._file(node, value)
            if found is None:
                out.setdefault("nothing", []).append(node.name)
                continue
            path, kind, rel = found
            files = self.cluster.files(node)
            done = out["damaged"][node.name] = {
                "file": rel, "kind": kind, **damage(files, path, f, self.rng,
                                                    value.get("flip", "any"))}
            if kind in SEGMENT_KINDS and not running:
                done.update(recovery_facts(files, str(self.cluster.data_dir(node)), path,
                                           value.get("topic", ""), value.get("partition", 0)))
            self.damaged.append({"node": node.name, "file": done["file"],
                                 "kind": done["kind"], "damage": f, "running": running,
                                 **_keep(done, "checkpoint")})
        return out

    def _file(self, node: Node, value: dict) -> tuple[str, str, str] | None:
        """``(path, kind, path relative to the node's directory)`` of the file ``value``
        names, or of one of ``FILE_KINDS`` drawn at random, that exists and is not empty."""
        files = self.cluster.files(node)
        data = str(self.cluster.data_dir(node))
        meta = str(self.cluster.metadata_dir(node))
        kinds = [value["file"]] if value.get("file") else self.rng.sample(
            list(FILE_KINDS), len(FILE_KINDS))
        for kind in kinds:
            path = find(files, data, kind, value.get("topic", ""), value.get("partition", 0),
                        meta)
            if path is not None and files.size(path):
                root = data if path.startswith(data + "/") else posixpath.dirname(meta)
                return path, kind, posixpath.relpath(path, root)
        return None

    def _snapshot(self, nodes: list[Node], value: dict) -> dict[str, Any]:
        out: dict[str, Any] = {"copied": {}}
        for node in nodes:
            found = self._file(node, value)
            if found is None:
                out.setdefault("nothing", []).append(node.name)
                continue
            path, kind, rel = found
            old = self.cluster.files(node).read(path)  # as a backup would: it runs
            self.copies[node.node_id] = (path, kind, rel, old, (value.get("topic", ""),
                                                               value.get("partition", 0)))
            out["copied"][node.name] = {"file": rel, "kind": kind, "size": len(old),
                                        "sha256": _sha256(old)}
        return out

    def _restore(self) -> dict[str, Any]:
        out: dict[str, Any] = {"restored": {}, "started": []}
        copies, self.copies = sorted(self.copies.items()), {}
        for node_id, (path, kind, rel, old, (topic, partition)) in copies:
            node = self.cluster.node(node_id)
            self.cluster.kill(node)
            files = self.cluster.files(node)
            try:
                if files.size(path) is not None:
                    done = out["restored"][node.name] = {"file": rel, "kind": kind,
                                                         **restore(files, path, old)}
                    if kind in SEGMENT_KINDS:
                        done.update(recovery_facts(files, str(self.cluster.data_dir(node)),
                                                   path, topic, partition))
                    if done["sha256"][0] != done["sha256"][1]:
                        self.damaged.append({"node": node.name, "file": rel, "kind": kind,
                                             "damage": "rollback",
                                             **_keep(done, "checkpoint")})
                    else:  # the broker had not changed it: nothing was rolled back
                        done["unchanged"] = True
                else:  # Kafka deleted it meanwhile (a segment rolled and cleaned)
                    out.setdefault("gone", []).append(node.name)
            finally:  # a failed write must not leave the node down: no other nemesis starts it
                self.cluster.start(node)
            out["started"].append(node.name)
        return out

    def teardown(self) -> Any:
        """A rollback not yet restored is dropped: putting the copy back *is* the fault."""
        dropped = sorted(self.cluster.node(i).name for i in self.copies)
        self.copies.clear()
        return {"dropped_copies": dropped} if dropped else None
