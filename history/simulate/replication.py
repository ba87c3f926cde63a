"""A reference model of one Kafka partition's replication: the oracle the verdict is checked
against. It shares no code with ``analysis`` (it must not agree with the checker by
construction); what it knows comes from Kafka's own documents:

- the design doc's replication section: a message is *committed* once every in-sync replica
  has it, and "a committed message will not be lost, as long as there is at least a single
  in sync replica alive"; the high watermark (HW) is the offset below which every replica of
  the ISR has the log, and consumers read only below it;
- ``acks`` (producer configs): 0, no acknowledgement is awaited; 1, the leader's own append;
  ``all``, the whole ISR, refused (``NOT_ENOUGH_REPLICAS``) while the ISR is smaller than
  ``min.insync.replicas``;
- elections: clean, from the ISR; on Kafka 4.x from the eligible leader replicas (ELR,
  KIP-966) when the ISR is empty; unclean (``unclean.leader.election.enable``), from any live
  replica, which may lose committed records;
- a follower that starts to follow a new leader truncates its log where it diverges from the
  leader's, by leader epoch (KIP-101, KIP-279);
- a power loss keeps only what was fsynced; Kafka does not fsync per write (the design doc:
  durability comes from replication, not from the disk);
- transactions (KIP-98): the coordinator ends one by writing a marker to each of its
  partitions, a control record appended like an acks=all write and retried until the HW
  passes it; the last stable offset (LSO) is the HW, or the first offset of the earliest
  transaction whose marker is not yet below it; ``read_committed`` consumers read below
  the LSO and skip aborted transactions' records;
- the idempotent producer (KIP-98): the leader knows each producer's last sequence from
  the log itself (its producer state is rebuilt from the log, so a new leader knows what its
  own log holds), and answers a retry of a batch it holds with the first copy's offset; a
  plain producer's retry is a new batch, appended again.

Every step is a method; nothing is random here (the generator draws the steps). Each record
is kept with the leader epoch it was appended in. ``fate`` says, for each acknowledged
value, whether it is lost and which documented mechanism lost it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Acks = Literal["0", "1", "all"]
#: Mechanisms by which Kafka documents the loss of an acknowledged record.
UNCLEAN, ACKS_BELOW_ALL, POWER_LOSS, LONE_ISR = ("unclean-election", "acks-below-all",
                                                 "power-loss", "min-isr-1")


def marker(pid: int) -> int:
    """The value standing for the marker of producer ``pid``'s transaction: negative, so
    that no record's value is one."""
    return -1 - pid


@dataclasses.dataclass(frozen=True)
class Entry:
    """One record of a replica's log: its value and the leader epoch it was appended in;
    ``pid``: the transactional producer's id, for a transaction's records; ``control``:
    ``"commit"`` or ``"abort"`` for the marker that ends ``pid``'s transaction (its value
    is ``marker(pid)``)."""

    value: int
    epoch: int
    pid: int | None = None
    control: str | None = None


@dataclasses.dataclass
class Replica:
    """One broker's copy of the partition: ``log`` (offset = position), ``fsynced`` (the
    offsets below it survive a power loss) and whether the broker runs."""

    node: int
    log: list[Entry] = dataclasses.field(default_factory=list)
    fsynced: int = 0
    alive: bool = True

    def end_offset(self, epoch: int) -> int:
        """The log end offset of leader epoch ``epoch`` as this replica knows it: the first
        offset of a later epoch, else its log end (OffsetsForLeaderEpoch, KIP-101)."""
        for offset, entry in enumerate(self.log):
            if entry.epoch > epoch:
                return offset
        return len(self.log)


@dataclasses.dataclass(frozen=True)
class Ack:
    """What the producer was told: ``value`` at ``offset``, acknowledged with ``acks`` by
    ``leader`` in ``epoch``; ``holders``: the replicas whose log had it at that moment."""

    value: int
    offset: int | None
    acks: str
    leader: int
    epoch: int
    holders: frozenset[int]


@dataclasses.dataclass(frozen=True)
class Election:
    """A new leader (None: the partition went offline) in ``epoch``; ``unclean`` when it was
    in neither the ISR nor the ELR."""

    leader: int | None
    epoch: int
    unclean: bool


