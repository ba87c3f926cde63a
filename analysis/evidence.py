"""What the run's own record shows happened to each partition, and when: the evidence the
promises table (``analysis.promises``) must find before it permits an anomaly. The record's
data (``Event``, ``Record``) is in ``analysis.record``, the events of lost or damaged logs
(power losses, file damage, recovery cuts) are built in ``analysis.losses``; both are read
through this module.

Built from the nemesis's and the monitor's ops (``docs/history-format.md``), a few thousand
rows even for a long run. Positions are history indexes: op ``time`` is taken under the same
lock as ``index`` from a monotonic clock, so index order is time order, and an anomaly's window
(which client ops bound it) and an event (which samples or nemesis op bound it) compare
without a lookup of times.

An event is located only as well as the record locates it: a leader election happened after
the last monitor sample that still shows the old epoch began, and before the first that shows
the new one completed (``Event.lo``, ``Event.hi``). Where consecutive samples of a partition
are more than ``MAX_BLIND_NS`` apart, or none was taken (no broker answered, the monitor
stopped), the record is *blind* on that partition; ``Record.blind`` lists those stretches, and
an event inside one is not evidence (``Event.wide``): the promises table makes such an anomaly
unexplained (the verdict unknown), never permitted.

Interval semantics, for every rule (issue 49). An anomaly has a window ``[lo, hi]``: from the
moment its cause could first act (a lost write's acknowledgement) to the read that shows it
(the invoke of the read that misses the write). An event the record locates only as a
stretch ``[Event.lo, Event.hi]`` happened somewhere in that stretch. It explains the anomaly
only when the stretch lies *inside* the window whole (``Event.inside``); a stretch that
crosses an edge of the window (the last sample before an election began before the write
was acknowledged, or the first after it completed after the read began) may have happened
outside it: doubt, so the finding is unexplained, never permitted; a stretch outside the
window is nothing. ``Record.of`` applies this to the kinds so located (``INSIDE``: leader
changes, forced unclean elections, power losses); ``Record.overlapping`` finds what
straddles. A setting's toggle is "on" for an event only when the event lies inside the
stretch it was surely on (``Record.unclean_on(..., throughout=True)``). One state outlives
its event: a transaction whose marker a truncation took stays open, and read_committed
reads stop below every record after it; an event before the window of such a hidden record
(``mechanisms.behind_open_txn``) is doubt for it (``promises.OPEN_TXN``), never permission.

Where the brokers' logs share the history's clock (``analysis.kafka_log``), a leader change
is located at the moment its new leader logged taking the epoch (``kafka_log.narrow``), not
between two samples half a second apart, and a lost write's window starts at its delivery
report's own time (``Case.ack_ns``), so the monitor's bracket no longer makes it straddle.
The log also says when the old leader learned it no longer led: a write it acknowledged
after the new leader began, but before then, at an offset the new leader lacked, was lost
by that change though its window starts after it (``mechanisms.deposed_ack``). A
controller's "UNCLEAN partition change" line is Kafka's own word that the election was
unclean, with the setting on or forced: no toggle need bracket it.

Event kinds (``Event.kind``), per topic-partition:

- ``leader-change``: a new leader epoch whose leader is another broker than the last one the
  monitor saw lead (a partition going offline and back to the same leader is none). ``facts``:
  ``from``, ``to`` (node ids), ``epochs`` ``[before, after]``, ``isr`` and ``elr`` (the last
  sample before; ``elr`` ``[]`` where the cluster keeps none), ``unclean`` (the new leader was
  in neither, nor the last known leader when both were empty: KIP-966's election order; or
  the controller logged it so); located by the broker log: ``start_offset``, ``logged_s``,
  ``logged_unclean``, ``deposed_*`` (``kafka_log.narrow``).
- ``unseen-elections``: consecutive samples of the partition whose leader epochs differ by
  two or more: elections happened between them that the monitor never saw (the leader may
  have moved away and back, or passed through a broker outside the ISR), so what they lost
  cannot be told. Never evidence that permits; doubt for every rule whose mechanism is an
  election. ``facts``: ``epochs`` ``[before, after]``, ``leaders`` ``[before, after]``.
- ``zombie-leader``: a broker still naming itself leader in an older epoch than the cluster's
  (the monitor's ``stale_leaders``): it may acknowledge writes its successor never has.
  ``facts``: ``node``, ``epochs`` ``[its own, the cluster's]``.
- ``forced-unclean``: an ``elect-unclean`` nemesis op (ElectLeaders UNCLEAN, KIP-460) elected a
  leader of the partition. ``facts``: ``result`` ("OK").
- ``power-loss``: a ``lose-unfsynced`` op truncated that partition's log on some nodes;
  located by the op, its times narrowed to the span in which the nodes died (``cut_ns``).
  ``facts``: ``nodes`` (ids that lost bytes of it), ``bytes`` per node name, ``needed`` (the
  ISR and ELR of the last sample before the op, the ISR as the op itself read it just before
  the loss where it found one node alone, or the last known leader when both were empty:
  the replicas that had every acknowledged record; None when no sample in the
  ``MAX_BLIND_NS`` before it shows the partition), ``leader`` (that sample's leader; None
  without one), ``sampled_ns``, ``sampled`` (when that ISR was read: ns, index), ``down``
  (nodes an earlier power loss
  took down and no op has started since, a ``start``, ``roll`` or ``heal-all`` counting for
  the nodes it says it started, any other op for every node: whatever they had, they hold
  nothing written since, and their un-fsynced data went then), ``killed`` (nodes a ``kill``
  or ``stop`` took down and nothing has started since: they died, though they keep what
  they had), ``maybe_down`` (nodes a ``kill``, ``stop`` or ``lose-unfsynced`` that ended
  ``info`` or never ended may have taken down, nothing started since: doubt, never counted),
  ``every_replica_maybe`` (every replica only with those), ``every_replica`` (those
  and the nodes that lost bytes of it are all its replicas: those of the sample nearest
  before the op, any age, or with none, as many nodes as the run's replication factor; no
  ISR can have kept a record then, whatever the samples say).
- ``file-damage``: a ``bitflip``, ``truncate`` or ``zero`` op (``nemesis.files``) damaged a
  log segment of that partition on one node, located by the op. ``facts``: ``node``,
  ``f``, ``file``, ``running`` (the broker was left up: it serves the changed bytes as they
  are, no recovery checked them), ``active`` (the active segment, which recovery after a
  kill reads; else the oldest rolled one), ``recovered`` (after a kill: whether that
  recovery reads the segment, its successor beginning above the recovery point the op read;
  None when unknown), ``offsets`` (``[first, last]`` offsets of each batch the damage
  touched), ``unchecked`` (the base offsets of those touched only in the bytes no
  CRC covers), ``past_batches`` (it touched bytes after the last whole batch, whose offsets
  the record lacks). A file op of unknown outcome is in ``Record.damage_maybe``.
- ``recovery-cut``: a damage op killed a node and damaged a segment of that partition that
  its recovery reads (the active one, or a ``recovered`` rolled one) in bytes its CRC covers
  (``file-damage``'s batches, less the ``unchecked`` ones): at its next start Kafka's
  recovery cuts that node's log at the first such batch (``docs/file-faults.md``, R1-R5).
  Facts as ``power-loss``'s (the cut node in ``nodes``, its ISR read before the damage in
  ``needed``), plus ``from_offset``: the base offset of that batch, below which it keeps
  every record. Located from the damage op's invoke to the completion of the op that next
  (maybe) started that node (``END`` if none did).
- ``request-duplicated``: the Kafka protocol proxy's ``duplicate`` fault sent Produce
  requests writing to the partition twice (``nemesis.requests``), located by the proxy's own
  times on the history clock (its first and last such request). ``facts``: ``requests``
  (how many), ``fault`` (its id), ``values`` (how many record values the proxy read in
  them; None when it could not read them all). The values themselves are in
  ``Record.copied``.
- ``late-produce``: a Produce request writing to the partition that a proxy fault kept
  (``hold``, ``delay``, ...) reached its broker after its client's later EndTxn or
  InitProducerId had, and the leader appended it (its answer for the partition, in the
  proxy's report, was no error): a write of a transaction its client had ended or fenced
  (KIP-890's hanging transaction). Located by the proxy's forwarding time. ``facts``: ``fault`` (its
  id), ``client``, ``received_s`` (when the proxy got it), ``after`` (the client's requests
  that overtook it, of those two).
- ``lso-stuck``: a ``hanging-transaction`` finding (``analysis.liveness``, which adds these
  once it has judged the monitor's samples): the partition's last stable offset stayed at one
  offset below its high watermark from ``lo`` to ``hi`` (``END`` when that lasted to the
  partition's last sample). ``facts``: ``lso``, ``written`` (``[lo, hi]``: the samples
  between which that offset was written, ``liveness.hanging``'s window).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import orjson

from kafka_chaos.analysis import losses
from kafka_chaos.analysis.record import (  # noqa: F401 (re-exported: ev.Event ...)
    MAX_BLIND_NS, END, LEADER_CHANGE, ZOMBIE, FORCED_UNCLEAN, POWER_LOSS, UNSEEN,
    FILE_DAMAGE, RECOVERY_CUT, INSIDE, DAMAGES, ROLLBACK, DUPLICATED, LATE_PRODUCE, LSO_STUCK,
    FORGET, TP, Stretch, Event, Record)


def build(rows: Iterable[dict[str, Any]], nodes: dict[str, Any] | None,
          config: dict[str, Any] | None) -> Record:
    """The ``Record`` of a history's nemesis and monitor ops.

    ``rows``: one per op (invoke and completion paired), any order: ``op`` (invoke index),
    ``index`` (completion index, None while pending), ``process`` ("nemesis" | "monitor"),
    ``f``, ``type`` (ok | fail | info | pending), ``inv``, ``done`` (values, parsed or as JSON
    text), ``invoke_time``, ``time`` (ns). ``nodes``: the header's ``nodes`` (id as text ->
    ``{"name", ...}``). ``config``: the run configuration (None when unknown). The brokers' logs
    narrow its leader changes afterwards (``kafka_log.narrow``).
    """
    rec = Record(names={int(k): v.get("name", str(k)) for k, v in (nodes or {}).items()},
                 unclean_config=bool((config or {}).get("unclean_leader_election")),
                 replication_factor=(config or {}).get("replication_factor"),
                 acked_on=int((config or {}).get("min_insync_replicas") or 1)
                 if str((config or {}).get("acks")) == "all" else 1,
                 read_committed=(config or {}).get("isolation_level") == "read_committed")
    ids = {name: i for i, name in rec.names.items()}
    rows = sorted(({**r, "inv": _parsed(r.get("inv")), "done": _parsed(r.get("done"))}
                   for r in rows), key=lambda r: r["op"])
    rec.clock = sorted([(r["invoke_time"], r["op"]) for r in rows]
                       + [(r["time"], r["index"]) for r in rows if r.get("index") is not None])
    samples = [r for r in rows if r["process"] == "monitor" and r["type"] == "ok"
               and isinstance(r["done"], dict)]
    rec.samples = sorted(((r["index"], r["invoke_time"], r["time"], r["done"]) for r in samples
                          if r.get("f") == "cluster-state" and r.get("index") is not None),
                         key=lambda s: s[0])
    states = _states(samples)
    _monitor_events(rec, states)
    rec.offsets = {tp: [(r["index"], r["time"], int(p["hw"]), int(p["lso"])) for r, p in seen
                        if isinstance(p.get("hw"), int) and isinstance(p.get("lso"), int)]
                   for tp, seen in states.items()}
    nemesis = [r for r in rows if r["process"] == "nemesis"]
    rec.nemesis = [(r["op"], r["f"], r["invoke_time"],
                    r["time"] if r.get("index") is not None else None) for r in nemesis]
    _nemesis_events(rec, nemesis, ids, states)
    for es in rec.events.values():
        es.sort(key=lambda e: (e.lo, e.hi, e.kind))
    return rec


def _parsed(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _states(samples: list[dict]) -> dict[TP, list[tuple[dict, dict]]]:
    """tp -> ``(sample row, partition state)`` of every ok sample that described it."""
    out: dict[TP, list[tuple[dict, dict]]] = {}
    for s in samples:
        for topic, parts in (s["done"].get("partitions") or {}).items():
            for p in parts or ():
                if isinstance(p, dict) and not p.get("error") and "leader_epoch" in p:
                    out.setdefault((topic, int(p["partition"])), []).append((s, p))
    return out


def _monitor_events(rec: Record, states: dict[TP, list[tuple[dict, dict]]]) -> None:
    for tp, seen in states.items():
        first, last = seen[0][0], seen[-1][0]
        blind = [(0, first["op"], 0, first["invoke_time"])]
        for (a, _), (b, _) in zip(seen, seen[1:]):
            if b["invoke_time"] - a["time"] > MAX_BLIND_NS:
                blind.append((a["index"], b["op"], a["time"], b["invoke_time"]))
        blind.append((last["index"], END, last["time"], None))
        rec.blind[tp] = blind
        events = rec.events.setdefault(tp, [])
        leader = None  # the last real leader seen
        fresh = _fresh(seen)
        for (a, pa), (b, pb) in zip([(None, None)] + fresh[:-1], fresh):
            if a is not None and pb["leader_epoch"] - pa["leader_epoch"] >= 2:
                events.append(_event(UNSEEN, tp, a, b, rec, {
                    "epochs": [pa["leader_epoch"], pb["leader_epoch"]],
                    "leaders": [pa["leader"], pb["leader"]]}))
            if pb["leader"] is not None and pb["leader"] >= 0:
                if (a is not None and leader is not None and pb["leader"] != leader
                        and pb["leader_epoch"] > pa["leader_epoch"]):
                    isr, elr = list(pa.get("isr") or []), list(pa.get("elr") or [])
                    # KIP-966 elects from the ISR, then the ELR, then the last known leader
                    # ("similar behavior prior to the 4.0"): only a replica outside all of
                    # them is an unclean election
                    last = [] if isr or elr else list(pa.get("last_known_elr") or [])
                    events.append(_event(LEADER_CHANGE, tp, a, b, rec, {
                        "from": leader, "to": pb["leader"],
                        "epochs": [pa["leader_epoch"], pb["leader_epoch"]], "isr": isr,
                        "elr": elr, "unclean": pb["leader"] not in isr + elr + last}))
                leader = pb["leader"]
        _zombies(rec, tp, seen, events)


def _fresh(seen: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
    """``seen`` without the states whose leader epoch is below one an earlier state showed:
    a partition's leader epoch never goes back, so such a state is a stale view (a broker
    that missed the metadata updates answering alone, e.g. one just healed from a cut while
    the others are down). Taken as the state before an election it would hide that
    election's predecessor: its leader, its ISR, and the epoch the broker logs name."""
    out, newest = [], -1
    for s, p in seen:
        if p["leader_epoch"] >= newest:
            newest = p["leader_epoch"]
            out.append((s, p))
    return out


