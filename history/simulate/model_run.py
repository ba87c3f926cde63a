"""Histories of the reference model (``replication.Partition``) and their ground truth.

One history holds many independent partitions of topic ``TOPIC``, each its own model on
three brokers of its own (partition ``p`` on nodes ``3p+1..3p+3``): a fault of one partition
touches no other, so thousands of generated cases share one analysis. They share the run's
configuration (``acks``, ``min.insync.replicas``, unclean election), which is run-wide in a
real run too.

A case is a list of ``Step``s at times (ms) on the run's clock. What the history shows of a
case is what a real run's record would: its sends (``ack_ns`` when acknowledged; acks=0
sends ``ok`` without an offset), a consumer's polls below the high watermark, the nemesis
ops that kill, power off and start its brokers (ending ``ok``, ``info`` or ``fail``: a
fault op that raised may or may not have acted), the monitor's samples every 500 ms and
right before and after each nemesis op (leader, epoch, ISR, ELR, HW; a ``blind`` step hides
the partition from them for a while, as a monitor that cannot reach it), and the final reads
once every broker runs again and every follower has caught up. Fetches, ISR shrinks and
fsyncs are internal: only samples show them.

``generate`` returns, per acknowledged value, its ``Truth``: lost or not, by which
mechanism, and whether the record shows, inside the loss's window, the election that lost
it, a power loss of every replica that had it (``_Run.power_shown``), or another mechanism
that would have lost it (``Truth.expected``: the verdict the record supports). Not yet
modelled: producer retries (duplicates), transactions and their markers, and the brokers'
own log lines; not yet labelled apart: an unclean election whose sample before it shows a
stale ISR. ``bench/model_oracle.py`` compares the labels with the verdict on random cases,
``tests/unit/test_model_oracle.py`` on 2,000 drawn ones (issue 49).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from kafka_chaos.history.simulate.replication import ACKS_BELOW_ALL, POWER_LOSS, Partition
from kafka_chaos.history.writer import HistoryWriter

TOPIC = "kafka-chaos"
MS = 1_000_000
#: The monitor's period (ms), as ``nemesis/monitor.py``'s.
SAMPLE_MS = 500
#: Samples of a partition further apart than this (ns) leave the record blind on it
#: (docs/history-format.md's contract, as the verdict reads it).
BLIND_NS = 5_000_000_000

Kind = Literal["produce", "fetch", "shrink", "fsync", "poll", "kill", "lose-power", "start",
               "blind"]
#: How a ``kill`` or ``lose-power`` op ends: ``ok``; ``info`` (it took effect, then raised:
#: the record cannot tell); ``info-none`` (it raised before it did anything); ``fail`` (it
#: did nothing, and said so).
Ends = Literal["ok", "info", "info-none", "fail"]


@dataclasses.dataclass(frozen=True)
class Step:
    """``kind`` at ``at_ms`` on replica ``replica`` (0-2: the case's first, second or third
    broker; produce and poll ignore it); ``blind`` hides the partition from the monitor for
    ``for_ms``; ``poll`` is a consumer reading the partition from offset 0 up to the high
    watermark; ``ends``: how a ``kill`` or ``lose-power`` op ends (``Ends``)."""

    at_ms: int
    kind: Kind
    replica: int = 0
    for_ms: int = 0
    ends: Ends = "ok"


@dataclasses.dataclass(frozen=True)
class Truth:
    """An acknowledged value's fate: ``mechanism`` None when the final log holds it; else
    what lost it (``replication``'s names, or ``offline``: no leader at the end), and the
    ``election`` (leader epoch) after which the value was gone from the leader's log."""

    key: int
    value: int
    mechanism: str | None
    epoch: int | None
    shown: bool | None = None

    @property
    def expected(self) -> str | None:
        """The verdict the record supports for this value: None (no finding: it is in the
        log), ``permitted`` (lost, and the record shows the event that lost it inside its
        window), ``unexplained`` (lost by a documented mechanism the record cannot show),
        ``documented`` (a power loss the record shows while a replica that had the value
        still ran: the model loses nothing so unless it is wrong)."""
        if self.mechanism is None:
            return None
        if self.mechanism == POWER_LOSS and self.shown is False:
            return "documented"
        return "permitted" if self.shown else "unexplained"


@dataclasses.dataclass(frozen=True)
class _PowerLoss:
    """A lose-power op that cut a partition's log: its times (ns), the node, the ISR and ELR
    of the last sample before it (None: none in ``BLIND_NS``), the nodes down since earlier
    power losses of the partition, and the others dead then (killed, not started since)."""

    invoked_ns: int
    done_ns: int
    node: int
    needed: frozenset[int] | None
    down: frozenset[int]
    dead: frozenset[int] = frozenset()
    #: nodes an op of unknown outcome (``info``) may have taken down, not started since
    maybe: frozenset[int] = frozenset()
    #: False when the op ended ``info``: the record shows no power loss then, only an op
    #: that may have cut the log
    known: bool = True
    #: the live leader the last sample before it named (None: none in ``BLIND_NS``)
    leader: int | None = None
    #: when that sample was taken (ns; None: none in ``BLIND_NS``)
    sampled_ns: int | None = None


@dataclasses.dataclass(frozen=True)
class Config:
    """The run-wide settings every case shares. ``acks`` "0", "1" or "all" (an acks=0 send
    is ``ok`` with ``[null, value]``: its delivery report carries no offset)."""

    acks: str = "all"
    min_isr: int = 2
    unclean: bool = False
    elr: bool = True


def nodes_of(partition: int) -> tuple[int, int, int]:
    """Node ids of a partition's brokers."""
    return (3 * partition + 1, 3 * partition + 2, 3 * partition + 3)


def generate(path: Path, cases: list[list[Step]], config: Config,
             elr: list[bool] | None = None) -> list[Truth]:
    """Write ``path`` (a format-2 ``history.jsonl``; ``FileExistsError`` if it exists) for
    ``cases`` under ``config``; return the truth of every acknowledged value.

    ``elr`` (one per case) says whether that case's brokers keep an ELR (KIP-966), in place
    of ``config.elr``: the record shows the ELR per partition in its samples and no setting
    names it, so cases that differ only by it can share one analysis."""
    if elr is not None and len(elr) != len(cases):
        raise ValueError(f"elr has {len(elr)} entries for {len(cases)} cases")
    run = _Run(path, cases, config, elr)
    try:
        run.play()
    finally:
        run.out.close()
    return run.truth()


class _Run:
    def __init__(self, path: Path, cases: list[list[Step]], config: Config,
                 elr: list[bool] | None) -> None:
        self.cases, self.config = cases, config
        elr = [config.elr] * len(cases) if elr is None else elr
        self.models = [Partition(nodes_of(p), config.min_isr, config.unclean, elr[p])
                       for p in range(len(cases))]
        self.now = 0
        self.value = 0
        self.process = 0
        self.hidden_until = [0] * len(cases)
        self.waiting: dict[int, tuple[int, int]] = {}  # acks=all value -> (key, process)
        self.keys: dict[int, int] = {}  # value -> key
        # (ns, leader epoch, ISR and ELR, live leader or -1) of every sample that showed it
        self.seen: list[list[tuple[int, int, frozenset[int], int]]] = [[] for _ in cases]
        self.down: list[set[int]] = [set() for _ in cases]  # power lost, not started since
        # taken down by an op that ended info (the record cannot tell), not started since
        self.unsure: list[set[int]] = [set() for _ in cases]
        # each lose-power op of a partition that cut its log: (invoke ns, completion ns,
        # what the record shows of who had every acknowledged value: _PowerLoss)
        self.losses: list[list[_PowerLoss]] = [[] for _ in cases]
        self.acked_at: dict[int, int] = {}
        self.read: set[int] = set()  # values a mid-run poll returned
        self.final_at = 0
        nodes = {str(n): {"name": f"n{n}", "roles": ["broker", "controller"]}
                 for p in range(len(cases)) for n in nodes_of(p)}
        header = {"config": {"acks": config.acks, "idempotence": False, "txn": False,
                             "retries": 0, "max_in_flight": 1,
                             "min_insync_replicas": config.min_isr, "replication_factor": 3,
                             "unclean_leader_election": config.unclean,
                             "isolation_level": "read_uncommitted", "sub_via": "assign",
                             "auto_commit": False, "auto_offset_reset": "earliest"},
                  "keys": {str(p): [TOPIC, p] for p in range(len(cases))}, "nodes": nodes}
        self.out = HistoryWriter(path, header=header, columnar="inline",
                                 clock=lambda: self.now, flush_each=False)

    def write(self, process, type_: str, f: str, value, error: str | None = None) -> None:
        self.out.append(process, type_, f, value, error)
        self.now += 1000  # 1 µs per line: every op its own time

    def play(self) -> None:
        steps = sorted(((s.at_ms, p, i, s) for p, case in enumerate(self.cases)
                        for i, s in enumerate(case)), key=lambda x: x[:3])
        end_ms = max((s[0] for s in steps), default=0) + SAMPLE_MS
        next_sample = 0
        for at_ms, p, _, step in steps + [(end_ms, -1, 0, None)]:
            while next_sample <= at_ms:
                self._to(next_sample)
                self.sample("period")
                next_sample += SAMPLE_MS
            self._to(at_ms)
            if step is not None:
                self.apply(p, step)
        self.heal()
        self.sample("after final reads")

    def _to(self, ms: int) -> None:
        self.now = max(self.now, ms * MS)

    def apply(self, p: int, step: Step) -> None:
        model, node = self.models[p], nodes_of(p)[step.replica]
        if step.kind == "produce":
            self.produce(p)
        elif step.kind == "fetch":
            if node != model.leader:
                model.fetch(node)
        elif step.kind == "shrink":
            model.shrink(node)
        elif step.kind == "fsync":
            model.fsync(node)
        elif step.kind == "poll":
            self.poll(p)
        elif step.kind == "blind":
            self.hidden_until[p] = max(self.hidden_until[p], self.now + step.for_ms * MS)
        else:
            self.nemesis(p, step.kind, node, step.ends)
        self.settle_waiting()

    def poll(self, p: int) -> None:
        """A consumer of its own (a fresh process: one poll each, so no poll of another
        rewinds it) reads ``p`` from offset 0 up to the HW."""
        process = self.process
        self.process += 1
        recs = self.models[p].read()
        self.read.update(v for _, v in recs)
        self.write(process, "invoke", "poll", [["poll"]])
        self.write(process, "ok", "poll", [["poll", {str(p): [[o, v] for o, v in recs]}
                                            if recs else {}]])

    def produce(self, p: int) -> None:
        model = self.models[p]
        self.value += 1
        value, process = self.value, self.process
        self.process += 1
        self.keys[value] = p
        self.write(process, "invoke", "send", [["send", p, value]])
        error = model.produce(value, self.config.acks)
        if error == "NOT_ENOUGH_REPLICAS":
            self.write(process, "fail", "send", [["send", p, [None, value]]], error)
        elif error is not None:
            self.write(process, "info", "send", [["send", p, [None, value]]], error)
        elif value in model.acks:
            self.ack(process, p, value)
        else:
            self.waiting[value] = (p, process)

    def ack(self, process: int, p: int, value: int) -> None:
        ack = self.models[p].acks[value]
        self.acked_at[value] = self.now
        self.write(process, "ok", "send", [["send", p, [None, value] if ack.offset is None
                                            else [ack.offset, value, self.now]]])

    def settle_waiting(self) -> None:
        for value, (p, process) in list(self.waiting.items()):
            if value in self.models[p].acks:
                del self.waiting[value]
                self.ack(process, p, value)

    def nemesis(self, p: int, kind: str, node: int, ends: str = "ok") -> None:
        model = self.models[p]
        f = {"kill": "kill", "lose-power": "lose-unfsynced", "start": "start"}[kind]
        if kind == "start":
            ends = "ok"
        self.sample(f"before {f}", p)  # as the runner's scheduler does (issue 49, class 1)
        self.write("nemesis", "invoke", f, {"target": [node]})
        invoked = self.now - 1000
        if ends in ("info-none", "fail"):
            self.write("nemesis", ends[:4], f, None, "the fault raised before it acted")
            self.sample(f"after {f}", p)
            return
        lost = 0
        if kind == "kill":
            model.kill(node)
            done = {"killed": [f"n{node}"]}
        elif kind == "lose-power":
            before = len(model.replicas[node].log)
            model.lose_power(node)
            lost = before - len(model.replicas[node].log)
            done = {"lost": {f"n{node}": {
                "truncated_files": 1 if lost else 0,
                "logs": {f"{TOPIC}-{p}/00000000000000000000.log": 100 * lost} if lost else {},
                "sole_in_sync_replica_of": []}}}
        else:
            model.start(node)
            done = {"started": [f"n{node}"]}
            self.down[p].discard(node)
        if ends == "ok":
            self.write("nemesis", "ok", f, done)
            self.unsure[p].discard(node)
        else:
            self.write("nemesis", "info", f, None, "the fault raised after it acted")
        if kind == "lose-power":
            unsure = self.unsure[p]
            if lost:
                dead = frozenset(n for n, r in model.replicas.items() if not r.alive) - {node}
                seen = self._last_seen(p)
                sampled_ns, needed, leader = ((seen[0], seen[2], seen[3] if seen[3] >= 0 else None)
                                              if seen else (None, None, None))
                self.losses[p].append(_PowerLoss(
                    invoked, self.now - 1000, node, needed,
                    frozenset(self.down[p] - unsure), dead - unsure, dead & unsure,
                    known=ends == "ok", leader=leader, sampled_ns=sampled_ns))
            self.down[p].add(node)
        if ends != "ok":
            self.unsure[p].add(node)
        self.sample(f"after {f}", p)

    def sample(self, trigger: str, only: int | None = None) -> None:
        """A monitor sample of every partition, or of partition ``only``: a nemesis op's
        samples describe the partition whose brokers it touched, since the others share no
        broker with it (and a history of N cases would otherwise hold O(N²) states)."""
        self.write("monitor", "invoke", "cluster-state", {"trigger": trigger})
        parts = []
        for p, model in enumerate(self.models):
            if only is not None and p != only or self.now < self.hidden_until[p]:
                continue
            live = model.leader is not None and model.replicas[model.leader].alive
            self.seen[p].append((self.now, model.epoch, frozenset(model.isr | model.elr),
                                 model.leader if live else -1))
            parts.append({"partition": p, "leader": model.leader if live else -1,
                          "leader_epoch": model.epoch, "replicas": list(nodes_of(p)),
                          "isr": sorted(model.isr), "elr": sorted(model.elr),
                          "last_known_elr": [],
                          "offline": [n for n, r in model.replicas.items() if not r.alive],
                          **({"hw": model.hw, "lso": model.hw} if live else {})})
        answering = {str(n): r.alive for p, model in enumerate(self.models)
                     if only is None or p == only for n, r in model.replicas.items()}
        self.write("monitor", "ok", "cluster-state", {
            "answering": answering, "partitions": {TOPIC: parts}, "controller": None,
            "took_ms": 1})

    def heal(self) -> None:
        """heal-all: every broker started, every follower caught up, the acks=all sends still
        waiting acknowledged or timed out; then each partition read to its end."""
        self.write("nemesis", "invoke", "heal-all", None)
        started = []
        for model in self.models:
            for node, replica in model.replicas.items():
                if not replica.alive:
                    model.start(node)
                    started.append(f"n{node}")
        self.down = [set() for _ in self.cases]
        self.unsure = [set() for _ in self.cases]
        for model in self.models:
            for node in model.replicas:
                if node != model.leader:
                    model.fetch(node)
        self.write("nemesis", "ok", "heal-all", {"process": {"start": {"started": started}}})
        self.settle_waiting()
        for value, (p, process) in sorted(self.waiting.items()):
            self.write(process, "info", "send", [["send", p, [None, value]]], "_MSG_TIMED_OUT")
        self.waiting.clear()
        self.sample("after heal-all")
        reader = self.process
        self.process += 1
        self.final_at = self.now
        for p, model in enumerate(self.models):
            recs = model.read()
            end = len(recs)
            self.write(reader, "invoke", "poll", [["poll"]])
            self.write(reader, "ok", "poll", [[
                "poll", {str(p): [[o, v] for o, v in recs]} if recs else {},
                {"final": True, "range": {str(p): [0, end]}, "eof": True}]])

    def _last_seen(self, p: int) -> tuple[int, int, frozenset[int], int] | None:
        """The last sample of ``p`` before now (ns, leader epoch, ISR and ELR: the replicas
        the record says had every acknowledged value, live leader or -1), if at most
        ``BLIND_NS`` old; else None."""
        if not self.seen[p] or self.now - self.seen[p][-1][0] > BLIND_NS:
            return None
        return self.seen[p][-1]

    def truth(self) -> list[Truth]:
        out = []
        for p, model in enumerate(self.models):
            for value, mechanism in model.fate().items():
                epoch = model.lost_epoch.get(value)
                # acks=0 promises nothing: no event need show what lost it
                shown = (None if mechanism is None else True if self.config.acks == "0"
                         else self.power_shown(p, value)
                         if mechanism == POWER_LOSS else self.any_change_shown(p, value)
                         if mechanism == ACKS_BELOW_ALL else self.shown(p, value, epoch))
                if shown is not True and mechanism is not None and (
                        self.config.acks == "1" and value not in self.read
                        and (self.any_change_shown(p, value) or self.leader_lost_power(p, value))
                        or mechanism != POWER_LOSS and self.power_shown(p, value) is True):
                    # what lost it may be out of sight while another documented mechanism
                    # that loses it is in sight: acks=1 loses what a new leader lacked, or
                    # a failed leader had not replicated, and the record cannot tell that
                    # this one had it (never a record a consumer read: it was on every
                    # in-sync replica); a power loss of every replica that had it drops the
                    # guarantee whatever was elected after
                    shown = True
                out.append(Truth(p, value, mechanism, epoch, shown))
        return out

    def power_shown(self, p: int, value: int) -> bool | None:
        """Whether the record shows a power loss of every replica that had ``value``: one
        that cut the partition's log after the value's acknowledgement and before the final
        reads, the last sample before it (at most ``BLIND_NS`` old) naming in-sync and
        eligible replicas that all lost power in it or were down then (an earlier power loss
        or a kill, not started since: Kafka's design doc drops the guarantee once they all
        die), or every replica so. None (doubt): the record shows such losses but no sample
        of who was in sync before them, or one that took them all only if a node an op of
        unknown outcome (``info``) may have taken down was down; or the loss came from an
        op that ended ``info`` (the record shows none)."""
        doubt = False
        every = set(nodes_of(p))
        for loss in self.losses[p]:
            if loss.done_ns < self.acked_at[value] or loss.invoked_ns > self.final_at:
                continue
            if not loss.known:  # the record shows only an op that may have cut it
                doubt = True
                continue
            gone = {loss.node} | loss.down | loss.dead
            if gone >= every or (loss.needed and loss.needed <= gone):
                return True
            # one that took every replica only if an op of unknown outcome took one of them;
            # one whose ISR was sampled before the write was acknowledged, that took its
            # leader and as many of it as an acknowledgement needs: it may have shrunk so
            gone |= loss.maybe
            acked_on = self.config.min_isr if self.config.acks == "all" else 1
            doubt = (doubt or loss.needed is None or gone >= every
                     or bool(loss.needed and loss.needed <= gone)
                     or (loss.sampled_ns < self.acked_at[value]
                         and (loss.leader is None or loss.leader in gone)
                         and len(loss.needed & gone) >= acked_on))
        return None if doubt else False

    def leader_lost_power(self, p: int, value: int) -> bool:
        """Whether the record shows, inside ``value``'s window, a power loss that cut the
        log of the node the last sample before it named leader: acks=1 loses what the
        leader had not replicated should it fail (the producer docs)."""
        return any(loss.known and loss.leader == loss.node
                   and self.acked_at[value] <= loss.done_ns and loss.invoked_ns <= self.final_at
                   for loss in self.losses[p])

    def shown(self, p: int, value: int, epoch: int | None) -> bool:
        """Whether the record locates the election that lost ``value`` inside its window:
        the last sample of the partition before it (an older epoch) came after the
        acknowledgement, the first after it (that epoch or later) before the final reads,
        and the two are at most ``BLIND_NS`` apart."""
        if epoch is None:
            return False
        before = [t for t, e, *_ in self.seen[p] if e < epoch]
        after = [t for t, e, *_ in self.seen[p] if e >= epoch]
        if not before or not after:
            return False
        lo, hi = before[-1], after[0]
        return (self.acked_at[value] < lo and hi < self.final_at and hi - lo <= BLIND_NS)

    def any_change_shown(self, p: int, value: int) -> bool:
        """Whether the samples show any leader change of the partition inside ``value``'s
        window, the one that lost it or a later one: ``acks=1`` documents the loss of what a
        leader had not replicated when leadership changes, and the record cannot tell which
        change took a value. A change is two consecutive samples, at most ``BLIND_NS`` apart,
        the second naming a live leader other than the last live one the samples named, in a
        later epoch; the first taken after the acknowledgement, the second before the final
        reads."""
        seen = self.seen[p]
        last = seen[0][3] if seen and seen[0][3] >= 0 else None  # the last live leader named
        for (ta, ea, _, _), (tb, eb, _, lb) in zip(seen, seen[1:]):
            if lb >= 0:
                if (last is not None and lb != last and eb > ea and tb - ta <= BLIND_NS
                        and self.acked_at[value] < ta and tb < self.final_at):
                    return True
                last = lb
        return False
