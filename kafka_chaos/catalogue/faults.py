"""The fault catalogue: one record per nemesis package (Jepsen ``nemesis/combined``'s
packages), and the targets a fault may aim at.

A package names the ``f`` that starts a fault (or several, one drawn each time), the ``f``
that ends it, the targets drawn from by default and every target it accepts, and a colour for
plots (Jepsen's package colours where it has the package). The nemesis that performs each
``f`` is chosen in ``nemesis/schedule.build_nemesis``; the scheduler draws from these records
(``nemesis/schedule.plan``), the settings model checks ``--nemesis`` and
``--nemesis-targets`` against them, liveness reads which ``f`` ends which, the report shades
each package's windows in its colour. Imports nothing of the project.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: Process targets (besides an explicit list of node ids).
PROCESS_TARGETS = ("one", "leader", "controller", "follower", "followers", "minority", "majority",
                   "all")
#: ``kill`` only: the leader of the fault's partition, SIGKILLed after ``nemesis.targets.LAG_S``
#: s with its replication cut, so that its followers lag yet still count as in sync.
LAGGING_LEADER = "lagging-leader"
#: ``kill`` and ``lose-unfsynced``: the leader of the fault's partition, its replication cut
#: until the metadata shows its ISR shrunk to itself alone, then killed or powered off: what
#: it acknowledged alone (``min.insync.replicas=1``) is on no other replica.
LONE_LEADER = "lone-leader"
KILL_TARGETS = (*PROCESS_TARGETS, LAGGING_LEADER, LONE_LEADER)
POWER_TARGETS = (*PROCESS_TARGETS, LONE_LEADER)
#: Partition shapes (Jepsen's grudges, plus Kafka-specific cuts).
PARTITION_TARGETS = ("isolate-one", "halves", "isolate-leader", "isolate-controller", "bridge",
                     "majorities-ring", "one-way", "leader-replication", "zombie-leader",
                     "clients-leader", "clients-one")
#: ``move-leader``: partition 0's leadership given to an in-sync follower.
LEADER_TARGETS = ("in-sync-follower",)
#: The request faults of the Kafka-protocol proxy (``nemesis/proxy/faults.py``, docs/proxy.md).
REQUEST_KINDS = ("delay", "hold", "drop-request", "drop-response", "duplicate", "reorder",
                 "bandwidth", "forget-leader-epoch")

#: The files a fault may damage, as Kafka names them (``kafka.log.UnifiedLog``,
#: ``LogManager``, ``ReplicaManager``; ``nemesis.files`` finds them): the fault's
#: partition's, then the node's.
FILE_KINDS = {
    "segment": "the partition's active log segment (<base offset>.log)",
    "old-segment": "its oldest rolled log segment, which recovery after a crash reads again "
                   "only above the broker's checkpointed recovery point (present only when "
                   "segments roll: log.roll.ms, log.segment.bytes)",
    "index": "its offset index (.index)",
    "timeindex": "its time index (.timeindex)",
    "snapshot": "its newest producer-state snapshot (.snapshot)",
    "leader-epoch-checkpoint": "its leader epochs and their start offsets",
    "replication-offset-checkpoint": "the node's high watermark of each partition",
    "recovery-point-offset-checkpoint": "the node's flushed offset of each partition",
    "log-start-offset-checkpoint": "the node's log start offset of each partition",
}
#: Files damaged only when a fault names them (a scenario step's ``file``): the KRaft
#: metadata log's (``__cluster_metadata-0`` in the metadata log directory, ``KafkaRaftClient``,
#: ``FileQuorumStateStore``) and the log directory's identity (``MetaPropertiesEnsemble``).
#: The ``FILE_KINDS`` that are a partition's log segments (``<base offset>.log``).
SEGMENT_KINDS = ("segment", "old-segment")
#: The ``FILE_KINDS`` in Kafka's offset checkpoint format (``nemesis.checkpoints``), and what
#: a damage or rollback of one did to the offsets the broker loads from it at its next start:
#: all no higher, Kafka cannot read it, or otherwise.
OFFSET_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                      "log-start-offset-checkpoint")
LOWERED, RAISED, UNREADABLE = "lowered", "raised", "unreadable"
#: A random draw keeps to ``FILE_KINDS``, whose damage a broker can meet and go on.
METADATA_KINDS = {
    "metadata-segment": "the KRaft metadata log's active segment (__cluster_metadata-0)",
    "metadata-snapshot": "its newest snapshot (<end offset>-<epoch>.checkpoint)",
    "quorum-state": "the node's KRaft election state: its epoch, its vote, the leader",
    "meta.properties": "the log directory's cluster id, node id and directory id",
}

_PROCESS_DEFAULT = ("one", "leader", "controller", "follower")
#: A plain kill of a leader whose followers fetch within milliseconds rarely holds a write
#: they lack (0 lost writes in 30,448 acknowledged with acks=1, issue 33): kills and power
#: losses also aim where a loss is possible, so a default schedule can show one.
_KILL_DEFAULT = (*_PROCESS_DEFAULT, LAGGING_LEADER, LONE_LEADER)
_POWER_DEFAULT = (*_PROCESS_DEFAULT, LONE_LEADER)
#: Lossy links where TCP's retransmissions matter: replication, clients, a node, a split.
LOSS_DEFAULT = ("leader-replication", "clients-leader", "isolate-one", "halves")


@dataclasses.dataclass(frozen=True)
class FaultKind:
    """One nemesis package.

    Attributes:
        start: the ``f`` values that start the fault (one is drawn per fault).
        stop: the ``f`` that ends it (``heal-all`` at the final heal ends every one).
        targets: the targets drawn from when ``--nemesis-targets`` names none of its kind.
        accepts: every target it takes (a node id too, where it takes ``one``).
        color: its windows' colour in plots (``#RRGGBB``).
        stop_at_target: the stop op carries the start's target (it ends that fault only).
        setting: it changes a setting at runtime and faults nothing (liveness excuses no
            stuck last stable offset by it).
        takes: what a scenario step's start op is given (``nemesis.script``): a ``target``,
            the ``topic`` (or the cluster), or the step's ``request`` (a fault of the proxy);
            a stop takes nothing, or the start's topic where ``stop_at_target``.
        note: what ``--help`` says of it beside its name (what it is, where it runs).
    """

    start: tuple[str, ...]
    stop: str
    targets: tuple
    accepts: tuple
    color: str
    stop_at_target: bool = False
    setting: bool = False
    takes: str = "target"
    note: str = ""


#: name -> package, in the order ``--help`` lists them.
PACKAGES: dict[str, FaultKind] = {
    "kill": FaultKind(("kill",), "start", _KILL_DEFAULT, KILL_TARGETS, "#E9A4A0"),
    "stop": FaultKind(("stop",), "start", _PROCESS_DEFAULT, PROCESS_TARGETS, "#E9C3A0"),
    "pause": FaultKind(("pause",), "resume", _PROCESS_DEFAULT, PROCESS_TARGETS, "#C5A0E9"),
    "partition": FaultKind(("partition",), "heal", PARTITION_TARGETS, PARTITION_TARGETS,
                           "#A0C8E9"),
    # the same shapes lossy instead of cut: 30 % of their packets dropped (iptables statistic)
    "loss": FaultKind(("loss",), "heal", LOSS_DEFAULT, PARTITION_TARGETS, "#A0E0E9",
                      note="packet loss on a partition's links"),
    # power loss: the node dies and loses what it never fsynced (local backend, FUSE)
    "lose-unfsynced": FaultKind(("lose-unfsynced",), "start", _POWER_DEFAULT, POWER_TARGETS,
                                "#E9A0C8", note="power loss; local"),
    # a rolling restart (clean stops, each node back in every ISR before the next)
    "roll": FaultKind(("roll",), "start", ("all",), PROCESS_TARGETS, "#E9D0A0"),
    # the leadership of partition 0 moved to an in-sync follower, then moved back
    "leader": FaultKind(("move-leader",), "restore-leader", LEADER_TARGETS, LEADER_TARGETS,
                        "#A0A8E9"),
    # a node's wall clock bumped or strobed, then reset (libfaketime; local backend)
    "clock": FaultKind(("clock-bump", "clock-strobe"), "clock-reset", _PROCESS_DEFAULT,
                       PROCESS_TARGETS, "#A0E9C8", note="local, ssh"),
    # a fault on chosen Kafka requests in the protocol proxy (--proxy; nemesis.requests)
    "request": FaultKind(("request-fault",), "request-heal", REQUEST_KINDS, REQUEST_KINDS,
                         "#C8E9A0", takes="request", note="--proxy"),
    # one file of a broker damaged (bits flipped, truncated, zeroed) while it is down, then
    # the broker restarted (nemesis.files; Jepsen's file-corruption nemesis)
    "file": FaultKind(("bitflip", "truncate", "zero"), "start", ("follower", "one"),
                      PROCESS_TARGETS, "#B8B8B8", note="a broker's file damaged while it is "
                      "down; local, docker, ssh (ssh-attach: --damage-files)"),
    # one file of a broker copied while it runs, later put back (the broker killed first and
    # started after): a rollback, after Jepsen's snapshot-file-chunks/restore-file-chunks
    "rollback": FaultKind(("snapshot-file",), "restore-file", ("follower", "one"),
                          PROCESS_TARGETS, "#989898", note="a broker's file put back as it "
                          "was earlier; local, docker, ssh (ssh-attach: --damage-files)"),
    # a KRaft voter removed (or stopped, wiped and removed: replaced), then every removed one
    # added back (nemesis.membership; KIP-853's dynamic quorum, Kafka 3.9+)
    # a broker's data disk full (growing writes fail with ENOSPC) or slow, while it runs
    "disk": FaultKind(("disk-full", "disk-slow"), "disk-heal", ("follower", "one"),
                      PROCESS_TARGETS, "#D8C0A8", note="a broker's data disk full or slow "
                      "under it (lossyfs); local"),
    "membership": FaultKind(("remove-voter", "replace-voter"), "add-voter",
                            ("one", "controller"), ("one", "controller"), "#A0E9A8",
                            note="KRaft voters removed or replaced, then added back "
                            "(KIP-853); local, docker, ssh"),
    # unclean leader election allowed for a while, on the topic or cluster-wide
    "unclean": FaultKind(("unclean-on",), "unclean-off", ("topic", "cluster"),
                         ("topic", "cluster"), "#E9E3A0", stop_at_target=True, setting=True,
                         takes="topic"),
}
#: Fault packages only a cluster of the tool's own takes: they need libfaketime, the lossy
#: filesystem, the brokers' files or a quorum formatted dynamic, which an attached cluster
#: has not.
OWN_CLUSTER_ONLY = ("clock", "lose-unfsynced", "file", "rollback", "membership", "disk")
#: Of those, the packages an ssh-attach run may opt in to (``--damage-files``: the inventory
#: names each broker's log directory, reached over SFTP).
OPT_IN_FILES = ("file", "rollback")


def own_cluster_only(damage_files: bool) -> tuple[str, ...]:
    """The packages refused on an attached cluster: ``OWN_CLUSTER_ONLY``, less
    ``OPT_IN_FILES`` when the run opts in to damaging its files."""
    return tuple(p for p in OWN_CLUSTER_ONLY if not (damage_files and p in OPT_IN_FILES))
#: Every ``f`` that starts a fault -> the ``f`` that ends it (``heal-all`` ends any); the
#: packages that change a setting (``unclean``) are left out: they fault nothing.
STOP_OF = {f: kind.stop for kind in PACKAGES.values() if not kind.setting for f in kind.start}


def starts(package: str) -> tuple[str, ...]:
    """The ``f`` values that start a fault of ``package``."""
    return PACKAGES[package].start


def parse_packages(spec: str) -> list[str]:
    """``"kill,partition"`` -> ``["kill", "partition"]``; ``"none"`` or ``""`` -> ``[]``.

    Raises ``ValueError`` naming the unknown package.
    """
    names = [s.strip() for s in spec.split(",") if s.strip() and s.strip() != "none"]
    for name in names:
        if name not in PACKAGES:
            raise ValueError(f"--nemesis: unknown fault {name!r}; choose from "
                             f"{', '.join(PACKAGES)} or none")
    return names


def parse_targets(spec: str, packages: list[str]) -> dict[str, list]:
    """``--nemesis-targets "controller,majority,halves,2"`` -> the targets each of
    ``packages`` draws from: those it accepts (a number is a node id, accepted by process
    faults), or its defaults when none given is of its kind. ``""`` -> every default.

    Raises ``ValueError`` naming a target that no chosen package accepts.
    """
    given: list = [int(t) if t.strip().isdigit() else t.strip()
                   for t in spec.split(",") if t.strip()]

    def accepts(name: str, t) -> bool:
        kind = PACKAGES[name]
        return t in kind.accepts or (isinstance(t, int) and "one" in kind.accepts)

    out = {}
    for name in packages:
        mine = [[t] if isinstance(t, int) else t for t in given if accepts(name, t)]
        out[name] = mine or list(PACKAGES[name].targets)
    for t in given:
        if not any(accepts(n, t) for n in packages):
            raise ValueError(f"--nemesis-targets: {t!r} is no target of "
                             f"{', '.join(packages) or 'the chosen faults (none)'}; process "
                             f"faults take {', '.join(PROCESS_TARGETS)} or node ids (kill "
                             f"also lagging-leader, kill and lose-unfsynced also "
                             f"lone-leader), partitions and losses "
                             f"{', '.join(PARTITION_TARGETS)}, unclean topic or cluster, "
                             f"leader {', '.join(LEADER_TARGETS)}, request "
                             f"{', '.join(REQUEST_KINDS)}")
    return out


def describe(f: str, value: Any, done: Any, error: str | None = None,
             limit: int = 80) -> str:
    """A nemesis op in one line, as the run's log and the report name it: its ``f``, the
    target it was asked for (its shape: ``leader``, ``leader-replication``, ``halves``, ...)
    and what it did (or its ``error``), each cut to ``limit`` characters, e.g.
    ``partition leader-replication: isolated [n1] | [n2, n3]`` or ``kill leader: killed
    n1``."""
    target = value.get("target") if isinstance(value, dict) else None
    head = f"{f} {_short(target, limit)}" if target is not None else f
    what = error if error else result_text(done)
    return f"{head}: {_short(what, limit)}" if what else head


def result_text(done: Any) -> str:
    """A nemesis op's result as text: ``{"isolated": [["n1"], ["n2", "n3"]]}`` ->
    ``"isolated [n1] | [n2, n3]"``, ``{"lost": {"n1": {"truncated_files": 4}}}`` -> ``"lost
    (n1 (truncated_files 4))"``; None -> ``""``."""
    def show(v: Any) -> str:
        if isinstance(v, dict):
            return "(" + ", ".join(f"{k} {show(x)}" for k, x in v.items()) + ")"
        if isinstance(v, list):
            nested = any(isinstance(x, list) for x in v)
            return (" | " if nested else ", ").join(
                f"[{show(x)}]" if isinstance(x, list) else show(x) for x in v)
        return str(v).lower() if isinstance(v, bool) else str(v)
    if done is None:
        return ""
    if isinstance(done, dict):
        return "; ".join(f"{k} {show(v)}" for k, v in done.items())
    return show(done)


def _short(value: Any, limit: int = 80) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