def _zombies(rec: Record, tp: TP, seen: list[tuple[dict, dict]], events: list[Event]) -> None:
    """A ``zombie-leader`` event per node and run of consecutive samples in which it named
    itself leader in an older epoch, from the sample before the run to the one that ended it."""
    # node -> (the sample before, the first claiming, its epoch, the cluster's epoch then)
    open_: dict[int, tuple[dict | None, dict, int, int]] = {}
    prev = None
    for s, p in seen + [(None, {})]:
        claims = {int(n): int(e) for n, e in (p.get("stale_leaders") or [])}
        for node in list(open_):
            if node not in claims:
                before, first, epoch, current = open_.pop(node)
                end = s if s is not None else prev
                events.append(_event(ZOMBIE, tp, before or first, end, rec, {
                    "node": node, "epochs": [epoch, current], "ended": s is not None}))
        for node, epoch in claims.items():
            if node not in open_:
                open_[node] = (prev, s, epoch, p["leader_epoch"])
        prev = s


def _event(kind: str, tp: TP, a: dict, b: dict, rec: Record, facts: dict) -> Event:
    lo, hi = a["op"], b["index"] if b.get("index") is not None else END
    lo_ns, hi_ns = a.get("invoke_time") or 0, b.get("time") or b.get("invoke_time") or 0
    # the gap between two samples runs from the first's completion to the second's invoke,
    # inside the event they bound: a blind gap inside it leaves the event unlocated
    wide = any(lo <= x and y <= hi for x, y, *_ in rec.blind.get(tp, [])[1:-1])
    return Event(kind, tp, lo, hi, lo_ns, hi_ns, facts, wide)


