"""What the run's record must show, finding by finding, for a rule of the promises table
(``analysis.promises``) to explain it: each rule's evidence (the events of its mechanism on
the finding's partition inside its window), its doubt (an event that may be its mechanism
but that the record cannot settle) and its precondition (whether it could have acted on
that partition then), and the conditions on a finding's own facts.

All of them read windows by ``analysis.evidence``'s interval semantics: an event explains a
finding only when it lies inside the finding's window, located by the monitor's samples, a
nemesis op's own times, or the brokers' logs (``analysis.kafka_log``); what crosses an edge
of the window is doubt.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Callable

from kafka_chaos.analysis import evidence as ev


@dataclasses.dataclass(frozen=True)
class Case:
    """One finding, as the rules see it.

    ``tp``: its topic-partition (None when the history does not map its key). ``lo``,
    ``hi``: its window, history indexes (``analysis.evidence``): the event that explains it
    must lie there (e.g. a lost write's acknowledgement and the invoke of the read that
    misses it). ``write``: ``(invoke, completion)`` indexes of the send it concerns, when it
    concerns one. ``writer_f``: ``send`` or ``txn``, the writing op's ``f`` (None unknown).
    ``ww``: a cycle with a ww step (cycle anomalies only). ``fenced``: the earlier owner of
    a ``group-overlap`` was fenced (it reported the partition lost, or it died), not (it
    revoked it), or None when its own record cannot tell. ``state_write_failed``: an
    acknowledgement of the share-partition failed (or has an unknown outcome) within the
    window of a ``share-count-regress``. ``sent``: ``(invoke, completion)`` indexes of the
    op that wrote the value of a ``duplicate`` (completion ``END`` when it never completed),
    ``value`` that value. ``epochless``: a commit above a ``group-skip``'s record was
    stored without a leader epoch (sent without one, or the proxy took it out; None: the
    record cannot tell). ``offset``: the offset the finding is about (a lost or unseen
    record's, a garbage or corrupt read's, an inconsistent offset; the later of a poll
    pair's two; None otherwise: ``judge._offset``), ``read_to`` the offset
    at which the final reads of its partition ended (None unknown). ``reset``: a member of
    a ``group-skip``'s group may have started past the record at the log end, assigned it
    while the group had no committed offset (None: the record cannot tell).
    ``read_before``: a consumer's poll (not a final read) returned the lost or unseen
    write's value (at any offset: any copy of it a consumer read was committed).
    ``ack_ns``: when a lost or unseen write's delivery report was served (ns on the history
    clock; the broker acknowledged it before): an event the record locates after it came
    after the acknowledgement, even within the same stretch between two of the record's
    ops. ``offset`` is then the offset it was acknowledged at. ``copies``: the offsets a
    ``duplicate``'s value was read at. ``stuck``: for a ``hanging-transaction``, the index of
    the first sample that showed its LSO stuck (``lo``, ``hi`` are when the stuck offset was
    written).
    """

    tp: tuple[str, int] | None
    lo: int
    hi: int
    write: tuple[int, int] | None = None
    writer_f: str | None = None
    ww: bool = False
    fenced: bool | None = False
    state_write_failed: bool = False
    sent: tuple[int, int] | None = None
    value: int | None = None
    epochless: bool | None = False
    offset: int | None = None
    read_to: int | None = None
    reset: bool | None = False
    read_before: bool = False
    ack_ns: int | None = None
    copies: tuple[int, ...] | None = None
    stuck: int | None = None


def changes(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Leader changes of the partition inside the window (after the write's delivery report
    where the case knows it). A new leader whose log, the broker log says, already reached
    the write's offset when it took the epoch is one too: the record at that offset may be
    another (a deposed leader that never truncated its own tail, elected again: the
    ``acks1-leader-move`` scenario). And, by the broker log, those the write's
    acknowledgement came during: after the new leader began without the write's offset,
    before the old leader learned it no longer led, while its log held that offset
    (``deposed_ack``)."""
    return rec.of(c.tp, ev.LEADER_CHANGE, c.lo, c.hi, after_ns=c.ack_ns) + [
        e for e in rec.of(c.tp, ev.LEADER_CHANGE, 0, c.hi, loose=True) if deposed_ack(e, c)]


