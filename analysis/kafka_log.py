"""What the brokers' own logs say of leader elections: the moment each new leader took its
epoch, the log end offset it began from, and whether the controller elected it uncleanly.

The monitor (``nemesis.monitor``) locates an election only between two samples, half a
second or more apart; Kafka writes the moment itself, to the millisecond, in two lines of
``server.log`` (INFO, Kafka 3.x and 4.x, KRaft)::

    [2026-11-29 11:46:16,464] INFO [Broker id=3] Leader t-0 with topic id Some(...) starts at
    leader epoch 1 from offset 962 with partition epoch 1, high watermark 946, ISR [3,1], ...
    (state.change.logger)
    [2026-11-29 11:44:45,162] INFO [QuorumController id=3] UNCLEAN partition change for t-0
    with topic ID ...: isr: [] -> [3], leader: -1 -> 3, ..., leaderEpoch: 1 -> 2, ...

The first (``Partition.makeLeader``, written under the partition's lock before the new
leader appends anything) gives the new leader's log end offset when it became leader: every
record it did not hold then is gone from the partition once the others follow it. Its twin
(``makeFollower``: "Follower t-0 starts at leader epoch 1 from offset 1900 ...") says when
the old leader learned it no longer led: until then it could acknowledge ``acks=1`` writes
alone, at offsets below that log end; and where it then truncated its log ("[UnifiedLog
partition=t-0, dir=...] Truncating to offset 812", ``UnifiedLog.truncateTo``) is where its
log and its new leader's diverged. The second (``PartitionChangeBuilder``'s election,
logged by every controller that replays it) is the controller's own word that the election
was unclean, which it makes only with ``unclean.leader.election.enable`` on or when asked
to (KIP-460).

Which election a controller logged as unclean needs no clock: the partition and the leader
epoch name it (``mark_unclean``), on every backend whose logs the run directory keeps. A
log's times are only worth as much as its clock: they are read only for a run whose
header's ``clock`` says the brokers share the runner's wall clock (``"brokers": "host"``:
the local and docker backends), map to the history clock through its ``unix_ns`` (the wall
time at history time 0), and are dropped for a run with clock faults (``clock-*`` ops move
a broker's own clock). ``MARGIN_NS`` covers the line's millisecond and the two clocks'
drift over a run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path
from typing import Any, Iterable

from kafka_chaos.analysis import evidence as ev

#: Widening (ns) of a logged moment on the history clock, beyond the line's millisecond: the
#: drift of the wall clock against the monotonic one since history time 0 (0.3 µs over 20 s
#: here; NTP slews at most 0.5 ms/s, so a run of minutes under a slewing clock could drift a
#: few ms). Kafka writes the line while it holds the partition's lock, before the new
#: leader appends anything (``Partition.makeLeader``).
MARGIN_NS = 5_000_000

_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})(Z|[+-]\d\d:?\d\d)?\]")
_LEADER = re.compile(r"\[Broker id=(\d+)\] Leader (\S+)-(\d+) with topic id \S+ starts at "
                     r"leader epoch (\d+) from offset (\d+) with partition epoch \d+, "
                     r"high watermark (\d+), ISR \[([\d,]*)\]")
_FOLLOWER = re.compile(r"\[Broker id=(\d+)\] Follower (\S+)-(\d+) starts at leader epoch (\d+) "
                       r"from offset (\d+) with partition epoch \d+ and high watermark (\d+)")
#: A replica cutting its log (``UnifiedLog.truncateTo``, Kafka 3.x and 4.x): as a follower
#: after ``OffsetsForLeaderEpoch``, to where its log and its leader's diverge.
_TRUNCATED = re.compile(r"\[UnifiedLog partition=(\S+)-(\d+), dir=[^\]]*\] "
                        r"Truncating to offset (\d+)")
#: The first line a broker's JVM logs as it starts (log4j 2 with backquotes, log4j 1 without).
_START = re.compile(r"Registered `?kafka:type=kafka.Log4jController`? MBean")
_UNCLEAN = re.compile(r"UNCLEAN partition change for (\S+)-(\d+) with topic ID .*?"
                      r"leader: (-?\d+) -> (-?\d+).*?leaderEpoch: (\d+) -> (\d+)")


@dataclasses.dataclass(frozen=True)
class Logged:
    """One election as a broker log tells it. ``kind``: ``"leader"`` (a broker took the
    leadership), ``"follower"`` (a broker began to follow in that epoch: one that led before
    stopped leading then), ``"unclean"`` (the controller elected uncleanly), ``"start"``
    (a broker's process started: ``node`` names it, ``tp`` is None) or ``"truncated"`` (a
    broker cut its log of ``tp`` to offset ``start_offset``: ``node`` names it, ``epoch``
    and ``leader`` are -1). ``tp``:
    (topic, partition); ``epoch``: the new leader epoch; ``leader``: the node whose line it
    is (the new leader's for ``"unclean"``); ``t_ns``: when, on the history clock (ns);
    ``start_offset``, ``hw``: that node's log end offset and high watermark then; ``isr``:
    for ``"leader"``, the ISR as it began."""

    kind: str
    tp: tuple[str, int] | None
    epoch: int
    leader: int
    t_ns: int
    start_offset: int | None = None
    hw: int | None = None
    isr: tuple[int, ...] = ()
    node: str = ""


#: What a broker writes as it stops for good (Kafka 3.9, 4.x; ``docs/file-faults.md``): every
#: log directory failed (K7b, ``LogManager``), a fatal fault such as logs that would not
#: load (K8c, ``BrokerMetadataPublisher``: "Error starting LogManager"), a startup that
#: failed (``KafkaRaftServer``, ``SharedServer``).
_HALT = re.compile(r"Shutdown broker because all log dirs in .* have failed"
                   r"|Encountered fatal fault: .*|Error starting LogManager"
                   r"|Exiting Kafka due to fatal exception.*|Fatal error during .*")


def halt_reason(lines: Iterable[str]) -> str | None:
    """The last line of a broker's ``server.log`` saying it stopped for good (``_HALT``),
    its time and level cut off and at most 300 characters; None when it says none."""
    found = None
    for line in lines:
        if (m := _HALT.search(line)) is not None:
            found = line[m.start():][:300]
    return found


def usable(header: dict[str, Any] | None, clock_faults: bool) -> int | None:
    """The wall time (ns since the epoch) at history time 0 when the run's broker logs may
    be read on the history clock, else None (no anchor, brokers on clocks of their own, or
    a run that moved their clocks)."""
    clock = (header or {}).get("clock") or {}
    if clock_faults or clock.get("brokers") != "host" or not isinstance(
            clock.get("unix_ns"), int):
        return None
    return clock["unix_ns"]


def read(paths: Iterable[Path], unix_ns: int, utc_offset_s: int = 0) -> list[Logged]:
    """The elections that ``paths`` (``server.log`` files) tell (``read_lines``). A file that
    cannot be read raises ``OSError``."""
    out: list[Logged] = []
    for path in paths:
        with open(path, "rb") as f:
            out += read_lines((raw.decode("utf-8", "replace") for raw in f
                               if b"starts at leader epoch" in raw
                               or b"UNCLEAN partition" in raw or b"Log4jController" in raw
                               or b"Truncating to offset" in raw),
                              unix_ns, utc_offset_s, node=_node(path))
    return sorted(out, key=lambda e: e.t_ns)


def _node(path: Path) -> str:
    """The node a log is of: ``nodes/<name>/[logs/]server.log`` -> ``<name>``."""
    parts = Path(path).parts
    return parts[len(parts) - 1 - parts[::-1].index("nodes") + 1] if "nodes" in parts else ""


def read_lines(lines: Iterable[str], unix_ns: int, utc_offset_s: int = 0,
               node: str = "") -> list[Logged]:
    """The elections that broker log ``lines`` tell, in time order, their moments on the
    history clock whose time 0 is wall time ``unix_ns`` (ns). A line without a zone in its
    time is read at ``utc_offset_s`` (the header's: the runner's own zone). Lines that are
    no such line are skipped. ``node``: the name of the node whose log it is, for its
    ``"start"`` lines (the others name their node by id)."""
    out: list[Logged] = []
    for line in lines:
        t = _when(line, utc_offset_s)
        if t is None:
            continue
        t -= unix_ns
        if (m := _LEADER.search(line)) is not None:
            broker, topic, p, epoch, start, hw, isr = m.groups()
            out.append(Logged("leader", (topic, int(p)), int(epoch), int(broker), t,
                              int(start), int(hw), tuple(int(x) for x in isr.split(",") if x)))
        elif _START.search(line) is not None:
            out.append(Logged("start", None, -1, -1, t, node=node))
        elif (m := _FOLLOWER.search(line)) is not None:
            broker, topic, p, epoch, start, hw = m.groups()
            out.append(Logged("follower", (topic, int(p)), int(epoch), int(broker), t,
                              int(start), int(hw)))
        elif (m := _UNCLEAN.search(line)) is not None:
            topic, p, _, leader, _, epoch = m.groups()
            out.append(Logged("unclean", (topic, int(p)), int(epoch), int(leader), t))
        elif (m := _TRUNCATED.search(line)) is not None:
            topic, p, offset = m.groups()
            out.append(Logged("truncated", (topic, int(p)), -1, -1, t, int(offset), node=node))
    return sorted(out, key=lambda e: e.t_ns)


def _when(line: str, utc_offset_s: int) -> int | None:
    """The line's time, ns since the epoch, or None when it has none."""
    m = _TIME.match(line)
    if m is None:
        return None
    zone = m.group(3)
    if zone is None:
        tz = dt.timezone(dt.timedelta(seconds=utc_offset_s))
    elif zone == "Z":
        tz = dt.timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        hh, mm = int(zone[1:3]), int(zone[-2:])
        tz = dt.timezone(sign * dt.timedelta(hours=hh, minutes=mm))
    t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz)
    return int(t.timestamp()) * 1_000_000_000 + int(m.group(2)) * 1_000_000