def _nemesis_events(rec: Record, ops: list[dict], ids: dict[str, int],
                    states: dict[TP, list[tuple[dict, dict]]]) -> None:
    by_op = sorted(ops, key=lambda r: r["op"])
    down: set[int] = set()  # nodes a power loss took down, not started since
    killed: set[int] = set()  # nodes a kill or stop took down, not started since
    maybe: set[int] = set()  # nodes such an op of unknown outcome may have taken down
    for i, r in enumerate(by_op):
        f, typ, done = r["f"], r["type"], r["done"]
        if f not in losses.NOT_STARTING:
            started = losses.started_nodes(r)
            for dead in (down, killed, maybe):
                dead.difference_update(dead if started is None else
                                       {ids[n] for n in started if n in ids})
        if f in ("kill", "stop") and typ == "ok" and isinstance(done, dict):
            killed.update(ids[n] for n in done.get("killed") or done.get("stopped") or ()
                          if n in ids)
        if f in ("kill", "stop", "lose-unfsynced") and typ in ("info", "pending"):
            maybe.update(_targets(r, ids))
        # a toggle or an election whose outcome the record lacks (``info``, or ``pending``:
        # a live check's prefix, a crashed run) may have taken effect: doubt, never nothing
        if f == "unclean-on" and typ in ("ok", "info", "pending"):
            scope = "*" if ((r["inv"] or {}).get("target") == "cluster") else \
                ((done if typ == "ok" else r["inv"]) or {}).get("topic") or "*"
            off = next((x for x in by_op[i + 1:] if x["type"] == "ok" and (
                x["f"] == "heal-all" or (x["f"] == "unclean-off" and _scope(x) == scope))
                and x["index"] is not None), None)
            end = END if off is None else off["index"]
            (rec.unclean if typ == "ok" else rec.unclean_maybe).setdefault(
                scope, []).append((r["op"], end))
            if typ == "ok":  # surely on: from its completion to the invoke of what ended it
                rec.unclean_sure.setdefault(scope, []).append(
                    (r["index"], END if off is None else off["op"]))
        elif f == "elect-unclean" and typ == "ok" and isinstance(done, dict):
            topic = (r["inv"] or {}).get("topic")
            for p, result in (done.get("elected") or {}).items():
                if result == "OK" and topic is not None:
                    tp = (topic, int(p))
                    rec.events.setdefault(tp, []).append(Event(
                        FORCED_UNCLEAN, tp, r["op"], r["index"], r["invoke_time"], r["time"],
                        {"result": result}))
        elif f == "elect-unclean" and typ != "fail":
            rec.forced_maybe.setdefault((r["inv"] or {}).get("topic") or "*", []).append(
                (r["op"], END if r["index"] is None else r["index"]))
        elif f == "lose-unfsynced" and typ == "ok" and isinstance(done, dict):
            rec.power_losses = True
            losses.power_loss(rec, r, done, ids, states, frozenset(down),
                              frozenset(killed - down), frozenset(maybe - killed - down))
            down.update(ids[n] for n in done.get("lost") or () if n in ids)
            killed.difference_update(down)
        elif f == "lose-unfsynced" and typ in ("info", "pending"):
            # it raised or never returned: the power may have gone, on any partition
            rec.power_losses = True
            rec.power_maybe.append((r["op"], END if r.get("index") is None else r["index"]))
        elif f in DAMAGES and typ == "ok" and isinstance(done, dict):
            losses.file_damage(rec, r, done, ids)
            for name in done.get("killed") or ():
                losses.recovery_cut(rec, r, name, (done.get("damaged") or {}).get(name) or {},
                                    by_op[i + 1:], ids, states, frozenset(down),
                                    frozenset(killed - down), frozenset(maybe - killed - down))
            killed.update(ids[n] for n in done.get("killed") or () if n in ids)
        elif f == ROLLBACK and typ == "ok" and isinstance(done, dict):
            # each node killed, its older copy put back, started: a kill-damage of that file
            rolled = {n: d for n, d in (done.get("restored") or {}).items()
                      if isinstance(d, dict) and not d.get("unchanged")}
            losses.file_damage(rec, r, {"damaged": rolled}, ids)
            for name, d in rolled.items():
                losses.recovery_cut(rec, r, name, d, by_op[i:], ids, states, frozenset(down),
                                    frozenset(killed - down), frozenset(maybe - killed - down))
        elif (f in DAMAGES or f == ROLLBACK) and typ in ("info", "pending"):
            rec.damage_maybe.append((r["op"], END if r.get("index") is None else r["index"]))
            if not (r["inv"] or {}).get("running"):
                maybe.update(_targets(r, ids))
    _duplicated(rec, by_op)
    _forgotten(rec, by_op)
    _late(rec, by_op)