class Partition:
    """One partition on ``nodes`` (the first leads in epoch 0), with ``min_isr``
    (``min.insync.replicas``), ``unclean`` (``unclean.leader.election.enable``) and ``elr``
    (Kafka 4.x's eligible leader replicas, KIP-966; False for 3.x).

    Raises ``ValueError`` for a step a real cluster cannot take (replicating to the leader, a
    node that is not a replica)."""

    def __init__(self, nodes: tuple[int, ...] = (1, 2, 3), min_isr: int = 2,
                 unclean: bool = False, elr: bool = True) -> None:
        self.replicas = {n: Replica(n) for n in nodes}
        self.min_isr, self.unclean, self.keeps_elr = min_isr, unclean, elr
        self.leader: int | None = nodes[0]
        self.epoch = 0
        self.isr: set[int] = set(nodes)
        self.elr: set[int] = set()
        self.hw = 0
        #: follower -> its log end offset as the leader knows it: from its fetches in the
        #: leader's own epoch only (a new leader knows none of them yet)
        self.caught: dict[int, int] = {n: 0 for n in nodes}
        self.acks: dict[int, Ack] = {}
        self.pending: dict[int, int] = {}  # acks=all value -> its offset, awaiting the ISR
        #: acks=all values whose produce request failed after the leader had it: value ->
        #: the error (the producer retries them, or reports them of unknown outcome)
        self.failed: dict[int, str] = {}
        self.was_read: set[int] = set()  # values a consumer read (committed then)
        #: value -> (mechanism, leader epoch) of a loss a retry then wrote back
        self.retaken: dict[int, tuple[str, int]] = {}
        self.elections: list[Election] = []
        self.lost_by: dict[int, str] = {}
        self.lost_epoch: dict[int, int] = {}
        self.power_lost: dict[int, set[int]] = {}  # value -> nodes a power loss took it from
        self.last_known: int | None = None  # the leader before the partition went offline

    # -- the producer ------------------------------------------------------------------------

    def produce(self, value: int, acks: Acks, idempotent: bool = False,
                pid: int | None = None) -> str | None:
        """Append ``value`` at the leader. Returns None when it was appended (``acks`` 0 and
        1 are acknowledged at once, ``all`` once the HW passes it: ``acked``), else the error
        a producer gets: ``NOT_LEADER_OR_FOLLOWER`` (no live leader) or
        ``NOT_ENOUGH_REPLICAS`` (acks=all with the ISR below ``min_isr``, checked before the
        append: ``Partition.appendRecordsToLeader``). An ``idempotent`` retry of a value the
        leader's log holds is not appended again: it awaits the HW at the first copy's
        offset (KIP-98). ``pid``: the record is in that transactional producer's
        transaction. ``ValueError`` for idempotence without acks=all (the producer refuses
        that configuration: ``enable.idempotence``)."""
        if idempotent and acks != "all":
            raise ValueError(f"an idempotent producer needs acks=all, not {acks}")
        if self.leader is None or not self.replicas[self.leader].alive:
            return "NOT_LEADER_OR_FOLLOWER"
        if acks == "all" and len(self.isr) < self.min_isr:
            return "NOT_ENOUGH_REPLICAS"
        log = self.replicas[self.leader].log
        held = (next((o for o, e in enumerate(log) if e.value == value), None)
                if idempotent else None)
        if held is not None:
            self.pending[value] = held
            self._advance_hw()
            return None
        log.append(Entry(value, self.epoch, pid))
        offset = len(log) - 1
        if acks == "all":
            self.pending[value] = offset
            self._advance_hw()
        else:
            self._ack(value, offset if acks == "1" else None, acks)
        return None

    def write_marker(self, pid: int, commit: bool) -> str | None:
        """The transaction coordinator ends producer ``pid``'s transaction on this partition
        (WriteTxnMarkers, KIP-98): a control record (value ``marker(pid)``) appended at the leader
        as an acks=all write, in ``acks`` once the HW passes it. A retry finds the marker the
        leader's log holds and awaits it (a second copy would change nothing a consumer
        sees). Errors as ``produce``'s."""
        if self.leader is None or not self.replicas[self.leader].alive:
            return "NOT_LEADER_OR_FOLLOWER"
        if len(self.isr) < self.min_isr:
            return "NOT_ENOUGH_REPLICAS"
        log = self.replicas[self.leader].log
        held = next((o for o, e in enumerate(log) if e.value == marker(pid)), None)
        if held is None:
            log.append(Entry(marker(pid), self.epoch, pid, "commit" if commit else "abort"))
        self.pending[marker(pid)] = len(log) - 1 if held is None else held
        self._advance_hw()
        return None

    def _ack(self, value: int, offset: int | None, acks: str) -> None:
        holders = frozenset(n for n, r in self.replicas.items()
                            if any(e.value == value for e in r.log))
        self.acks[value] = Ack(value, offset, acks, self.leader, self.epoch, holders)
        if value in self.lost_by:  # a retry put back what an election had taken
            self.retaken[value] = (self.lost_by.pop(value), self.lost_epoch.pop(value))
        # a power loss before the acknowledgement took an earlier copy (a retry wrote this
        # one): only losses after it can take what was acknowledged
        self.power_lost.pop(value, None)

    # -- replication -------------------------------------------------------------------------

    def fetch(self, node: int) -> None:
        """Follower ``node`` fetches from the leader: it first truncates where its log
        diverges from the leader's (by leader epoch, KIP-279), then copies the rest. Once it
        has the leader's whole log it rejoins the ISR (and leaves the ELR)."""
        if node == self.leader:
            raise ValueError(f"node {node} leads the partition: it does not fetch")
        follower = self.replicas[node]
        if self.leader is None or not follower.alive or not self.replicas[self.leader].alive:
            return
        leader = self.replicas[self.leader]
        if follower.log:
            last = follower.log[-1].epoch
            keep = min(len(follower.log), leader.end_offset(last))
            del follower.log[keep:]
            follower.fsynced = min(follower.fsynced, keep)
        follower.log.extend(leader.log[len(follower.log):])
        self.caught[node] = len(follower.log)
        if len(follower.log) == len(leader.log):
            self.isr.add(node)
            self.elr.discard(node)
        self._advance_hw()

    def fsync(self, node: int) -> None:
        """``node`` flushes its log: everything in it survives a power loss."""
        self.replicas[node].fsynced = len(self.replicas[node].log)

    def shrink(self, node: int) -> None:
        """The leader drops lagging follower ``node`` from the ISR
        (``replica.lag.time.max.ms``); with ELR kept, a member removed while the ISR is below
        ``min_isr`` becomes eligible (KIP-966)."""
        if node == self.leader or node not in self.isr:
            return
        self.isr.discard(node)
        if self.keeps_elr and len(self.isr) < self.min_isr:
            self.elr.add(node)
        self._advance_hw()

    def _advance_hw(self) -> None:
        """HW = the smallest log end offset of the ISR, as the leader knows them from this
        epoch's fetches; with ELR kept it does not move while the ISR is below ``min_isr``
        (KIP-966). An acks=all value below it is acknowledged if the ISR has ``min_isr``
        members then, else its produce fails (``NOT_ENOUGH_REPLICAS_AFTER_APPEND``:
        ``Partition.checkEnoughReplicasReachOffset``)."""
        if self.leader is None or (self.keeps_elr and len(self.isr) < self.min_isr):
            return
        leader_log = self.replicas[self.leader].log
        self.hw = max(self.hw, min(len(leader_log) if n == self.leader else self.caught[n]
                                   for n in self.isr))
        for value, offset in sorted(self.pending.items(), key=lambda kv: kv[1]):
            if offset < self.hw and offset < len(leader_log) and leader_log[offset].value == value:
                del self.pending[value]
                if len(self.isr) >= self.min_isr:
                    self._ack(value, offset, "all")
                else:
                    self.failed[value] = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"

    # -- faults ------------------------------------------------------------------------------

    def kill(self, node: int) -> None:
        """SIGKILL ``node``: its log stays as it is (the page cache survives a process
        crash). The controller fences it: out of the ISR (into the ELR when that leaves the
        ISR below ``min_isr``), and a new leader is elected if it led."""
        self.replicas[node].alive = False
        self._fence(node)

    def lose_power(self, node: int) -> None:
        """A power loss of ``node``: killed, and its log cut to what was fsynced."""
        replica = self.replicas[node]
        for entry in replica.log[replica.fsynced:]:
            self.power_lost.setdefault(entry.value, set()).add(node)
        del replica.log[replica.fsynced:]
        replica.alive = False
        self._fence(node)

    def start(self, node: int) -> None:
        """``node`` runs again, as a follower out of the ISR (it rejoins by fetching); if the
        partition was offline, the controller elects again. Both faults here (SIGKILL, power
        loss) are unclean shutdowns: with ELR, the controller takes the broker out of every
        ELR when it registers again (KAFKA-15586, KIP-966), since its log may have lost what
        made it eligible."""
        self.replicas[node].alive = True
        if self.keeps_elr:
            self.elr.discard(node)
        if self.leader is None:
            self._elect()

    def _fence(self, node: int) -> None:
        """The controller fences ``node``: out of the ISR, except that without ELR the last
        member stays (KRaft on 3.x never empties the ISR: the partition waits offline for
        it); with ELR a member removed below ``min_isr`` becomes eligible (KIP-966)."""
        if node in self.isr and (self.keeps_elr or len(self.isr) > 1):
            self.isr.discard(node)
            if self.keeps_elr and len(self.isr) < self.min_isr:
                self.elr.add(node)
        if node == self.leader:
            self._elect()

    def _elect(self) -> None:
        """The controller's choice (KIP-966's order, Kafka's "Eligible Leader Replicas"
        page): a live ISR member, else a live ELR member, else the last known leader if it
        runs (as before 4.0 when every replica was offline), else with unclean election on,
        any live replica; else offline."""
        live = [n for n in sorted(self.replicas) if self.replicas[n].alive]
        clean = ([n for n in live if n in self.isr] or [n for n in live if n in self.elr]
                 or [n for n in live if n == self.last_known and not self.isr and not self.elr])
        chosen = clean[0] if clean else (live[0] if self.unclean and live else None)
        if self.leader is not None:
            self.last_known = self.leader
        # the old leader's waiting produce requests end: it stopped leading (the delayed
        # produce completes with this error) or died (the connection broke)
        self.failed.update(dict.fromkeys(self.pending, "NOT_LEADER_OR_FOLLOWER"))
        self.pending.clear()
        self.epoch += 1
        self.leader = chosen
        self.caught = {n: 0 for n in self.replicas}
        unclean = chosen is not None and not clean
        self.elections.append(Election(chosen, self.epoch, unclean))
        if chosen is None:
            return
        # the new leader's HW is at most its own log end (an unclean or power-lost leader's
        # log may be shorter than the old HW)
        self.hw = min(self.hw, len(self.replicas[chosen].log))
        if unclean:
            self.isr, self.elr = {chosen}, set()
        else:
            self.isr.add(chosen)
            self.elr.discard(chosen)
        self._settle(chosen, unclean)

    def _settle(self, leader: int, unclean: bool) -> None:
        """What the new leader lacks of the acknowledged values, and of the values a
        consumer read (committed, so acknowledged as acks=all would be), is lost from now
        on, and by which mechanism (the first one that took it)."""
        have = {e.value for e in self.replicas[leader].log}
        read = {v: Ack(v, None, "all", leader, self.epoch, frozenset())
                for v in self.was_read if v not in self.acks}
        for value, ack in [*self.acks.items(), *read.items()]:
            if value in have or value in self.lost_by:
                continue
            self.lost_epoch[value] = self.epoch
            if leader in self.power_lost.get(value, ()):
                self.lost_by[value] = POWER_LOSS  # the new leader had it, and lost it
            elif unclean:
                self.lost_by[value] = UNCLEAN
            elif ack.acks in ("0", "1"):
                self.lost_by[value] = ACKS_BELOW_ALL
            else:
                self.lost_by[value] = LONE_ISR

    # -- what a consumer sees ----------------------------------------------------------------

    def lso(self) -> int:
        """The last stable offset: the HW, or the first offset of the earliest transaction
        whose marker is not below the HW, if lower (KIP-98; ``ListOffsets`` with
        ``read_committed``)."""
        if self.leader is None:
            return self.hw
        first: dict[int, int] = {}
        ended: set[int] = set()
        for offset, entry in enumerate(self.replicas[self.leader].log):
            if entry.pid is not None and entry.control is None:
                first.setdefault(entry.pid, offset)
            elif entry.control is not None and offset < self.hw:
                ended.add(entry.pid)
        return min([self.hw, *(o for pid, o in first.items() if pid not in ended)])

    def end(self, committed: bool = False) -> int:
        """Where a consumer's reads end: the LSO (``committed``: ``read_committed``), else
        the HW."""
        return self.lso() if committed else self.hw

    def read(self, start: int = 0, committed: bool = False) -> list[tuple[int, int]]:
        """``(offset, value)`` of the leader's log from ``start`` up to ``end(committed)``,
        without control records, and without aborted transactions' records when
        ``committed`` (``isolation.level``); ``[]`` while offline."""
        if self.leader is None or not self.replicas[self.leader].alive:
            return []
        log = self.replicas[self.leader].log
        aborted = {e.pid for e in log[:self.hw] if e.control == "abort"}
        out = [(o, log[o].value) for o in range(start, min(self.end(committed), len(log)))
               if log[o].control is None and not (committed and log[o].pid in aborted)]
        self.was_read.update(v for _, v in out)
        return out

    def fate(self) -> dict[int, str | None]:
        """Each acknowledged value's fate now: None if the leader's log holds it, else the
        mechanism that lost it (one of ``UNCLEAN``, ``ACKS_BELOW_ALL``, ``LONE_ISR``,
        ``POWER_LOSS``)."""
        have = set() if self.leader is None else {e.value for e in
                                                  self.replicas[self.leader].log}
        return {v: None if v in have else self.lost_by.get(v, "offline")
                for v in self.acks if v >= 0}