def server_logs(run_dir: Path) -> list[Path]:
    """The ``server.log`` files a run directory keeps: ``nodes/<name>/logs/server.log`` of the
    clusters the tool runs, ``nodes/<name>/server.log`` of an attached one's fetched logs."""
    return sorted([*run_dir.glob("nodes/*/logs/server.log"), *run_dir.glob("nodes/*/server.log")])


def mark_unclean(rec: ev.Record, logged: list[Logged]) -> None:
    """The elections of ``rec`` a controller logged as unclean, by partition and leader epoch
    alone (for logs whose times cannot be read on the history clock): the fact
    ``logged_unclean``, and ``unclean``. The monitor's bracket still locates them."""
    unclean = {(x.tp, x.epoch) for x in logged if x.kind == "unclean"}
    for tp, events in rec.events.items():
        for i, e in enumerate(events):
            if e.kind == ev.LEADER_CHANGE and (tp, e.facts["epochs"][1]) in unclean \
                    and e.facts["epochs"][1] - e.facts["epochs"][0] == 1:
                events[i] = dataclasses.replace(e, facts={**e.facts, "unclean": True,
                                                          "logged_unclean": True})


def narrow(rec: ev.Record, logged: list[Logged], every_op: tuple[Any, Any] | None) -> None:
    """Narrow ``rec`` (``analysis.evidence``) by the log: each leader change of one epoch
    whose new leader's broker log says when it took the epoch (that epoch, that broker) is
    located at that moment (``MARGIN_NS`` either side, in time and among ``every_op``'s
    lines, or the record's ops without them), no longer ``wide``, with the facts
    ``start_offset`` (the new leader's log end offset then: it lacked every record at or
    above it), ``logged_s`` (that moment, s), ``logged_unclean`` (a controller logged the
    election as unclean: the setting was on, or the election forced), and where the old
    leader logged when it learned it no longer led (it began to follow in that epoch or a
    later one): ``deposed_ns`` (then, ns on the history clock), ``deposed_s``, and
    ``deposed_offset`` (its log end offset then): until that moment it could acknowledge
    ``acks=1`` writes alone, below that offset; and ``deposed_cut``, the offset it then
    truncated its log to (``_cut_after``; None when its log says none). ``every_op``:
    ``(times, indexes)`` of every line of the history in index order (numpy arrays), to
    locate that moment among the client ops too (None: among the record's own ops)."""
    began, unclean, followed, starts, cuts, led = {}, set(), [], [], [], []
    for x in logged:  # in time order: the first line of each election wins
        if x.kind == "leader":
            began.setdefault((x.tp, x.epoch), x)
            led.append(x)
        elif x.kind == "follower":
            followed.append(x)
        elif x.kind == "start":
            starts.append(x)
        elif x.kind == "truncated":
            cuts.append(x)
        else:
            unclean.add((x.tp, x.epoch))
    for tp, events in rec.events.items():
        for i, e in enumerate(events):
            before, after = e.facts["epochs"] if e.kind == ev.LEADER_CHANGE else (0, 0)
            x = began.get((tp, after))
            if x is None or after - before != 1 or x.leader != e.facts["to"]:
                continue
            # not clamped to the bracket: the monitor may see the new leader in another
            # broker's metadata a few ms before the leader itself logs taking the epoch
            lo_ns = x.t_ns - MARGIN_NS
            hi_ns = x.t_ns + 1_000_000 + MARGIN_NS
            logged_unclean = (tp, after) in unclean
            deposed = _deposed(followed, starts, began.get((tp, before)), tp, after,
                               e.facts["from"], rec.names.get(e.facts["from"]))
            lo, hi = rec.locate(lo_ns, hi_ns, every_op)
            events[i] = dataclasses.replace(
                e, lo=lo, hi=hi,
                lo_ns=lo_ns, hi_ns=hi_ns, wide=False,
                facts={**e.facts, "unclean": e.facts["unclean"] or logged_unclean,
                       "start_offset": x.start_offset, "logged_s": round(x.t_ns / 1e9, 3),
                       "logged_unclean": logged_unclean,
                       **({} if deposed is None else {
                           "deposed_ns": deposed.t_ns, "deposed_s": round(deposed.t_ns / 1e9, 3),
                           "deposed_offset": deposed.start_offset,
                           "deposed_cut": _cut_after(cuts, led, deposed,
                                                     rec.names.get(e.facts["from"]))})})
        events.sort(key=lambda e: (e.lo, e.hi, e.kind))