def _targets(r: dict, ids: dict[str, int]) -> set[int]:
    """The node ids a fault op names in its invoke's ``target`` (a list of ids), or every
    node when it names a role (``"leader"``, ``"one"``...: which node it meant is unknown)."""
    target = (r["inv"] or {}).get("target") if isinstance(r["inv"], dict) else None
    if isinstance(target, list) and all(isinstance(t, int) for t in target):
        return set(target)
    return set(ids.values())


def _ended(ops: list[dict]) -> Iterable[tuple[dict, dict]]:
    """``(op, report)`` of every request fault a ``request-heal`` or ``heal-all`` that
    completed ``ok`` ended (``nemesis.requests``), in op order."""
    for r in ops:
        done = r["done"] if r["type"] == "ok" and isinstance(r["done"], dict) else {}
        if r["f"] == "heal-all":
            done = done.get("request") if isinstance(done.get("request"), dict) else {}
        elif r["f"] != "request-heal":
            continue
        for report in done.get("ended") or ():
            yield r, report


def _started(ops: list[dict]) -> Iterable[tuple[dict, str | None]]:
    """``(op, kind)`` of every ``request-fault`` that did not fail (it may have started),
    with its kind (``delay``, ``duplicate``, ...; ``nemesis.proxy.faults``), in op order."""
    for r in ops:
        if r["f"] == "request-fault" and r["type"] != "fail":
            asked = r["inv"] or {}
            yield r, (asked.get("request") or {}).get("fault") or asked.get("target")


