"""The ground truth of a reference-model history (``model_run``): for each value, what the
model did to it and what the history's record shows of that (issue 49).

``Labels`` is the half of ``model_run._Run`` that reads what the run kept (the model's
partitions, the samples it wrote, the power losses, the times of sends, acknowledgements
and final reads) and says, per value, which verdict the record supports. The rules are
Kafka's documents, as ``replication`` cites them, and the interval semantics of
``docs/detection.md``: an event counts only inside a finding's window (after the write was
acknowledged, before the final reads), located by two samples at most ``BLIND_NS`` apart.
"""

from __future__ import annotations

import dataclasses

from kafka_chaos.history.simulate.replication import ACKS_BELOW_ALL, POWER_LOSS, marker

#: Samples of a partition further apart than this (ns) leave the record blind on it
#: (docs/history-format.md's contract, as the verdict reads it).
BLIND_NS = 5_000_000_000


@dataclasses.dataclass(frozen=True)
class Truth:
    """A value's fate, in partition (key) ``key``: ``mechanism`` None when the final reads
    return it; else what lost it (``replication``'s names, or ``offline``: no leader at the
    end), or, when it is ``hidden``, what lost the marker of the transaction that hides it
    (``hung``: none did), and the leader ``epoch`` of that election. ``shown``: whether
    the record shows that mechanism inside the value's window (None: doubt)."""

    key: int
    value: int
    mechanism: str | None
    epoch: int | None
    shown: bool | None = None
    #: the verdict a ``duplicate`` finding of the value must get (None: the record shows it
    #: at one offset only): ``permitted`` with plain retries (the producer docs), else by
    #: the truncation that took its first copy, as ``expected`` says of a loss
    duplicate: str | None = None
    #: the verdict a ``G1a`` finding of the value must get (None: no read returned it): an
    #: aborted transaction's value read is ``permitted`` under ``read_uncommitted`` (the
    #: consumer docs), else a ``violation``
    aborted_read: str | None = None
    #: in the log at the end, behind a transaction no marker ends (``mechanism``: what lost
    #: that marker): the loss happened before the value's window or inside it
    hidden: bool = False

    @property
    def expected(self) -> str | None:
        """The verdict the record supports for this value: None (no finding: it is in the
        log), ``permitted`` (lost, and the record shows the event that lost it inside its
        window), ``unexplained`` (lost by a documented mechanism the record cannot show),
        ``documented`` (a power loss the record shows while a replica that had the value
        still ran: the model loses nothing so unless it is wrong), ``violation`` (hidden
        behind a transaction nothing documented left open)."""
        if self.mechanism is None:
            return None
        if self.mechanism == "hung":
            return "violation"
        if self.hidden:
            return "permitted" if self.shown else "unexplained"
        if self.mechanism == POWER_LOSS and self.shown is False:
            return "documented"
        return "permitted" if self.shown else "unexplained"


@dataclasses.dataclass(frozen=True)
class PowerLoss:
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