def deposed_ack(e: ev.Event, c: Case) -> bool:
    """The write was acknowledged by the old leader of change ``e`` after it was deposed:
    its delivery report came after the new leader logged taking the epoch without the
    write's record, yet no later than the old leader logged learning it (a deposed leader
    acknowledges ``acks=1`` writes alone until it learns: Kafka's producer docs for
    ``acks=1``), at an offset below the old leader's log end then; and the change completed
    before the window ends. Without the record: the new leader's log ended at or below the
    write's offset, or the old leader, once deposed, truncated its log to at or below it
    (``deposed_cut``: their logs diverged there, so the new leader's record at that offset,
    if any, is another: a deposed leader that kept its own tail, elected again)."""
    f = e.facts
    cut = f.get("deposed_cut")
    return (c.ack_ns is not None and c.offset is not None and f.get("deposed_ns") is not None
            and e.lo_ns < c.ack_ns <= f["deposed_ns"] and e.hi <= c.hi
            and (f["start_offset"] <= c.offset or cut is not None and cut <= c.offset)
            and c.offset < f["deposed_offset"])


def leader_change(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Leader changes of the partition within the window (``changes``); power losses within
    it that cut the log of the node the last sample before named leader (the leader failed,
    and came back without the un-fsynced records no follower had: the producer docs'
    "should the leader fail"); for a write, also zombie leaders of it while the write was in
    flight (the write went to a leader its successor had replaced, acks=1 lets it
    acknowledge alone)."""
    lo, hi = c.write if c.write is not None else (c.lo, c.hi)
    return changes(rec, c) + [
        e for e in rec.of(c.tp, ev.POWER_LOSS, c.lo, c.hi, after_ns=c.ack_ns)
        if e.facts.get("leader") in e.facts["nodes"]] + rec.of(c.tp, ev.ZOMBIE, lo, hi)


def unclean_by_kafka(rec: ev.Record, c: Case, e: ev.Event) -> bool:
    """Leader change ``e`` was unclean and Kafka may elect so then: its controller logged it
    as an unclean partition change (it does so only with the setting on, or forced), or the
    new leader was in neither the last sampled ISR nor ELR while a toggle had surely turned
    the setting on for the whole of the change's stretch (one that straddles the toggle may
    have come before the setting applied)."""
    return e.facts.get("logged_unclean") or (
        e.facts["unclean"] and rec.unclean_on(c.tp[0], e.lo, e.hi, throughout=not rec.loose))


def unclean_election(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Forced unclean elections of the partition (KIP-460) within the window, and unclean
    elections Kafka may make then (``unclean_by_kafka``)."""
    return rec.of(c.tp, ev.FORCED_UNCLEAN, c.lo, c.hi, after_ns=c.ack_ns) + [
        e for e in changes(rec, c) if unclean_by_kafka(rec, c, e)]


def since_sent(c: Case) -> int:
    """Where a rule's mechanism could first have touched the finding: its write's invoke
    when it has one (the write may have been acknowledged at any time after), else ``lo``."""
    return c.lo if c.write is None else min(c.lo, c.write[0])