def _reported(r: dict, reported: set[Any]) -> bool:
    """Whether the ``request-fault`` op ``r`` started a fault whose report is in
    ``reported`` (fault ids)."""
    return r["type"] == "ok" and (r["done"] or {}).get("id") in reported


def _duplicated(rec: Record, ops: list[dict]) -> None:
    """``request-duplicated`` events from the reports of the proxy's ended ``duplicate``
    faults, and ``duplicates_maybe`` for those whose report is missing."""
    reported: set[int] = set()
    for _, report in _ended(ops):
        if report.get("fault") != "duplicate" or report.get("undecoded"):
            continue  # one whose partitions are unknown leaves it in duplicates_maybe
        reported.add(report.get("id"))
        for name, (first, last, n) in (report.get("partitions") or {}).items():
            if (tp := losses.tp_of(name)) is None:
                continue
            values = (report.get("values") or {}).get(name)
            rec.copied[(tp, report.get("id"))] = (None if values is None
                                                  else frozenset(values))
            rec.events.setdefault(tp, []).append(Event(
                DUPLICATED, tp, rec.index_before(first), rec.index_from(last),
                first, last, {"requests": n, "fault": report.get("id"),
                              "values": None if values is None else len(values)}))
    for r, kind in _started(ops):
        if kind == "duplicate" and not _reported(r, reported):
            rec.duplicates_maybe.append((r["op"], END))


