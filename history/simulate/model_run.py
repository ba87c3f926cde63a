"""Histories of the reference model (``replication.Partition``) and their ground truth.

One history holds many independent partitions of topic ``TOPIC``, each its own model on
three brokers of its own (partition ``p`` on nodes ``3p+1..3p+3``): a fault of one partition
touches no other, so thousands of generated cases share one analysis. They share the run's
configuration (``Config``: ``acks``, ``min.insync.replicas``, unclean election, retries,
idempotence, transactions, isolation level), which is run-wide in a real run too.

A case is a list of ``Step``s at times (ms) on the run's clock. What the history shows of a
case is what a real run's record would: its sends (``ack_ns`` when acknowledged; acks=0
sends ``ok`` without an offset; a send that failed is retried at each later step when
``Config.retries``), transactions of one value each that commit (``ok``) or abort
(``fail``), a consumer's polls below the high watermark (the LSO under ``read_committed``),
the nemesis ops that kill, power off and start its brokers (ending ``ok``, ``info`` or
``fail``: a fault op that raised may or may not have acted), the monitor's samples every
500-750 ms (``SAMPLE_MS``, ``JITTER_MS``) and right before and after each nemesis op
(leader, epoch, ISR, ELR, HW, LSO; a ``blind`` step hides the partition from them for a
while, as a monitor that cannot reach it), and the final reads once every broker runs again,
every follower has caught up and the coordinator has written every marker. Fetches, ISR
shrinks, fsyncs and markers are internal: only samples show them.

``generate`` returns, per acknowledged value (and per value the record shows at two
offsets, or that a read returned from an aborted transaction), its ``Truth``
(``model_truth``): lost, or hidden behind a transaction no marker ends, or not; by which
mechanism; and whether the record shows that mechanism's event inside the window
(``Truth.expected``: the verdict the record supports); and the verdicts a ``duplicate`` and
a ``G1a`` finding of it must get. Not modelled: the brokers' own log lines (the record's
other witness of elections, ``analysis.kafka_log``), a response lost on its way to the
producer (so acks=1 never writes twice), the coordinator's own failures. Not labelled
apart: an unclean election whose sample before it shows a stale ISR.
``bench/model_oracle.py`` compares the labels with the verdict on random cases,
``tests/unit/test_model_oracle.py`` on 2,000 drawn ones (issue 49).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Literal

from kafka_chaos.history.simulate.model_truth import Labels, PowerLoss, Truth
from kafka_chaos.history.simulate.replication import Partition, marker
from kafka_chaos.history.writer import HistoryWriter

TOPIC = "kafka-chaos"
MS = 1_000_000
#: The monitor's period (ms), as ``nemesis/monitor.py``'s, and the most a sample may come
#: later than that (ms): a real monitor's samples drift by what each took (a slow cluster
#: answers in hundreds of ms).
SAMPLE_MS, JITTER_MS = 500, 250

Kind = Literal["produce", "fetch", "shrink", "fsync", "poll", "kill", "lose-power", "start",
               "blind", "txn", "end"]
#: How a ``kill`` or ``lose-power`` op ends: ``ok``; ``info`` (it took effect, then raised:
#: the record cannot tell); ``info-none`` (it raised before it did anything); ``fail`` (it
#: did nothing, and said so).
Ends = Literal["ok", "info", "info-none", "fail"]


@dataclasses.dataclass(frozen=True)
class Step:
    """``kind`` at ``at_ms`` on replica ``replica`` (0-2: the case's first, second or third
    broker; produce and poll ignore it); ``blind`` hides the partition from the monitor for
    ``for_ms``; ``poll`` is a consumer reading the partition from offset 0 up to the high
    watermark (the LSO under ``read_committed``); ``txn`` begins a transaction that writes
    one value (committed at the heal, if still open then, when its ``ends`` is ``ok``, else
    aborted), ``end`` ends the partition's oldest open one, a commit if ``ends`` is
    ``ok``, else an abort (without ``Config.transactions``, ``txn`` is a ``produce`` and
    ``end`` nothing); ``ends``: how a ``kill`` or ``lose-power`` op ends (``Ends``)."""

    at_ms: int
    kind: Kind
    replica: int = 0
    for_ms: int = 0
    ends: Ends = "ok"


@dataclasses.dataclass(frozen=True)
class Config:
    """The run-wide settings every case shares. ``acks`` "0", "1" or "all" (an acks=0 send
    is ``ok`` with ``[null, value]``: its delivery report carries no offset); ``retries``:
    a produce that failed with a retriable error is sent again (at each later step, until
    the heal; none: it ends ``info``, or ``fail`` when the leader refused it before the
    append); ``idempotence`` (needs acks=all): the leader answers a retry of a value it
    holds with its offset (KIP-98). ``ValueError`` for idempotence without acks=all or
    retries."""

    acks: str = "all"
    min_isr: int = 2
    unclean: bool = False
    elr: bool = True
    retries: bool = False
    idempotence: bool = False
    transactions: bool = False
    read_committed: bool = False

    def __post_init__(self) -> None:
        if self.idempotence and (self.acks != "all" or not self.retries):
            raise ValueError("idempotence needs acks=all and retries (enable.idempotence)")
        if self.transactions and not self.idempotence:
            raise ValueError("transactions need the idempotent producer (KIP-98)")


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


class _Run(Labels):
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
        # what the record shows of who had every acknowledged value: PowerLoss)
        self.losses: list[list[PowerLoss]] = [[] for _ in cases]
        self.acked_at: dict[int, int] = {}
        self.read: set[int] = set()  # values a mid-run poll returned
        self.final_read: set[int] = set()
        self.final_at = 0
        nodes = {str(n): {"name": f"n{n}", "roles": ["broker", "controller"]}
                 for p in range(len(cases)) for n in nodes_of(p)}
        # value -> its send's invoke (ns); the offsets the record claims it at (its
        # acknowledgement's, every read's); the sends whose attempt failed, to retry
        self.sent_at: dict[int, int] = {}
        self.observed: dict[int, set[int]] = {}
        self.retrying: dict[int, tuple[int, int]] = {}
        # transactions: value -> its producer's (and op's) process; each partition's open
        # ones (values, oldest first); the aborted ones; the coordinator's markers to write
        # ((partition, producer) -> commit), and those written, awaiting the HW
        self.txn_of: dict[int, int] = {}
        self.open: list[list[int]] = [[] for _ in cases]
        self.aborted: set[int] = set()
        self.committing: dict[int, int] = {}  # value -> partition: a commit awaiting its flush
        self.abort_at_heal: set[int] = set()
        self.markers: dict[tuple[int, int], bool] = {}
        self.marking: dict[tuple[int, int], bool] = {}
        header = {"config": {"acks": config.acks, "idempotence": config.idempotence,
                             "txn": config.transactions,
                             "retries": 2147483647 if config.retries else 0,
                             "max_in_flight": 1,
                             "min_insync_replicas": config.min_isr, "replication_factor": 3,
                             "unclean_leader_election": config.unclean,
                             "isolation_level": ("read_committed" if config.read_committed
                                                 else "read_uncommitted"),
                             "sub_via": "assign",
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
        jitter = random.Random(len(self.cases))  # the same history for the same cases
        for at_ms, p, _, step in steps + [(end_ms, -1, 0, None)]:
            while next_sample <= at_ms:
                self._to(next_sample)
                self.sample("period")
                next_sample += SAMPLE_MS + jitter.randrange(JITTER_MS)
            self._to(at_ms)
            if step is not None:
                self.apply(p, step)
        self.heal()
        self.sample("after final reads")

    def _to(self, ms: int) -> None:
        self.now = max(self.now, ms * MS)

    def apply(self, p: int, step: Step) -> None:
        model, node = self.models[p], nodes_of(p)[step.replica]
        if step.kind == "produce" or step.kind == "txn" and not self.config.transactions:
            self.produce(p)
        elif step.kind == "txn":
            self.produce(p, txn=True, commit=step.ends == "ok")
        elif step.kind == "end":
            if self.config.transactions and self.open[p]:
                value = self.open[p].pop(0)
                if step.ends != "ok":
                    self.end_txn(p, value, commit=False)
                else:
                    self.commit(p, value)
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
        recs = self.models[p].read(committed=self.config.read_committed)
        self.read.update(v for _, v in recs)
        self._observe(recs)
        self.write(process, "invoke", "poll", [["poll"]])
        self.write(process, "ok", "poll", [["poll", {str(p): [[o, v] for o, v in recs]}
                                            if recs else {}]])

    def produce(self, p: int, txn: bool = False, commit: bool = True) -> None:
        """A send of a new value by a producer of its own; ``txn``: in a transaction of its
        own (its op completes when ``end_txn`` ends it), which the workload commits at the
        heal if ``commit`` and no ``end`` step ended it first, else aborts."""
        self.value += 1
        value, process = self.value, self.process
        self.process += 1
        self.keys[value] = p
        self.sent_at[value] = self.now
        if txn:
            self.txn_of[value] = process
            self.open[p].append(value)
            if not commit:
                self.abort_at_heal.add(value)
        self.write(process, "invoke", "txn" if txn else "send", [["send", p, value]])
        self.attempt(p, value, process)

    def commit(self, p: int, value: int) -> None:
        """``commitTransaction`` of ``value``'s transaction: it flushes first, so it waits
        (``committing``) until the send is acknowledged."""
        if value in self.models[p].acks:
            self.end_txn(p, value, commit=True)
        else:
            self.committing[value] = p

    def end_txn(self, p: int, value: int, commit: bool) -> None:
        """The producer of ``value``'s transaction commits it (``commit`` saw its send
        acknowledged) or aborts it; the coordinator then writes the marker (``markers``). A
        commit is ``ok`` when the coordinator has decided, before any marker is written (EndTxn,
        KIP-98); an abort is ``fail`` (``ABORTED``)."""
        model, process = self.models[p], self.txn_of[value]
        ack = model.acks.get(value)
        for queue in (self.waiting, self.retrying, model.pending, model.failed):
            queue.pop(value, None)  # the producer stops sending it
        if commit and ack is not None:  # ack_ns: its delivery report, before the commit
            self._observe([(ack.offset, value)])
            self.write(process, "ok", "txn", [["send", p, [ack.offset, value,
                                                            self.acked_at[value]]]])
        else:
            self.acked_at.pop(value, None)
            self.aborted.add(value)
            model.acks.pop(value, None)  # never acknowledged: the transaction did not commit
            self.write(process, "fail", "txn", [["send", p, [None if ack is None else ack.offset,
                                                             value]]], "ABORTED")
        self.markers[(p, process)] = commit and ack is not None

    def attempt(self, p: int, value: int, process: int) -> None:
        """One produce request of ``value``: acknowledged, awaiting the HW (``waiting``),
        to be retried (``retrying``), or failed."""
        model = self.models[p]
        error = model.produce(value, self.config.acks, self.config.idempotence,
                              self.txn_of.get(value))
        if error is not None and self.config.retries:
            self.retrying[value] = (p, process)
        elif error == "NOT_ENOUGH_REPLICAS":
            self.write(process, "fail", "send", [["send", p, [None, value]]], error)
        elif error is not None:
            self.write(process, "info", "send", [["send", p, [None, value]]], error)
        elif value in model.acks:
            self.ack(process, p, value)
        else:
            self.waiting[value] = (p, process)

    def ack(self, process: int, p: int, value: int) -> None:
        self.acked_at[value] = self.now
        if value in self.txn_of:  # its delivery report; its op ends with the transaction
            if self.committing.pop(value, None) is not None:
                self.end_txn(p, value, commit=True)
            return
        ack = self.models[p].acks[value]
        if ack.offset is not None:
            self._observe([(ack.offset, value)])
        self.write(process, "ok", "send", [["send", p, [None, value] if ack.offset is None
                                            else [ack.offset, value, self.now]]])

    def settle_waiting(self) -> None:
        """Acknowledge what the HW passed; fail (or retry) what the leader failed; try each
        retried send once more."""
        for value, (p, process) in list(self.waiting.items()):
            model = self.models[p]
            if value in model.acks:
                del self.waiting[value]
                self.ack(process, p, value)
            elif value in model.failed:
                del self.waiting[value]
                error = model.failed.pop(value)
                if self.config.retries:
                    self.retrying[value] = (p, process)
                else:
                    self.write(process, "info", "send", [["send", p, [None, value]]], error)
        for value, (p, process) in list(self.retrying.items()):
            del self.retrying[value]
            self.attempt(p, value, process)
        self.settle_markers()

    def settle_markers(self) -> None:
        """The coordinator writes each marker it owes to its partition's leader, and writes
        it again where a leader change failed it, until the HW passes it (KIP-98)."""
        for (p, pid), commit in list(self.marking.items()):
            model = self.models[p]
            if marker(pid) in model.acks:
                del self.marking[(p, pid)]
            elif model.failed.pop(marker(pid), None) is not None:
                del self.marking[(p, pid)]
                self.markers[(p, pid)] = commit
        for (p, pid), commit in list(self.markers.items()):
            model = self.models[p]
            if model.write_marker(pid, commit) is None:
                del self.markers[(p, pid)]
                if marker(pid) not in model.acks:
                    self.marking[(p, pid)] = commit

    def _observe(self, records) -> None:
        for offset, value in records:
            self.observed.setdefault(value, set()).add(offset)

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
                self.losses[p].append(PowerLoss(
                    invoked, self.now - 1000, node, needed,
                    frozenset(self.down[p] - unsure), dead - unsure, dead & unsure,
                    known=ends == "ok", leader=leader, sampled_ns=sampled_ns))
            self.down[p].add(node)
        if ends != "ok":
            self.unsure[p].add(node)
        self.sample(f"after {f}", p)

    def catch_up(self, rounds: int = 3) -> None:
        """Every follower fetches, and what that settles is settled (retries, commits,
        markers), ``rounds`` times: a retry appended in one round is replicated in the
        next, and so is the marker of a commit it completed."""
        for _ in range(rounds):
            for model in self.models:
                for node in model.replicas:
                    if node != model.leader:
                        model.fetch(node)
            self.settle_waiting()

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
                          **({"hw": model.hw, "lso": model.lso()} if live else {})})
        answering = {str(n): r.alive for p, model in enumerate(self.models)
                     if only is None or p == only for n, r in model.replicas.items()}
        self.write("monitor", "ok", "cluster-state", {
            "answering": answering, "partitions": {TOPIC: parts}, "controller": None,
            "took_ms": 1})

    def heal(self) -> None:
        """heal-all: every broker started, every open transaction committed (once its flush
        completes) or aborted (``produce``), every follower caught up, the acks=all sends still
        waiting acknowledged or timed out, a commit whose flush does not complete then aborted,
        the markers written; then each partition read to its end (the LSO under
        ``read_committed``)."""
        self.write("nemesis", "invoke", "heal-all", None)
        started = []
        for model in self.models:
            for node, replica in model.replicas.items():
                if not replica.alive:
                    model.start(node)
                    started.append(f"n{node}")
        self.down = [set() for _ in self.cases]
        self.unsure = [set() for _ in self.cases]
        self.write("nemesis", "ok", "heal-all", {"process": {"start": {"started": started}}})
        for p, values in enumerate(self.open):  # the workload ends what it left open
            for value in values:
                if value in self.abort_at_heal:
                    self.end_txn(p, value, commit=False)
                else:
                    self.commit(p, value)
            values.clear()
        self.catch_up()
        for value, p in sorted(self.committing.items()):  # the flush timed out: aborted
            self.end_txn(p, value, commit=False)
        self.committing.clear()
        self.catch_up()
        for value, (p, process) in sorted({**self.waiting, **self.retrying}.items()):
            self.write(process, "info", "send", [["send", p, [None, value]]], "_MSG_TIMED_OUT")
        self.waiting.clear()
        self.retrying.clear()
        self.sample("after heal-all")
        reader = self.process
        self.process += 1
        self.final_at = self.now
        for p, model in enumerate(self.models):
            recs = model.read(committed=self.config.read_committed)
            self._observe(recs)
            self.final_read.update(v for _, v in recs)
            end = model.end(self.config.read_committed)
            self.write(reader, "invoke", "poll", [["poll"]])
            self.write(reader, "ok", "poll", [[
                "poll", {str(p): [[o, v] for o, v in recs]} if recs else {},
                {"final": True, "range": {str(p): [0, end]}, "eof": True}]])