def _cut_after(cuts: list[Logged], led: list[Logged], deposed: Logged,
               name: str | None) -> int | None:
    """The offset the deposed leader (``deposed``'s node, named ``name``) first truncated
    its log of that partition to after it began to follow, before it led it again: where
    its log and its new leader's diverged (the follower truncates after asking its leader
    where its epochs end, KIP-101, KIP-279); None when its log says no such cut."""
    again = min((x.t_ns for x in led if x.tp == deposed.tp and x.leader == deposed.leader
                 and x.t_ns > deposed.t_ns), default=None)
    return next((x.start_offset for x in cuts if x.tp == deposed.tp and x.node == name
                 and x.t_ns >= deposed.t_ns and (again is None or x.t_ns < again)), None)


def _deposed(followed: list[Logged], starts: list[Logged], led: Logged | None,
             tp: tuple[str, int], epoch: int, node: int, name: str | None) -> Logged | None:
    """The line of node ``node`` (named ``name``) following ``tp`` in ``epoch`` or a later
    one, the first: when the old leader learned it no longer led. None when there is none,
    when its own line of taking the leadership (``led``) is not in the log, or when it
    restarted between the two (dead, it acknowledged nothing meanwhile)."""
    deposed = next((y for y in followed if y.tp == tp and y.leader == node
                    and y.epoch >= epoch), None)
    if deposed is None or led is None or any(
            s.node == name and led.t_ns < s.t_ns < deposed.t_ns for s in starts):
        return None
    return deposed
