"""The data of the run's record (``analysis.evidence`` builds it and says what each event
kind means): ``Event``, something the record shows on one partition between two history
indexes, and ``Record``, the events and stretches of one run that the promises table reads
(``analysis.promises``, ``analysis.mechanisms``)."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
from typing import Any, Iterator

from kafka_chaos.catalogue.faults import PACKAGES

#: Consecutive samples of a partition further apart than this (ns) leave the record blind on it.
#: The monitor samples every 500 ms; a sample whose brokers do not answer takes up to a few
#: hundred ms more, so only a monitor that could not see the partition leaves such a gap.
MAX_BLIND_NS = 5_000_000_000
#: An index past every op: the end of a stretch that lasts to the end of the history.
END = 2**62

LEADER_CHANGE, ZOMBIE, FORCED_UNCLEAN, POWER_LOSS = ("leader-change", "zombie-leader",
                                                     "forced-unclean", "power-loss")
UNSEEN = "unseen-elections"
FILE_DAMAGE, RECOVERY_CUT = "file-damage", "recovery-cut"
#: The kinds whose stretch a window must hold whole for the event to lie in it: an election
#: the monitor brackets between two samples, a nemesis op between its invoke and completion.
INSIDE = (LEADER_CHANGE, FORCED_UNCLEAN, POWER_LOSS, FILE_DAMAGE, RECOVERY_CUT)
#: The file faults that damage a file (``nemesis.files``; ``catalogue.faults.PACKAGES``).
DAMAGES = PACKAGES["file"].start
#: The end of a rollback: the node killed, a file's older copy put back, the node started.
ROLLBACK = PACKAGES["rollback"].stop
DUPLICATED = "request-duplicated"
LATE_PRODUCE, LSO_STUCK = "late-produce", "lso-stuck"
#: The proxy fault that strips committed offsets of their leader epoch.
FORGET = "forget-leader-epoch"

TP = tuple[str, int]
#: ``(lo, hi, lo_ns, hi_ns)``: history indexes and times (ns; None when unknown) of a stretch.
Stretch = tuple[int, int, "int | None", "int | None"]


@dataclasses.dataclass(frozen=True)
class Event:
    """Something the record shows on partition ``tp`` (topic, partition) between history
    indexes ``lo`` and ``hi``, times ``lo_ns`` and ``hi_ns`` (ns since the run's start, for
    text); ``facts`` as the module docstring lists per ``kind``; ``wide``: it lies in a stretch
    where the record is blind, so it locates nothing."""

    kind: str
    tp: TP
    lo: int
    hi: int
    lo_ns: int
    hi_ns: int
    facts: dict[str, Any]
    wide: bool = False

    @property
    def stretch(self) -> Stretch:
        """``(lo, hi, lo_ns, hi_ns)``."""
        return (self.lo, self.hi, self.lo_ns, self.hi_ns)

    def meets(self, lo: int, hi: int) -> bool:
        """The event may have happened within history indexes ``[lo, hi]``."""
        return self.lo <= hi and lo <= self.hi

    def inside(self, lo: int, hi: int, after_ns: int | None = None) -> bool:
        """The event happened within history indexes ``[lo, hi]``, wherever in its own
        stretch it happened; with ``after_ns`` (ns), after that time and before ``hi``
        (a time inside the stretch between two of the record's ops that ``lo`` names)."""
        start = lo <= self.lo or (after_ns is not None and after_ns < self.lo_ns)
        return start and self.hi <= hi

    def as_json(self, names: dict[int, str]) -> dict[str, Any]:
        """The event as the ``evidence`` of an example: ``event``, ``partition``
        ("topic-p"), ``at_s`` ``[from, to]`` (seconds since the run's start), ``indexes``,
        and its facts, node ids given as names."""
        facts = {k: _named(v, names) if k in _NODE_FACTS else v for k, v in self.facts.items()}
        return {"event": self.kind, "partition": f"{self.tp[0]}-{self.tp[1]}",
                "at_s": [round(self.lo_ns / 1e9, 3), round(self.hi_ns / 1e9, 3)],
                "indexes": [self.lo, None if self.hi >= END else self.hi], **facts}


_NODE_FACTS = ("from", "to", "isr", "elr", "node", "nodes", "needed", "leaders", "down",
               "killed", "maybe_down", "leader")


def _named(value: Any, names: dict[int, str]) -> Any:
    if isinstance(value, list):
        return [names.get(v, v) for v in value]
    return names.get(value, value) if isinstance(value, int) else value


@dataclasses.dataclass
class Record:
    """The evidence of one run.

    ``events``: tp -> events in index order. ``blind``: tp -> ``(lo, hi, lo_ns, hi_ns)``:
    the index (and time) stretches in which the monitor did not see that partition (a tp
    never sampled is blind throughout: ``blind_in``). ``unclean``: scope (a topic, or
    ``"*"`` for the cluster-wide default) -> ``[lo, hi]`` stretches in which a nemesis had
    unclean leader election on (from its
    ``unclean-on`` invoke to the completion of the ``unclean-off`` or ``heal-all`` that ended
    it); ``unclean_maybe`` likewise for toggles that completed ``info`` or never completed
    (they may have taken effect); ``forced_maybe``: topic -> ``[lo, hi]`` of forced unclean
    elections (KIP-460) whose outcome is unknown. ``unclean_config``: the run's own topic
    config enabled it throughout. ``names``:
    node id -> name. ``power_losses``: a ``lose-unfsynced`` op completed ``ok``, or may have
    taken effect (``power_maybe``: ``[lo, hi]`` of those that completed ``info`` or never did;
    which partitions they cut is unknown, so they are doubt on every one). ``clock``:
    ``(time ns, index)`` of every invoke and completion of the record's ops, in time order.
    ``duplicates_maybe``: ``[lo, hi]`` stretches in which a proxy ``duplicate`` fault was
    active whose report the record lacks (its end completed ``info`` or never), or that sent
    Produce requests whose partitions the proxy could not read: any Produce of the run may
    have been sent twice then. ``copied``: ``(tp, fault id)`` -> the record values of the
    Produce requests of ``tp`` that fault sent twice (None: the proxy could not read them
    all). ``offsets``: tp -> ``(index, time ns, hw, lso)`` of every sample whose leader told
    its high watermark and last stable offset, in order. ``nemesis``: ``(op, f, invoke time
    ns, completion time ns or None)`` of every nemesis op, in order. ``forgotten``: ``[lo,
    hi]`` stretches in which a proxy ``forget-leader-epoch`` fault was active that took the
    leader epoch out of some commit (KAFKA-20507); ``forgotten_maybe``: those of such faults
    whose report the record lacks. ``late_maybe``: ``[lo, hi]`` stretches of proxy faults
    that kept more Produce requests than their reports list one by one, or whose report the
    record lacks (a late Produce may have reached any partition then), and the moments a
    late Produce was forwarded whose answer the report lacks. ``samples``: ``(index, invoke
    time ns, completion time ns, value)`` of every ``cluster-state`` sample that completed
    ``ok``, in index order (``nemesis.monitor``'s value; ``analysis.quorum`` reads its
    ``controller``, ``epochs`` and ``answering``).
    """

    events: dict[TP, list[Event]] = dataclasses.field(default_factory=dict)
    blind: dict[TP, list[Stretch]] = dataclasses.field(default_factory=dict)
    unclean: dict[str, list[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    unclean_maybe: dict[str, list[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    unclean_sure: dict[str, list[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    unclean_config: bool = False
    forced_maybe: dict[str, list[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    names: dict[int, str] = dataclasses.field(default_factory=dict)
    power_losses: bool = False
    power_maybe: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    replication_factor: int | None = None
    #: the fewest replicas an acknowledged write was on: ``min.insync.replicas`` under
    #: acks=all, else (or with the configuration unknown) the leader alone
    acked_on: int = 1
    #: the consumers read committed (final reads end at the last stable offset)
    read_committed: bool = False
    clock: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    duplicates_maybe: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    copied: dict[tuple[TP, Any], frozenset[int] | None] = dataclasses.field(
        default_factory=dict)
    offsets: dict[TP, list[tuple[int, int, int, int]]] = dataclasses.field(
        default_factory=dict)
    nemesis: list[tuple[int, str, int, int | None]] = dataclasses.field(default_factory=list)
    forgotten: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    forgotten_maybe: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    late_maybe: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    samples: list[tuple[int, int, int, dict]] = dataclasses.field(default_factory=list)
    #: ``[lo, hi]`` of file-damage ops that completed ``info`` or never did: any segment of
    #: any partition may have been damaged then
    damage_maybe: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    loose: bool = False

    @property
    def recovery_cuts(self) -> bool:
        """A damage op left a ``recovery-cut`` event."""
        return any(e.kind == RECOVERY_CUT for events in self.events.values() for e in events)

    @property
    def file_damage(self) -> bool:
        """A file op damaged a log segment, or may have (``damage_maybe``)."""
        return bool(self.damage_maybe) or any(
            e.kind == FILE_DAMAGE for events in self.events.values() for e in events)

    def index_before(self, t_ns: int) -> int:
        """The last index of the record's ops at or before time ``t_ns``, or 0."""
        i = bisect.bisect_right(self.clock, (t_ns, END)) - 1
        return self.clock[i][1] if i >= 0 else 0

    def locate(self, lo_ns: int, hi_ns: int, every_op: tuple[Any, Any] | None = None
               ) -> tuple[int, int]:
        """The last line at or before ``lo_ns`` and the first at or after ``hi_ns`` (ns): of
        ``every_op`` (``(times, indexes)`` of every line of the history in index order,
        numpy arrays), or of the record's own ops without it."""
        if every_op is None:
            return self.index_before(lo_ns), self.index_from(hi_ns)
        import numpy as np

        times, indexes = every_op
        i = int(np.searchsorted(times, lo_ns, "right")) - 1
        j = int(np.searchsorted(times, hi_ns, "left"))
        return (int(indexes[i]) if i >= 0 else 0), (int(indexes[j]) if j < len(times) else END)

    def index_from(self, t_ns: int) -> int:
        """The first index of the record's ops (invokes and completions) at or after time
        ``t_ns`` (ns since the run's start), or ``END``. An event whose ``lo`` is at or after
        it began after ``t_ns``: events are bounded by the record's own ops."""
        i = bisect.bisect_left(self.clock, (t_ns, -1))
        return self.clock[i][1] if i < len(self.clock) else END

    def of(self, tp: TP, kind: str, lo: int, hi: int, *, loose: bool = False,
           after_ns: int | None = None) -> list[Event]:
        """The located (not ``wide``) events of ``kind`` on ``tp`` within ``[lo, hi]``: for
        the kinds a bracket of the record locates (``INSIDE``) those that lie inside it
        whole (``Event.inside``; ``after_ns``: or after that time, ns, where the window
        starts at a moment the history knows more finely than ``lo``), unless ``loose`` (or
        within ``overlapping()``): then, as for other kinds, those that may lie there
        (their stretch meets it)."""
        strict = kind in INSIDE and not (loose or self.loose)
        return [e for e in self.events.get(tp, ()) if e.kind == kind and not e.wide
                and (e.inside(lo, hi, after_ns) if strict else e.meets(lo, hi))]

    @contextlib.contextmanager
    def overlapping(self) -> Iterator[None]:
        """Within it, ``of`` returns every event that may lie in a window, not only those
        inside it whole: what straddles the window's edge is doubt."""
        self.loose = True
        try:
            yield
        finally:
            self.loose = False

    def blind_in(self, tp: TP, lo: int, hi: int) -> Stretch | None:
        """The first stretch ``(lo, hi, lo_ns, hi_ns)`` meeting ``[lo, hi]`` in which the
        record is blind on ``tp`` (all of it when the monitor never saw ``tp``: times None),
        or None: the monitor saw the partition throughout."""
        if tp not in self.blind:
            return (lo, hi, None, None)
        for stretch in self.blind[tp]:
            if stretch[0] <= hi and lo <= stretch[1]:
                return stretch
        return None

    def unlocated(self, tp: TP, lo: int, hi: int) -> Stretch | None:
        """The stretch of the first event on ``tp`` within ``[lo, hi]`` that the record
        cannot place: one inside a blind stretch; None if there is none."""
        for e in self.events.get(tp, ()):
            if e.meets(lo, hi) and e.wide:
                return e.stretch
        return None

    def unclean_on(self, topic: str, lo: int, hi: int, *, maybe: bool = False,
                   throughout: bool = False) -> bool:
        """Unclean leader election was on for ``topic`` at some time within ``[lo, hi]``: by
        the run's config, or by a nemesis toggle of the topic or of the cluster default
        (``maybe``: also by a toggle, or a forced election, whose outcome is unknown);
        ``throughout``: on for the whole of ``[lo, hi]``, from a toggle's completion to the
        invoke of the op that ended it (an event straddling a toggle is not inside it)."""
        if self.unclean_config:
            return True
        if throughout:
            return any(a <= lo and hi <= b for a, b in
                       [*self.unclean_sure.get(topic, ()), *self.unclean_sure.get("*", ())])
        spans = [*self.unclean.get(topic, ()), *self.unclean.get("*", ())]
        if maybe:
            spans += [*self.unclean_maybe.get(topic, ()), *self.unclean_maybe.get("*", ()),
                      *self.forced_maybe.get(topic, ()), *self.forced_maybe.get("*", ())]
        return any(a <= hi and lo <= b for a, b in spans)

    @property
    def unclean_possible(self) -> bool:
        """Unclean leader election may have been on at some time, or was forced."""
        return (self.unclean_config or bool(self.unclean) or bool(self.unclean_maybe)
                or bool(self.forced_maybe)
                or any(e.kind == FORCED_UNCLEAN for es in self.events.values() for e in es))