def _forgotten(rec: Record, ops: list[dict]) -> None:
    """``forgotten``: from the start of each proxy ``forget-leader-epoch`` fault to the
    completion of the heal that ended it, when its report says it took an epoch out of a
    commit; ``forgotten_maybe`` for those whose report the record lacks."""
    ended: dict[Any, tuple[int, dict]] = {}
    for r, report in _ended(ops):
        ended.setdefault(report.get("id"), (r["index"], report))
    for r, kind in _started(ops):
        if kind != FORGET:
            continue
        end = ended.get((r["done"] or {}).get("id")) if r["type"] == "ok" else None
        if end is None:
            rec.forgotten_maybe.append((r["op"], END))
        elif end[1].get("forgotten"):
            rec.forgotten.append((r["op"], end[0]))


#: The proxy faults that forward a request later than it came (``nemesis.proxy.faults``).
_KEEPING = ("delay", "hold", "reorder", "bandwidth")
#: A client's requests that end its transaction or its producer epoch (KIP-98, KIP-360).
_ENDING = ("EndTxn", "InitProducerId")


def _late(rec: Record, ops: list[dict]) -> None:
    """``late-produce`` events from the listed requests of ended proxy faults, and
    ``late_maybe`` for faults that kept Produce requests their reports do not list or whose
    report the record lacks, and for late ones the leader's answer to is not recorded."""
    reported: set[Any] = set()
    for r, report in _ended(ops):
        if report.get("fault") not in _KEEPING:
            continue
        listed = report.get("requests") or []
        if (report.get("by_api") or {}).get("Produce", 0) <= len(
                [q for q in listed if q.get("api") == "Produce"]):
            reported.add(report.get("id"))
        for q in listed:
            at, after = q.get("forwarded_ns"), sorted(set(q.get("overtaken_by") or ()) &
                                                       set(_ENDING))
            if q.get("api") != "Produce" or at is None or not after:
                continue
            for name in q.get("partitions") or ():
                answer = (q.get("errors") or {}).get(name)
                if (tp := losses.tp_of(name)) is None or answer not in ("none", None):
                    continue  # the leader refused it
                if answer is None:  # no answer recorded: it may have been appended
                    rec.late_maybe.append((rec.index_before(at), rec.index_from(at)))
                    continue
                rec.events.setdefault(tp, []).append(Event(
                    LATE_PRODUCE, tp, rec.index_before(at), rec.index_from(at), at, at,
                    {"fault": report.get("id"), "client": q.get("client"),
                     "received_s": round((q.get("received_ns") or 0) / 1e9, 3),
                     "after": after}))
    for r, kind in _started(ops):
        if kind in _KEEPING and not _reported(r, reported):
            rec.late_maybe.append((r["op"], END))


def _scope(r: dict) -> str:
    v = r["done"] or {}
    return "*" if v.get("target") == "cluster" else v.get("topic") or "*"


def relocate(rec: Record, every_op: tuple[Any, Any]) -> None:
    """Locate among every line of the history (``Record.locate``) the power losses the
    record's own ops locate only coarsely: those whose op timed where its nodes died
    (``cut``), a moment between two of the record's ops."""
    for tp, events in rec.events.items():
        for i, e in enumerate(events):
            if e.kind == POWER_LOSS and e.facts.get("cut"):
                lo, hi = rec.locate(e.lo_ns, e.hi_ns, every_op)
                events[i] = dataclasses.replace(e, lo=max(e.lo, lo), hi=min(e.hi, hi))
        events.sort(key=lambda e: (e.lo, e.hi, e.kind))