def unseen(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """Elections the monitor never saw (a leader epoch gap) within the window: any of them
    may have been the one that lost the write, and the record cannot say how it went."""
    return next((e.stretch for e in rec.of(c.tp, ev.UNSEEN, c.lo, c.hi)), None)


def unclean_applies(rec: ev.Record, c: Case) -> bool:
    """Unclean election was, or may have been, on for the finding's topic at some time
    since its write was sent and before its window ends, or forced on its partition."""
    lo = since_sent(c)
    return (rec.unclean_on(c.tp[0], lo, c.hi, maybe=True)
            or bool(rec.of(c.tp, ev.FORCED_UNCLEAN, lo, c.hi, loose=True))
            or any(e.facts.get("logged_unclean")
                   for e in rec.of(c.tp, ev.LEADER_CHANGE, lo, c.hi, loose=True)))


def unclean_maybe(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """An election outside the ISR and ELR within the window while a toggle whose outcome
    is unknown (``info``) may have turned unclean election on for the topic; or an unseen
    election while the setting was, or may have been, on."""
    return next((e.stretch for e in rec.of(c.tp, ev.LEADER_CHANGE, c.lo, c.hi, loose=True)
                 if e.facts["unclean"] and rec.unclean_on(c.tp[0], e.lo, e.hi, maybe=True)),
                None) or next((e.stretch for e in rec.of(c.tp, ev.UNSEEN, c.lo, c.hi)
                               if rec.unclean_on(c.tp[0], e.lo, e.hi, maybe=True)), None)


def power_applies(rec: ev.Record, c: Case) -> bool:
    """A power loss cut the finding's partition since its write was sent and before its
    window ends, or one of unknown outcome (which may have cut any) happened then. Nemesis
    ops are never blind: without one, the rule cannot have acted on this partition."""
    lo = since_sent(c)
    return (bool(rec.of(c.tp, ev.POWER_LOSS, lo, c.hi, loose=True))
            or any(a <= c.hi and lo <= b for a, b in rec.power_maybe))


def power_loss_unjudged(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """A power loss of the partition within the window with no sample of its ISR before
    that did not cut every replica, or that took every replica that had the record only if
    a fault op of unknown outcome took one of them down (``maybe_down``), or whose ISR was
    read before the write was acknowledged while it took as many of that ISR as an
    acknowledgement needs (``Record.acked_on``): the ISR may have shrunk to those before the
    write; or a ``lose-unfsynced`` op of unknown outcome."""
    return next((e.stretch for e in rec.of(c.tp, ev.POWER_LOSS, c.lo, c.hi, loose=True)
                 if _loss_unsettled(rec, e, c)),
                None) or next(((a, b, None, None) for a, b in rec.power_maybe
                               if a <= c.hi and c.lo <= b), None)


def _loss_unsettled(rec: ev.Record, e: ev.Event, c: Case) -> bool:
    """Whether the record cannot settle that loss ``e`` (a power loss, a recovery cut)
    took every replica that had the write (``power_loss_unjudged``)."""
    return not e.facts.get("every_replica") and (
        e.facts["needed"] is None or bool(e.facts.get("every_replica_maybe"))
        or bool(e.facts.get("maybe_down") and set(e.facts["needed"])
                <= _gone(e) | set(e.facts["maybe_down"]))
        or _isr_before_ack(rec, e, c))


def _isr_before_ack(rec: ev.Record, e: ev.Event, c: Case) -> bool:
    """Power loss ``e``'s ISR was read before the write was acknowledged (its delivery
    report, else its op's completion), and the loss took that sample's leader and at least
    ``Record.acked_on`` of that ISR (with those down or dead, or maybe so): the ISR may
    have shrunk to them before the write."""
    if e.facts.get("sampled") is None:
        return False
    if (e.facts["sampled_ns"] >= c.ack_ns if c.ack_ns is not None
            else e.facts["sampled"] >= c.lo):
        return False
    gone = _gone(e) | set(e.facts.get("maybe_down", ()))
    leader = e.facts.get("leader")
    if leader is not None and leader >= 0 and leader not in gone:
        return False  # an ISR always holds its leader
    return len(set(e.facts["needed"]) & gone) >= rec.acked_on


def _gone(e: ev.Event) -> set[int]:
    """The nodes dead after power loss ``e``: those it cut, and those down or killed
    before it (``in_sync_replicas_lost_power``)."""
    return set(e.facts["nodes"]) | set(e.facts.get("down", ())) | set(e.facts.get("killed", ()))


def leader_alone_replaced(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Leader changes within the window whose old leader was, at the last sample before,
    the partition's whole ISR, to a replica Kafka was allowed to elect (an unclean election
    while the setting was off is Kafka's own broken promise, not this one's)."""
    return [e for e in changes(rec, c) if e.facts["isr"] == [e.facts["from"]]
            and (not e.facts["unclean"] or unclean_by_kafka(rec, c, e))]


def in_sync_replicas_lost_power(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Power losses within the window after which every replica that had every acknowledged
    record was dead: the ISR and ELR of the last sample before it (the last known leader when
    both were empty, KIP-966), or every replica it has (then no sample is needed). A node
    the loss cut, one an earlier power loss took down (it holds nothing written since, and
    lost its un-fsynced data then) or one a kill or stop took down, none started since,
    counts: Kafka's design doc drops the guarantee once all the nodes replicating a
    partition die, whichever way they died."""
    return [e for e in rec.of(c.tp, ev.POWER_LOSS, c.lo, c.hi, after_ns=c.ack_ns)
            if e.facts.get("every_replica")
            or (e.facts["needed"] and set(e.facts["needed"]) <= _gone(e))]


def proxy_duplicated(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Produce requests of the partition the proxy sent twice while the value's send was in
    flight (``Case.sent``; the finding's window when the history lacks it) that carried the
    value itself, where the proxy could read their values."""
    lo, hi = c.sent if c.sent is not None else (c.lo, c.hi)
    out = []
    for e in rec.of(c.tp, ev.DUPLICATED, lo, hi):
        values = rec.copied.get((c.tp, e.facts["fault"]))
        if values is None or c.value in values:
            out.append(e)
    return out


def proxy_duplicated_maybe(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """A proxy ``duplicate`` fault whose report the record lacks, active in the window."""
    lo, hi = c.sent if c.sent is not None else (c.lo, c.hi)
    return next(((a, b, None, None) for a, b in rec.duplicates_maybe if a <= hi and lo <= b),
                None)


def late_produce(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Produce requests of the partition a proxy fault kept until after their client had
    ended or fenced the transaction, forwarded within the window (for a stuck LSO: between
    the last sample before it and the first that shows it)."""
    return rec.of(c.tp, ev.LATE_PRODUCE, c.lo, c.hi)


def late_produce_maybe(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """A proxy fault that kept Produce requests its report does not list, in the window."""
    return next(((a, b, None, None) for a, b in rec.late_maybe if a <= c.hi and c.lo <= b),
                None)


def hung_below(rec: ev.Record, c: Case,
               cause: Callable[[ev.Record, Case], list[ev.Event]] = late_produce
               ) -> list[ev.Event]:
    """For an ``unseen`` record: a stuck LSO of its partition, itself explained by
    ``cause`` (a late Produce; ``hung_by_lost_marker``: a lost marker), at or below the
    record's offset, where the final reads ended (``read_to``), still stuck when they began:
    the record is in the log, past what read_committed reads."""
    if c.offset is None or c.read_to is None:
        return []
    return [e for e in rec.of(c.tp, ev.LSO_STUCK, 0, ev.END)
            if e.facts["lso"] == c.read_to <= c.offset and e.hi >= c.hi
            and cause(rec, dataclasses.replace(c, lo=e.facts["written"][0],
                                               hi=e.facts["written"][1], stuck=e.lo,
                                               offset=e.facts["lso"], ack_ns=None))]


def _marker_window(rec: ev.Record, c: Case) -> Case | None:
    """A hanging transaction's window for an election that took its marker: from the first
    sample whose HW was above the stuck offset (``c.offset``: the transaction's first
    record was then on every in-sync replica, so written before) on. None when no sample
    before the first one that showed the LSO stuck (``c.stuck``) shows such a HW."""
    if c.stuck is None or c.offset is None:
        return None
    seen = next((s[0] for s in rec.offsets.get(c.tp, []) if s[2] > c.offset), None)
    return None if seen is None or seen > c.stuck else dataclasses.replace(
        c, lo=seen, hi=ev.END, ack_ns=None)


def _stuck_leader(rec: ev.Record, c: Case) -> tuple[int, int] | None:
    """``(leader, leader epoch)`` of the partition in the first sample that showed its LSO
    stuck, or None."""
    at = bisect.bisect_left(rec.samples, c.stuck, key=lambda s: s[0])
    if at == len(rec.samples) or rec.samples[at][0] != c.stuck:
        return None
    for p in (rec.samples[at][3].get("partitions") or {}).get(c.tp[0]) or ():
        if isinstance(p, dict) and p.get("partition") == c.tp[1]:
            return p.get("leader"), p.get("leader_epoch")
    return None


def _stuck_elections(rec: ev.Record, c: Case) -> list[ev.Event]:
    """The elections of the partition that began after ``_marker_window``'s first sample and
    made the leader, in the epoch, that the first stuck sample shows: the election the
    stuck state followed (matched by leader and epoch, not by time: the monitor may see the
    new leader in another broker's metadata tens of ms before the leader's own log says it
    took the epoch, as on 4.0.2)."""
    window, shown = _marker_window(rec, c), _stuck_leader(rec, c)
    if window is None or shown is None:
        return []
    return [e for e in rec.of(c.tp, ev.LEADER_CHANGE, window.lo, ev.END, loose=True)
            if e.lo >= window.lo and (e.facts["to"], e.facts["epochs"][1]) == shown]


def lost_marker(rec: ev.Record, c: Case) -> list[ev.Event]:
    """For a hanging transaction at offset ``c.offset``: the unclean election
    (``unclean_by_kafka``) of its partition that made the leader the first stuck sample
    shows, after a sample showed that offset below the HW, whose new leader's log, its
    broker log says, already held that offset when it took the epoch (``start_offset``
    above it). That replica held the transaction's records, and may lack the COMMIT or
    ABORT marker that ended it on the old leader; the coordinator, done with the
    transaction, never writes that marker again (KAFKA-20716, apache/kafka PR 22937)."""
    return [e for e in _stuck_elections(rec, c) if unclean_by_kafka(rec, c, e)
            and e.facts.get("start_offset") is not None and e.facts["start_offset"] > c.offset]


def lost_marker_applies(rec: ev.Record, c: Case) -> bool:
    """``unclean_applies`` from ``_marker_window``'s first sample on."""
    window = _marker_window(rec, c)
    return window is not None and unclean_applies(rec, window)


def lost_marker_maybe(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """That election, where it may have been unclean (``unclean_maybe``'s condition) or
    was, and the broker logs do not give its new leader's log end, or give it above the
    stuck offset while it is not known unclean; or an unseen election since
    ``_marker_window``'s first sample, while the setting may have been on. A new leader
    whose log ended at or below the offset held no record of the transaction: no doubt."""
    window = _marker_window(rec, c)
    if window is None:
        return None
    for e in _stuck_elections(rec, c):
        start = e.facts.get("start_offset")
        unclean = e.facts.get("logged_unclean") or (
            e.facts["unclean"] and rec.unclean_on(c.tp[0], e.lo, e.hi, maybe=True))
        if unclean and (start is None or start > c.offset):
            return e.stretch
    return next((e.stretch for e in rec.of(c.tp, ev.UNSEEN, window.lo, ev.END, loose=True)
                 if e.lo <= c.stuck and rec.unclean_on(c.tp[0], e.lo, e.hi, maybe=True)),
                None)


def hung_by_lost_marker(rec: ev.Record, c: Case) -> list[ev.Event]:
    """``hung_below`` for a stuck LSO that ``lost_marker`` explains."""
    return hung_below(rec, c, lost_marker)


def behind_open_txn(rec: ev.Record, c: Case) -> bool:
    """An ``unseen`` record under ``read_committed`` whose partition's final reads ended
    below it, at a last stable offset under the high watermark (the last sample up to the
    final reads shows ``lso == read_to < hw``): a transaction that no marker ends hides it,
    however long ago that began. A truncation (an unclean election, a power loss) may have
    taken the marker that had ended it: the coordinator, done with it, never writes it
    again (KIP-98: read_committed reads stop at the first open transaction)."""
    if not rec.read_committed or c.offset is None or c.read_to is None or c.read_to > c.offset:
        return False
    samples = rec.offsets.get(c.tp, [])  # in index order: the last one up to hi, by bisection
    at = bisect.bisect_right(samples, c.hi, key=lambda s: s[0])
    return at > 0 and samples[at - 1][3] == c.read_to < samples[at - 1][2]


#: A group that resumes from a committed offset carrying its leader epoch validates it
#: (OffsetsForLeaderEpoch, KIP-320) and, after a truncation below it, goes back to where its
#: epoch ended: it skips nothing. Without the epoch the offset is fetched as is (KAFKA-20507).
RESUMED_BLIND = {"group-skip": lambda case: case.epochless}


def uncommitted(case: Case) -> bool:
    """No consumer read the write. A consumer reads only below the high watermark, so a
    write one read was on every in-sync replica then (Kafka design doc, Replication: "A
    message is considered committed when all in-sync replicas for that partition have
    applied it to their log"), and a clean election, of one of them, keeps it: only an
    unclean election or a power loss can lose it, not acks below all."""
    return not case.read_before


#: acks below all loses only what the followers had not replicated (issue 49, class 2).
ACKS_BELOW_ALL_ALSO = {**RESUMED_BLIND, "lost-write": uncommitted, "unseen": uncommitted}


def plain_producer(case: Case) -> bool:
    # a transactional producer is idempotent whatever enable.idempotence says (KIP-98)
    return case.writer_f == "send"


def _covers(e: ev.Event, offset: int) -> bool | None:
    """Whether damage ``e`` reached the record at ``offset`` in a way nothing checks: a
    touched batch holds it, and the broker was left running on the damaged file (no recovery
    read it) or the batch was touched only where no CRC looks. None when the record cannot
    tell (no batch offsets recorded; bytes past the last whole batch touched and the offset
    beyond every batch it names; a rolled segment damaged after a kill without a readable
    recovery point)."""
    spans = e.facts.get("offsets")
    if spans is None:
        return None
    for first, last in spans:
        if first <= offset <= last:
            if e.facts.get("running") or first in e.facts.get("unchecked", ()):
                return True
            # after a kill, recovery reads the active segment, and a rolled one when its
            # successor begins above the recovery point (the damage op read it: R2)
            recovered = True if e.facts.get("active", True) else e.facts.get("recovered")
            return None if recovered is None else not recovered
    if e.facts.get("past_batches") and offset > max((b for _, b in spans), default=-1):
        return None
    return False


def _served(rec: ev.Record, e: ev.Event, c: Case) -> bool | None:
    """Whether the node damage ``e`` changed may have served the finding's record: it led
    the partition in the last monitor sample before the damage or in one from it to the end
    of the window (readers fetch from the leader). None when no sample shows it leading but
    the record cannot rule it out there: blind on the partition, or an election it did not
    see."""
    topic, partition = c.tp
    # the samples in index order: from the last one before the damage (the leader when it
    # came) to the window's end, found by bisection, not by a walk of the whole run
    first = max(bisect.bisect_right(rec.samples, e.lo, key=lambda x: x[0]) - 1, 0)
    for index, _, _, value in rec.samples[first:]:
        if index > c.hi:
            break
        if any(p.get("partition") == partition and p.get("leader") == e.facts["node"]
               for p in ((value.get("partitions") or {}).get(topic) or ())):
            return True
    if rec.blind_in(c.tp, e.lo, c.hi) or rec.of(c.tp, ev.UNSEEN, e.lo, c.hi):
        return None
    return False


def _reached(c: Case) -> tuple[int, ...]:
    """The offsets whose records a damage must have reached to explain the finding: its own
    (``Case.offset``), or a duplicate's copies (``Case.copies``)."""
    return c.copies or (() if c.offset is None else (c.offset,))


def damaged_unchecked(rec: ev.Record, c: Case) -> list[ev.Event]:
    """File damage within the window of the finding's partition that reached its record
    (``Case.offset``) unchecked (``_covers``) on a node that then led it (``_served``): the
    broker serves a segment's bytes as they are (``docs/file-faults.md``, S1), so a reader
    meets the changed record. A duplicate is
    explained when every copy of its value but one was such a record: a changed value that
    came out as another written one."""
    offsets = _reached(c)
    events = [e for e in rec.of(c.tp, ev.FILE_DAMAGE, c.lo, c.hi) if _served(rec, e, c)]
    hit = {o: [e for e in events if _covers(e, o)] for o in offsets}
    if not offsets or sum(1 for o in offsets if not hit[o]) > (1 if c.copies else 0):
        return []
    return [e for e in events if any(e is x for found in hit.values() for x in found)]


def damage_applies(rec: ev.Record, c: Case) -> bool:
    """A file op damaged a segment of the finding's partition before its window ends, or
    one of unknown outcome (which may have damaged any) happened by then."""
    return (bool(rec.of(c.tp, ev.FILE_DAMAGE, 0, c.hi, loose=True))
            or any(a <= c.hi for a, _ in rec.damage_maybe))


def damage_unjudged(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """A damage of the partition that may lie in the window and may have reached the record
    but that the record cannot settle: one whose batches it cannot match to the offset
    (``_covers`` None), one that straddles an edge of the window or whose node may have led
    unseen (``_served`` None), or a file op of unknown outcome that may lie in it."""
    offsets = _reached(c)
    for e in rec.of(c.tp, ev.FILE_DAMAGE, c.lo, c.hi, loose=True):
        reach = [_covers(e, o) for o in offsets]
        if not offsets or None in reach or (any(reach) and (
                not e.inside(c.lo, c.hi) or _served(rec, e, c) is None)):
            return e.stretch
    return next(((a, b, None, None) for a, b in rec.damage_maybe
                 if a <= c.hi and c.lo <= b), None)


def _past_cut(e: ev.Event, c: Case) -> bool | None:
    """The finding's record lies at or above the offset where recovery cut (``recovery-cut``
    ``from_offset``): below it the cut node kept every record. None without its offset."""
    if c.offset is None:
        return None
    return c.offset >= e.facts["from_offset"]


def in_sync_replicas_cut(rec: ev.Record, c: Case) -> list[ev.Event]:
    """Recovery cuts within the window, at or below the finding's offset, after which every
    replica that had every acknowledged record was cut or dead (``in_sync_replicas_lost_
    power``'s condition): a broker whose active segment was damaged while it was down comes
    back without the damaged batch and all after it (``docs/file-faults.md``, R4, R5), and
    if it is elected so, what it lost is lost."""
    return [e for e in rec.of(c.tp, ev.RECOVERY_CUT, c.lo, c.hi, after_ns=c.ack_ns)
            if _past_cut(e, c) and (e.facts.get("every_replica")
                                    or (e.facts["needed"] and set(e.facts["needed"])
                                        <= _gone(e)))]


def cut_applies(rec: ev.Record, c: Case) -> bool:
    """A recovery cut of the finding's partition since its write was sent and before its
    window ends, not above its record's offset (where known)."""
    return any(_past_cut(e, c) is not False
               for e in rec.of(c.tp, ev.RECOVERY_CUT, since_sent(c), c.hi, loose=True))


def cut_unjudged(rec: ev.Record, c: Case) -> ev.Stretch | None:
    """A recovery cut of the partition within the window that the record cannot settle: the
    finding's offset unknown, or whether it took every replica that had the write
    (``_loss_unsettled``)."""
    return next((e.stretch for e in rec.of(c.tp, ev.RECOVERY_CUT, c.lo, c.hi, loose=True)
                 if _past_cut(e, c) is None
                 or (_past_cut(e, c) and _loss_unsettled(rec, e, c))), None)
