"""Scripted schedules: a fixed fault sequence whose every step proves it happened.

A schedule file (YAML; built-in scenarios live in ``nemesis/scenarios/``) is validated with
pydantic, unknown keys refused with the key path and line (``clusters.yamlfile``)::

    name: isr-shrink-unclean
    about: one line for the user
    settings: {keys: 1, replica_lag_time_max_ms: 3000}   # run options the scenario needs
    steps:
      - name: cut replication from the leader
        after: 5                 # seconds after the previous step (or ``at``: since the start)
        mark: L                  # remember the current leader of ``partition`` as L
        do: partition            # nemesis f, or a list of them, run in order
        target: leader-replication   # a target of that fault, or a mark (its node)
        until: {isr: [L]}        # wait for a monitor sample showing this ...
        timeout: 40              # ... for at most this long, else the run ends unknown
      - do: [unclean-on, elect-unclean]
        until: {leader: not L}
        retry_every: 2           # run ``do`` again every 2 s until ``until`` holds
        timeout: 60
      - do: kill
        target: L
        expect: {answering: {L: false}}   # must show in the next sample taken after ``do``

A ``request-fault`` step gives the fault in ``request`` (``nemesis.proxy.faults``; the run
needs ``--proxy``). The ``request-heal`` that ends it is unmet when the fault acted on no
request, and, with ``into_open_txn: true``, when no request it kept reached its broker while
its client's next transaction was open (a delayed EndTxn applied to the wrong transaction,
KAFKA-17754), with ``after_txn_end: true``, when no Produce it kept reached its broker after
its client had ended or fenced that transaction (a hanging transaction, KIP-890).

Conditions read the cluster-state monitor's samples (``nemesis.monitor``) for ``partition``
of the workload topic: ``isr`` (the ISR as a set of marks/node names/ids), ``leader`` (a
mark, a node, ``none`` or ``not X``), ``answering`` ({mark or node: bool}), ``in_sync``
({mark or node: bool}: in the ISR or not; ``mark_follower: F`` marks the partition's lowest
in-sync follower), the KRaft quorum's ``voting`` ({mark or node: bool}: a voter or not) and
``quorum_leader`` (as ``leader``; ``mark_controller: Q`` marks the quorum's leader,
``mark_voter: V`` its lowest voter that is not the leader), ``truncated``
(a sample since the step began showed the partition's high watermark below the highest one
before it). A ``crash-clients`` step is unmet when no client crashed, a file damage (``file:``
names the file, ``running: true`` spares the kill, ``flip: value`` makes one record's value
unreadable with one bit) or a copy when no such file was there, a ``restore-file`` when no
copy it put back differed from the file it replaced, and a ``disk-heal`` when a disk it
healed refused no write (full) and delayed none (slow). A step whose ``until`` or
``expect`` does not hold ends the script; the run's verdict is then unknown,
naming the step (a "0 lost writes" after a fault that never happened proves nothing).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafka_chaos.catalogue.faults import (FILE_KINDS, KILL_TARGETS, LEADER_TARGETS,
                                          METADATA_KINDS, PACKAGES, PARTITION_TARGETS,
                                          SEGMENT_KINDS)
from kafka_chaos.clusters import yamlfile
from kafka_chaos.nemesis.proxy.faults import RequestFault

if TYPE_CHECKING:  # the monitor (confluent_kafka, the wire protocol) loads when a script runs:
    # every command reads scenarios (a plan check, run's admission) long before one does
    from kafka_chaos.nemesis.monitor import Monitor

#: Where the built-in scenarios are (``<name>.yaml``).
BUILT_IN = Path(__file__).with_name("scenarios")
#: The fs of scenarios only, besides the packages' (``catalogue.faults``): a forced unclean
#: election (KIP-460) and a crash of every client process.
ELECT_UNCLEAN, CRASH_CLIENTS = "elect-unclean", "crash-clients"
_KINDS = PACKAGES.values()
#: The fs whose value names a target; the others take the topic (unclean toggles), the step's
#: ``request`` (a fault in the protocol proxy) or nothing (``FaultKind.takes``).
_TARGETED = {f for kind in _KINDS if kind.takes == "target" for f in kind.start}
_TOPIC_ONLY = {f for kind in _KINDS if kind.takes == "topic"
               for f in (*kind.start, kind.stop)} | {ELECT_UNCLEAN}
_NO_VALUE = {kind.stop for kind in _KINDS if not kind.stop_at_target} | {CRASH_CLIENTS}
_REQUEST = {f for kind in _KINDS if kind.takes == "request" for f in kind.start}
#: The fs that damage or copy one file, and the files they may be given (``nemesis.files``).
_FILE_FS = {*PACKAGES["file"].start, *PACKAGES["rollback"].start}
_FILE_KINDS = (*FILE_KINDS, *METADATA_KINDS)
_TARGET_NAMES = (set(KILL_TARGETS) | set(PARTITION_TARGETS) | {"topic", "cluster"}
                 | set(LEADER_TARGETS))


class Condition(BaseModel):
    """What one monitor sample must show (every given key must hold)."""

    model_config = ConfigDict(extra="forbid")

    isr: list[str | int] | None = None
    leader: str | int | None = None
    answering: dict[str, bool] | None = None
    #: which nodes are in the partition's ISR ({mark or node: bool})
    in_sync: dict[str, bool] | None = None
    #: a sample since the step began showed the partition's high watermark below the
    #: highest one before it: its log was truncated below records consumers could read
    truncated: bool | None = None
    #: the KRaft quorum: which nodes are voters ({mark or node: bool}), and its leader (a
    #: mark, a node, ``none`` or ``not X``), as its leader answers ``DescribeQuorum``
    voting: dict[str, bool] | None = None
    quorum_leader: str | int | None = None


class Step(BaseModel):
    """One step; see the module docstring."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    at: float | None = Field(None, ge=0)
    after: float = Field(0.0, ge=0)
    mark: str | None = None
    mark_controller: str | None = None
    mark_voter: str | None = None
    mark_follower: str | None = None
    do: list[str] = []
    target: str | int | list[int] | None = None
    partition: int = Field(0, ge=0)
    until: Condition | None = None
    expect: Condition | None = None
    timeout: float = Field(30.0, gt=0)
    retry_every: float | None = Field(None, gt=0)
    request: RequestFault | None = None
    into_open_txn: bool = False
    after_txn_end: bool = False
    loss: float | None = Field(None, gt=0, lt=1)
    #: a file fault's file (``catalogue.faults.FILE_KINDS``, ``METADATA_KINDS``), and a damage
    #: done while the broker runs instead of after a kill
    file: str | None = None
    running: bool = False
    #: where a bitflip flips (``nemesis.files.FLIPS``): anywhere, or one bit of one record's
    #: value (a segment only)
    flip: Literal["any", "value"] = "any"
    #: how long a slow disk makes each write and fsync wait, ms (``nemesis.disk.SLOW_MS``)
    slow_ms: int | None = Field(None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_f(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("do"), str):
            data = {**data, "do": [data["do"]]}
        return data

    @model_validator(mode="after")
    def _combinations(self) -> "Step":
        known = _TARGETED | _TOPIC_ONLY | _NO_VALUE | _REQUEST
        unknown = [f for f in self.do if f not in known]
        if unknown:
            raise ValueError(f"do: unknown fault {unknown[0]!r}; choose from "
                             f"{', '.join(sorted(known))}")
        for flag in ("into_open_txn", "after_txn_end"):
            if getattr(self, flag) and "request-heal" not in self.do:
                raise ValueError(f"{flag} goes with do: request-heal (what the ended faults "
                                 "must show)")
        if ("request-fault" in self.do) != (self.request is not None):
            raise ValueError("request goes with do: request-fault, and it needs one (the "
                             "fault: {fault: delay, apis: [EndTxn], delay_ms: 5000, ...})")
        if self.loss is not None and "loss" not in self.do:
            raise ValueError("loss (a packet loss probability) goes with do: loss")
        if self.slow_ms is not None and "disk-slow" not in self.do:
            raise ValueError("slow_ms (each write's delay) goes with do: disk-slow")
        if self.file is not None:
            if not set(self.do) & _FILE_FS:
                raise ValueError(f"file goes with do: {', '.join(sorted(_FILE_FS))}")
            if self.file not in _FILE_KINDS:
                raise ValueError(f"file: {self.file!r} is no file kind; choose from "
                                 f"{', '.join(_FILE_KINDS)}")
        if self.running and not set(self.do) & set(PACKAGES["file"].start):
            raise ValueError("running (damage without a kill) goes with do: "
                             f"{', '.join(PACKAGES['file'].start)}")
        if self.flip != "any" and (self.do != ["bitflip"]
                                   or self.file not in SEGMENT_KINDS):
            raise ValueError(f"flip: {self.flip} goes with do: bitflip and file: segment or "
                             "old-segment (a record's value is in a log segment)")
        if self.retry_every is not None and self.until is None:
            raise ValueError("retry_every needs until (what to retry for)")
        if self.at is not None and self.after:
            raise ValueError("give at or after, not both")
        return self

    def label(self, i: int) -> str:
        """How the step is named to the user: its name, else its number and faults."""
        return self.name or f"step {i + 1} ({', '.join(self.do) or 'wait'})"


class Script(BaseModel):
    """A whole schedule file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    about: str = ""
    settings: dict[str, Any] = {}
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _marks_before_use(self) -> "Script":
        marks: set[str] = set()
        for i, step in enumerate(self.steps):
            marks.update(m for m in (step.mark, step.mark_controller, step.mark_voter,
                                     step.mark_follower) if m)
            if isinstance(step.target, str) and step.target not in marks | _TARGET_NAMES:
                raise ValueError(f"steps.{i}.target: {step.target!r} is no mark made before it "
                                 f"nor a target ({', '.join(sorted(_TARGET_NAMES))})")
            for cond in (step.until, step.expect):
                for ref in _refs(cond):
                    if not (ref in marks or ref == "none" or ref.isdigit()
                            or re.fullmatch(r"n[0-9]+", ref)):
                        raise ValueError(f"steps.{i}: {ref!r} is no mark made before it "
                                         "(nor a node name like n2, a node id or none)")
        return self


def _refs(cond: Condition | None) -> list[str]:
    if cond is None:
        return []
    refs = ([str(x) for x in cond.isr or []] + list(cond.answering or {})
            + list(cond.in_sync or {}) + list(cond.voting or {}))
    for leader in (cond.leader, cond.quorum_leader):
        if leader is not None:
            refs.append(str(leader).removeprefix("not ").strip())
    return refs


def load(path: Path) -> Script:
    """Read and validate a schedule file. Raises ``ValueError`` naming file, line and key."""
    try:
        return yamlfile.load(Path(path), Script)
    except yamlfile.YamlFileError as exc:
        raise ValueError(f"--scenario {exc}") from None


def built_in(name: str) -> Script:
    """The built-in scenario ``name``; ``KeyError`` if there is none."""
    path = BUILT_IN / f"{name}.yaml"
    if not path.is_file():
        raise KeyError(name)
    return load(path)


def names() -> list[str]:
    """The built-in scenarios, sorted."""
    return sorted(p.stem for p in BUILT_IN.glob("*.yaml"))


def partition_state(state: dict[str, Any], topic: str, partition: int) -> dict[str, Any] | None:
    """``nemesis.monitor.partition_state``: the sampled state of ``topic``-``partition`` in a
    monitor ``state``, or None (the monitor imported once a script runs, as above)."""
    from kafka_chaos.nemesis.monitor import partition_state as sampled

    return sampled(state, topic, partition)


class Runner:
    """Runs a ``Script`` against a cluster while the workload writes.

    Args:
        cluster: the cluster (marks become its nodes).
        run_op: ``Scheduler.run_op`` (each fault recorded as a nemesis op).
        monitor: the run's cluster-state monitor.
        topic: the workload topic whose partitions steps aim at.
        stop: set on Ctrl-C: the script returns at the next wait.
        log: progress messages for the user.
    """

    def __init__(self, cluster, run_op: Callable, monitor: Monitor, topic: str,
                 stop: threading.Event, log: Callable[[str], None]) -> None:
        self.cluster, self.run_op, self.monitor = cluster, run_op, monitor
        self.topic, self.stop, self.log = topic, stop, log
        self.marks: dict[str, int] = {}
        self._drops_before: dict[tuple[str, int], int] = {}

    def run(self, script: Script) -> dict[str, Any]:
        """Returns ``{"steps_done": n, "marks": {mark: node name}, "unmet": label}`` (``unmet``
        only when a step's ``until``/``expect``/``mark`` did not hold; absent when interrupted)."""
        seen: dict[str, Any] = {"steps_done": 0, "marks": {}}
        start = time.monotonic()
        for i, step in enumerate(script.steps):
            wait = step.after if step.at is None else max(0.0, start + step.at - time.monotonic())
            if self.stop.wait(wait):
                return seen
            problem = self._step(step)
            seen["marks"] = {k: self.cluster.node(v).name for k, v in self.marks.items()}
            if self.stop.is_set():
                return seen
            if problem:
                seen["unmet"] = f"{step.label(i)}: {problem}"
                self.log(f"scenario precondition not met: {seen['unmet']}")
                return seen
            seen["steps_done"] = i + 1
        return seen

    def _step(self, step: Step) -> str | None:
        if step.mark:
            state = self.monitor.wait_for(
                lambda s: (partition_state(s, self.topic, step.partition) or {})
                .get("leader", -1) >= 0, 10.0, self.stop)
            if state is None:
                return f"{self.topic}-{step.partition} had no leader to mark as {step.mark}"
            self.marks[step.mark] = partition_state(state, self.topic, step.partition)["leader"]
        if step.mark_follower:
            state = self.monitor.wait_for(lambda s: bool(self._followers(s, step.partition)),
                                          10.0, self.stop)
            if state is None:
                return (f"{self.topic}-{step.partition} had no in-sync follower to mark as "
                        f"{step.mark_follower}")
            self.marks[step.mark_follower] = self._followers(state, step.partition)[0]
        if step.mark_controller or step.mark_voter:
            state = self.monitor.wait_for(
                lambda s: (s.get("controller") or {}).get("leader", -1) >= 0, 10.0, self.stop)
            if state is None:
                return "the KRaft quorum had no leader to mark"
            quorum = state["controller"]
            if step.mark_controller:
                self.marks[step.mark_controller] = quorum["leader"]
            if step.mark_voter:  # the lowest voter that is not the leader: one per cluster
                others = sorted(int(v) for v in quorum["voters"] if int(v) != quorum["leader"])
                if not others:
                    return "the KRaft quorum has no voter besides its leader to mark"
                self.marks[step.mark_voter] = others[0]
        deadline = time.monotonic() + step.timeout
        self._drops_before = dict(self.monitor.hw_drops)
        while True:
            before = self.monitor.samples
            for f in step.do:
                done = self.run_op(f, self._value(f, step))
                if f == "lose-unfsynced" and not _lost_partition_data(done, self.topic,
                                                                      step.partition):
                    return (f"no un-fsynced write of {self.topic}-{step.partition} was lost "
                            f"({done})")
                if f == "crash-clients" and not (done or {}).get("crashed"):
                    return "no client crashed"
                if f in PACKAGES["file"].start and not (done or {}).get("damaged"):
                    return f"no {step.file or 'file'} to damage on the target"
                if f in PACKAGES["rollback"].start and not (done or {}).get("copied"):
                    return f"no {step.file or 'file'} to copy on the target"
                if f == PACKAGES["rollback"].stop and not _rolled_back(done):
                    return "no copied file had changed since its copy: nothing was rolled back"
                if f == PACKAGES["disk"].stop and (idle := _idle_disks(done)):
                    return f"the disk fault on {idle} refused or delayed no write"
                if f == "request-heal" and (idle := _idle_faults(done)):
                    return f"the request fault {idle} met no request it could act on"
                if f == "request-heal" and step.into_open_txn and not _into_open_txn(done):
                    return ("no request the faults kept reached its broker while its "
                            "client's next transaction was open")
                if f == "request-heal" and step.after_txn_end and not _after_txn_end(done):
                    return ("no Produce the faults kept reached its broker after its "
                            "client had ended or fenced the transaction")
            if step.expect is not None:
                state = self.monitor.wait_for(lambda s: self.monitor.samples > before, 5.0,
                                              self.stop)
                if state is None or not self._holds(step.expect, state, step.partition):
                    return f"expected {_show(step.expect)}"
            if step.until is None:
                return None
            left = deadline - time.monotonic()
            wait_s = left if step.retry_every is None else min(step.retry_every, left)
            if self.monitor.wait_for(lambda s: self.monitor.samples > before
                                     and self._holds(step.until, s, step.partition),
                                     max(wait_s, 0.0), self.stop) is not None:
                return None
            if (self.stop.is_set() or step.retry_every is None
                    or time.monotonic() >= deadline):
                return f"{_show(step.until)} not seen within {step.timeout:g} s"

    def _value(self, f: str, step: Step) -> Any:
        if f in _REQUEST:
            return {"request": step.request.model_dump(mode="json", exclude_defaults=True)}
        if f in _NO_VALUE and (f != "start" or step.target is None):
            return None  # start takes a target (those nodes only), else brings back all
        if f in _TOPIC_ONLY:  # unclean toggles aim at the topic or the whole cluster
            return {"topic": self.topic, **({"target": step.target} if step.target in
                                            ("topic", "cluster") else {})}
        target = step.target
        if isinstance(target, str) and target in self.marks:
            target = [self.marks[target]]
        elif isinstance(target, int):
            target = [target]
        return {"target": target if target is not None else "one", "topic": self.topic,
                "partition": step.partition,
                **({"loss": step.loss} if f == "loss" and step.loss is not None else {}),
                **({"slow_ms": step.slow_ms} if f == "disk-slow" and step.slow_ms else {}),
                **({"file": step.file} if f in _FILE_FS and step.file else {}),
                **({"running": True} if f in PACKAGES["file"].start and step.running
                   else {}),
                **({"flip": step.flip} if f == "bitflip" and step.flip != "any" else {})}

    def _node_id(self, ref: str | int) -> int | None:
        ref = str(ref)
        if ref in self.marks:
            return self.marks[ref]
        if ref.isdigit():
            return int(ref)
        return next((n.node_id for n in self.cluster.nodes if n.name == ref), None)

    def _holds(self, cond: Condition, state: dict, partition: int) -> bool:
        p = partition_state(state, self.topic, partition)
        if cond.isr is not None:
            if p is None or sorted(p.get("isr") or []) != sorted(self._node_id(x)
                                                                 for x in cond.isr):
                return False
        if cond.leader is not None and not self._leads(
                cond.leader, -1 if p is None else p.get("leader", -1)):
            return False
        if cond.truncated is not None:  # any sample since the step began, seen or not
            tp = (self.topic, partition)
            drops = self.monitor.hw_drops.get(tp, 0) - self._drops_before.get(tp, 0)
            if (drops > 0) != cond.truncated:
                return False
        for ref, answers in (cond.answering or {}).items():
            node = self._node_id(ref)
            if state["answering"].get(str(node)) != answers:
                return False
        for ref, in_sync in (cond.in_sync or {}).items():
            if p is None or (self._node_id(ref) in (p.get("isr") or ())) != in_sync:
                return False
        return self._quorum_holds(cond, state.get("controller"))

    def _followers(self, state: dict, partition: int) -> list[int]:
        """The in-sync followers of ``partition`` in a sample, lowest id first (none without a
        leader)."""
        p = partition_state(state, self.topic, partition) or {}
        leader = p.get("leader", -1)
        return sorted(i for i in p.get("isr") or () if leader >= 0 and i != leader)

    def _quorum_holds(self, cond: Condition, quorum: dict | None) -> bool:
        if cond.voting is None and cond.quorum_leader is None:
            return True
        if quorum is None:  # no leader answered: nothing is known of the voters
            return str(cond.quorum_leader) == "none" and cond.voting is None
        for ref, votes in (cond.voting or {}).items():
            if (str(self._node_id(ref)) in quorum["voters"]) != votes:
                return False
        return cond.quorum_leader is None or self._leads(cond.quorum_leader, quorum["leader"])

    def _leads(self, want: str | int, leader: int) -> bool:
        """Whether ``leader`` (a node id, -1: none) is what a ``leader`` or ``quorum_leader``
        condition asks: a mark or node, ``none``, or ``not X`` (which also needs a leader)."""
        ref = str(want)
        negate = ref.startswith("not ")
        ref = ref.removeprefix("not ").strip()
        is_it = leader < 0 if ref == "none" else leader == self._node_id(ref)
        return is_it != negate and not (negate and leader < 0)


def _lost_partition_data(done: Any, topic: str, partition: int) -> bool:
    """Whether a ``lose-unfsynced`` completion shows bytes of ``topic``-``partition``'s log
    lost on some node (the power loss had something to lose)."""
    prefix = f"{topic}-{partition}/"
    return any(gone > 0 and path.startswith(prefix)
               for node in ((done or {}).get("lost") or {}).values()
               for path, gone in (node.get("logs") or {}).items())


def _rolled_back(done: Any) -> bool:
    """Whether a ``restore-file`` put back a copy that differed from the file it replaced."""
    return any(r["sha256"][0] != r["sha256"][1]
               for r in ((done or {}).get("restored") or {}).values())


def _idle_disks(done: Any) -> str | None:
    """The nodes (text) whose disk a ``disk-heal`` healed although the fault on it refused
    no write (full) and delayed no write or fsync (slow): a fault the broker never met.
    None when each disk it healed had acted."""
    idle = [name for name, state in sorted(((done or {}).get("state") or {}).items())
            if not (state.get("refused") or state.get("delayed"))]
    return ", ".join(idle) or None


def _idle_faults(done: Any) -> str | None:
    """The first request fault a ``request-heal`` ended that applied to no request, or that
    forwarded none it was to forward late (a delay or a hold), as text; None when each did."""
    for r in (done or {}).get("ended") or ():
        late = r.get("fault") in ("delay", "hold")
        if not r.get("applied") or (late and not any(
                q.get("forwarded_ns") is not None for q in r.get("requests") or ())):
            return f"{r.get('fault')} of {', '.join(map(str, r.get('apis') or []))}"
    return None


def _into_open_txn(done: Any) -> bool:
    """Whether a request some ended fault kept reached its broker while its client's next
    transaction was open: after a later AddPartitionsToTxn or Produce of that client (the
    next transaction's first request, in transactions v1 and v2) and no later EndTxn of it
    after those (``Applied``'s ``overtaken_by``: API -> when the last was forwarded)."""
    for r in (done or {}).get("ended") or ():
        for q in r.get("requests") or ():
            seen = q.get("overtaken_by") or {}
            began = max(seen.get("AddPartitionsToTxn", -1), seen.get("Produce", -1))
            if began >= 0 and seen.get("EndTxn", -1) < began:
                return True
    return False


def _after_txn_end(done: Any) -> bool:
    """Whether a Produce some ended fault kept reached its broker after its client had
    ended its transaction (a later EndTxn) or begun a new producer epoch (a later
    InitProducerId): a write of a transaction its coordinator no longer has open, the
    hanging transaction of KIP-890."""
    for r in (done or {}).get("ended") or ():
        for q in r.get("requests") or ():
            seen = q.get("overtaken_by") or {}
            if q.get("api") == "Produce" and ("EndTxn" in seen or "InitProducerId" in seen):
                return True
    return False


def _show(cond: Condition) -> str:
    return ", ".join(f"{k} {v}" for k, v in cond.model_dump(exclude_none=True).items())