class Labels:
    """What the record of a ``model_run._Run`` shows of each value's fate (mixed into it)."""

    def _last_seen(self, p: int) -> tuple[int, int, frozenset[int], int] | None:
        """The last sample of ``p`` before now (ns, leader epoch, ISR and ELR: the replicas
        the record says had every acknowledged value, live leader or -1), if at most
        ``BLIND_NS`` old; else None."""
        if not self.seen[p] or self.now - self.seen[p][-1][0] > BLIND_NS:
            return None
        return self.seen[p][-1]

    def truth(self) -> list[Truth]:
        """The ``Truth`` of every acknowledged value (of a committed transaction's too), of
        every value the record shows at two offsets, and of every aborted one a read
        returned, by partition and value."""
        out = []
        for p, model in enumerate(self.models):
            fate = model.fate()
            twice = sorted(v for v in self.observed if self.keys[v] == p
                           and len(self.observed[v]) > 1)
            dirty = {v for v in self.aborted if self.keys[v] == p and v in self.observed}
            for value in sorted({*fate, *twice, *dirty}):
                mechanism = fate.get(value)
                epoch = model.lost_epoch.get(value)
                hidden = value in fate and mechanism is None and value not in self.final_read
                if hidden:  # in the log, behind a transaction no marker ends
                    mechanism, epoch = self.hung(p)
                shown = None if mechanism is None else self.loss_shown(
                    p, value, mechanism, epoch, self.acked_at[value])
                out.append(Truth(p, value, mechanism, epoch, shown,
                                 self.duplicate(p, value) if value in twice else None,
                                 None if value not in dirty else "violation"
                                 if self.config.read_committed else "permitted", hidden))
        return out

    def hung(self, p: int) -> tuple[str, int | None]:
        """What left a transaction open at ``p``'s LSO when the final reads ran: the loss of
        the marker that had ended it (mechanism and leader epoch, as ``Partition.fate``
        names a loss); ``hung`` when it never had one (no documented mechanism)."""
        model = self.models[p]
        log = model.replicas[model.leader].log
        pid = log[model.lso()].pid
        end = marker(pid)
        lost = model.retaken.get(end) or (model.lost_by.get(end), model.lost_epoch.get(end))
        return lost if lost[0] is not None else ("hung", None)

    def loss_shown(self, p: int, value: int, mechanism: str, epoch: int | None,
                   since: int) -> bool | None:
        """Whether the record shows, after ``since`` (ns) and before the final reads, what
        lost ``value`` by ``mechanism`` in leader epoch ``epoch`` (``Truth.shown``)."""
        # acks=0 promises nothing: no event need show what lost it
        shown = (True if self.config.acks == "0" else self.power_shown(p, since)
                 if mechanism == POWER_LOSS else self.any_change_shown(p, since)
                 if mechanism == ACKS_BELOW_ALL else self.shown(p, since, epoch))
        if shown is not True and (
                self.config.acks == "1" and value not in self.read
                and (self.any_change_shown(p, since) or self.leader_lost_power(p, since))
                or mechanism != POWER_LOSS and self.power_shown(p, since) is True):
            # what lost it may be out of sight while another documented mechanism that
            # loses it is in sight: acks=1 loses what a new leader lacked, or a failed
            # leader had not replicated, and the record cannot tell that this one had it
            # (never a record a consumer read: it was on every in-sync replica); a power
            # loss of every replica that had it drops the guarantee whatever was elected
            # after
            shown = True
        return shown

    def duplicate(self, p: int, value: int) -> str:
        """The verdict a ``duplicate`` finding of ``value`` must get: ``permitted`` with
        plain retries (the producer docs: "producer retries due to broker failures, etc.,
        may write duplicates"); with idempotence, a second offset means the log lost the
        first copy (read by a consumer, then truncated) before a retry wrote it again: as
        ``Truth.expected`` says of that loss, from the send on."""
        if not self.config.idempotence:
            return "permitted"
        model = self.models[p]
        mechanism, epoch = model.retaken.get(value) or (model.lost_by.get(value),
                                                        model.lost_epoch.get(value))
        if mechanism is None:
            return "violation"
        return Truth(p, value, mechanism, epoch,
                     self.loss_shown(p, value, mechanism, epoch, self.sent_at[value])).expected

    def power_shown(self, p: int, since: int) -> bool | None:
        """Whether the record shows a power loss of every replica that had a value: one that cut
        the partition's log after ``since`` (ns: the value's acknowledgement, or its send for a
        duplicate) and before the final reads, the last sample before it (at most ``BLIND_NS``
        old) naming in-sync and eligible replicas that all lost power in it or were down then
        (an earlier power loss or a kill, not started since: Kafka's design doc drops the
        guarantee once they all die), or every replica so. None (doubt): the record shows such
        losses but no sample of who was in sync before them, or one that took them all only if a
        node an op of unknown outcome (``info``) may have taken down was down; or the loss came
        from an op that ended ``info`` (the record shows none)."""
        doubt = False
        every = set(self.models[p].replicas)
        for loss in self.losses[p]:
            if loss.done_ns < since or loss.invoked_ns > self.final_at:
                continue
            if not loss.known:  # the record shows only an op that may have cut it
                doubt = True
                continue
            gone = {loss.node} | loss.down | loss.dead
            if gone >= every or (loss.needed and loss.needed <= gone):
                return True
            # one that took every replica only if an op of unknown outcome took one of them;
            # one whose ISR was sampled before ``since``, that took its
            # leader and as many of it as an acknowledgement needs: it may have shrunk so
            gone |= loss.maybe
            acked_on = self.config.min_isr if self.config.acks == "all" else 1
            doubt = (doubt or loss.needed is None or gone >= every
                     or bool(loss.needed and loss.needed <= gone)
                     or (loss.sampled_ns < since
                         and (loss.leader is None or loss.leader in gone)
                         and len(loss.needed & gone) >= acked_on))
        return None if doubt else False

    def leader_lost_power(self, p: int, since: int) -> bool:
        """Whether the record shows, after ``since`` (ns) and before the final reads, a
        power loss that cut the
        log of the node the last sample before it named leader: acks=1 loses what the
        leader had not replicated should it fail (the producer docs)."""
        return any(loss.known and loss.leader == loss.node
                   and since <= loss.done_ns and loss.invoked_ns <= self.final_at
                   for loss in self.losses[p])

    def shown(self, p: int, since: int, epoch: int | None) -> bool:
        """Whether the record locates the election of leader epoch ``epoch`` inside a loss's
        window: the last sample of the partition before it (an older epoch) came after
        ``since`` (ns), the first after it (that epoch or later) before the final reads,
        and the two are at most ``BLIND_NS`` apart."""
        if epoch is None:
            return False
        before = [t for t, e, *_ in self.seen[p] if e < epoch]
        after = [t for t, e, *_ in self.seen[p] if e >= epoch]
        if not before or not after:
            return False
        lo, hi = before[-1], after[0]
        return (since < lo and hi < self.final_at and hi - lo <= BLIND_NS)

    def any_change_shown(self, p: int, since: int) -> bool:
        """Whether the samples show any leader change of the partition after ``since`` (ns) and
        before the final reads, the one that lost it or a later one: ``acks=1`` documents the
        loss of what a leader had not replicated when leadership changes, and the record cannot
        tell which change took a value. A change is two consecutive samples, at most
        ``BLIND_NS`` apart, the second naming a live leader other than the last live one the
        samples named, in a later epoch; the first taken after ``since``, the second before the
        final reads."""
        seen = self.seen[p]
        last = seen[0][3] if seen and seen[0][3] >= 0 else None  # the last live leader named
        for (ta, ea, _, _), (tb, eb, _, lb) in zip(seen, seen[1:]):
            if lb >= 0:
                if (last is not None and lb != last and eb > ea and tb - ta <= BLIND_NS
                        and since < ta and tb < self.final_at):
                    return True
                last = lb
        return False
