"""What the nemesis's ops say a partition's log lost, or may have: the ``power-loss``,
``file-damage`` and ``recovery-cut`` events of the record (``analysis.evidence`` lists
their facts), and which nodes an op started. Built by ``evidence.build`` from the nemesis's
completions and the monitor's samples before them."""

from __future__ import annotations

from kafka_chaos.analysis.record import (DAMAGES, END, FILE_DAMAGE, MAX_BLIND_NS, POWER_LOSS,
                                         RECOVERY_CUT, ROLLBACK, TP, Event, Record, Stretch)
from kafka_chaos.catalogue.faults import SEGMENT_KINDS


#: Nemesis ops that never start a broker's process (``docs/history-format.md``): a node a
#: power loss took down stays down across them. Any other op may have started it again
#: (a file damage kills its nodes, never starts one: ``DAMAGES``).
NOT_STARTING = frozenset((
    "kill", "pause", "resume", "partition", "heal", "clock-bump", "clock-reset",
    "clock-strobe", "crash-clients", "elect-unclean", "move-leader", "restore-leader",
    "unclean-on", "unclean-off", "request-fault", "request-heal", "lose-unfsynced",
    "disk-full", "disk-slow", *DAMAGES))


def file_damage(rec: Record, r: dict, done: dict, ids: dict[str, int]) -> None:
    """The ``file-damage`` events of a damage op that completed: one per node whose damaged
    file was a partition's log segment (``<topic>-<partition>/<base offset>.log``)."""
    running = set(done.get("running") or ())
    for name, d in (done.get("damaged") or {}).items():
        tp = segment_tp(d)
        if tp is None or name not in ids:
            continue
        rec.events.setdefault(tp, []).append(Event(
            FILE_DAMAGE, tp, r["op"], r["index"], r["invoke_time"], r["time"],
            {"node": ids[name], "f": r["f"], "file": d["file"], "running": name in running,
             "active": d.get("kind") == "segment", "recovered": d.get("recovered"),
             "offsets": d.get("offsets"), "unchecked": d.get("unchecked") or [],
             "past_batches": bool(d.get("past_batches"))}))


def recovery_cut(rec: Record, r: dict, name: str, d: dict, later: list[dict],
                 ids: dict[str, int], states: dict[TP, list[tuple[dict, dict]]],
                 down: frozenset[int], killed: frozenset[int], maybe: frozenset[int]) -> None:
    """The ``recovery-cut`` event of damage op ``r`` on node ``name`` (which it killed;
    ``d``: the op's record of that node's file), when it damaged the batches of a segment
    its recovery reads (the active one, or a rolled one the op found above the recovery
    point) in bytes their CRC covers, or cut them off (a ``restore-file`` of an older
    prefix); ``later``: the nemesis ops from the one after ``r`` (from ``r`` itself for a
    ``restore-file``, which starts its node), in order: the first that may have started the
    node ends the event. Judged as a power loss of that node's log of the partition
    (``power_loss``)."""
    # the active segment, or a rolled one the damage op found above the recovery point
    read = d.get("kind") == "segment" or d.get("recovered") is True
    tp = segment_tp(d) if read else None
    cut = sorted(set(d.get("batches") or ()) - set(d.get("unchecked") or ()))
    if tp is None or name not in ids or not cut:
        return
    start = next((x for x in later if x["f"] not in NOT_STARTING
                  and (started_nodes(x) is None or name in started_nodes(x))), None)
    hi = END if start is None or start["index"] is None else start["index"]
    hi_ns = (start or {}).get("time") or r["time"]  # for the text: END says "never"
    lost = {"lost": {name: {"logs": {f"{tp[0]}-{tp[1]}/{d.get('file')}": d["size"][0]}}}}
    power_loss(rec, r, lost, ids, states, down, killed, maybe, kind=RECOVERY_CUT,
               span=(r["op"], hi, r["invoke_time"], hi_ns), extra={"from_offset": cut[0]})


def segment_tp(d: dict) -> TP | None:
    """The partition whose log segment a damage record names (``<topic>-<p>/<base>.log``
    in the node's directory), or None for another file."""
    path = str(d.get("file") or "")
    if d.get("kind") not in SEGMENT_KINDS or not path.endswith(".log") or "/" not in path:
        return None
    return tp_of(path.rsplit("/", 2)[-2])


def started_nodes(r: dict) -> list[str] | None:
    """The node names a nemesis op that may start brokers says it started (``start``,
    ``heal-all``, ``roll``, ``disk-heal``, ``restore-file``: ``docs/history-format.md``), or
    None when it does not say (it ended ``info``, never ended, or is of another kind): it may
    have started any."""
    done = r["done"] if r["type"] == "ok" and isinstance(r["done"], dict) else None
    if done is None:
        return None
    if r["f"] in ("start", "disk-heal", ROLLBACK):
        return list(done.get("started") or [])
    if r["f"] == "roll":
        return list(done.get("rolled") or [])
    if r["f"] == "heal-all":
        process = done.get("process") if isinstance(done.get("process"), dict) else {}
        start = process.get("start") if isinstance(process.get("start"), dict) else None
        disk = done.get("disk") if isinstance(done.get("disk"), dict) else {}
        return None if start is None else [*(start.get("started") or []),
                                           *(disk.get("started") or [])]
    return None


def tp_of(name: str) -> TP | None:
    """``("t", 3)`` of ``"t-3"`` (a proxy report's partition, a log directory's name); None
    for a name without a partition."""
    topic, _, p = name.rpartition("-")
    return (topic, int(p)) if p.isdigit() else None


def power_loss(rec: Record, r: dict, done: dict, ids: dict[str, int],
               states: dict[TP, list[tuple[dict, dict]]], down: frozenset[int],
               killed: frozenset[int] = frozenset(),
               maybe: frozenset[int] = frozenset(), *, kind: str = POWER_LOSS,
               span: Stretch | None = None, extra: dict | None = None) -> None:
    """The ``power-loss`` events of op ``r`` (``done``: ``{"lost": {name: {"logs": {path:
    bytes}}}}``), one per partition it cut; ``kind``, ``span`` and ``extra`` facts for an
    event judged the same way (``recovery-cut``)."""
    lost: dict[TP, dict[str, int]] = {}
    for name, what in (done.get("lost") or {}).items():
        for log, n in ((what or {}).get("logs") or {}).items():
            if n and (tp := tp_of(log.split("/", 1)[0])) is not None:
                lost.setdefault(tp, {})[name] = lost.get(tp, {}).get(name, 0) + int(n)
    for tp, by_name in lost.items():
        # the op's own read of the metadata just before the loss, later than any sample
        sole = [ids[n] for n, what in (done.get("lost") or {}).items() if n in ids and
                f"{tp[0]}-{tp[1]}" in ((what or {}).get("sole_in_sync_replica_of") or ())]
        nodes = sorted(ids[n] for n in by_name if n in ids)
        last = last_before(states.get(tp, []), r)
        dead = killed - set(nodes)
        gone = set(nodes) | down | dead
        unsure = maybe - gone
        dead_count = len(by_name) + len(down - set(nodes)) + len(dead)
        # the span in which each cut node died and lost its bytes, where the op timed it
        # (nothing it lost can have been acknowledged by it after: it was dead)
        cut = [(done["lost"][n] or {}).get("cut_ns") for n in by_name]
        lo, hi, lo_ns, hi_ns = span or (r["op"], r["index"], r["invoke_time"], r["time"])
        if span is None and cut and all(isinstance(c, list) and len(c) == 2 for c in cut):
            lo_ns, hi_ns = max(lo_ns, min(c[0] for c in cut)), min(hi_ns, max(c[1] for c in cut))
            lo, hi = max(lo, rec.index_before(lo_ns)), min(hi, rec.index_from(hi_ns))
        rec.events.setdefault(tp, []).append(Event(
            kind, tp, lo, hi, lo_ns, hi_ns,
            {**(extra or {}), "nodes": nodes, "bytes": by_name,
             "down": sorted(down - set(nodes)),
             "cut": span is None and (lo_ns, hi_ns) != (r["invoke_time"], r["time"]),
             "killed": sorted(dead), "maybe_down": sorted(unsure),
             "needed": in_sync_before(last, sole),
             "leader": last[1].get("leader") if last else None,
             # when who was in sync was read: the op's own read, or that sample's
             "sampled_ns": r["invoke_time"] if sole else last[0]["time"] if last else None,
             "sampled": r["op"] if sole else last[0]["index"] if last else None,
             "every_replica": every_replica(states.get(tp, []), r, gone, dead_count,
                                            rec.replication_factor),
             "every_replica_maybe": bool(unsure) and every_replica(
                 states.get(tp, []), r, gone | unsure, dead_count + len(unsure),
                 rec.replication_factor)}))


def every_replica(seen: list[tuple[dict, dict]], r: dict, nodes: set[int], cut: int,
                  factor: int | None) -> bool:
    """Whether the ``cut`` nodes that lost bytes of a partition (``nodes``: their ids) are
    all its replicas: the replicas of the last of ``seen`` before the op ``r`` (the first
    after it when none came before), else the run's replication ``factor``. Only a replica
    holds a log of the partition, so that many nodes are all of them."""
    before = [p for s, p in seen if s["index"] < r["index"]]
    nearest = before[-1] if before else (seen[0][1] if seen else None)
    replicas = (nearest or {}).get("replicas")
    if replicas:
        return set(replicas) <= nodes
    return factor is not None and cut >= int(factor)


def in_sync_before(last: tuple[dict, dict] | None,
                   sole: list[int] | None = None) -> list[int] | None:
    """The ISR and ELR in ``last``, the partition's last sample that completed before the
    power-loss op completed, at most ``MAX_BLIND_NS`` older than that (``last_before``;
    None: there is none, and so is the answer). Before the completion, not the invoke: the
    loss is the op's last act, and a target such as ``lone-leader`` first shrinks the ISR.
    A sample taken after the loss cannot narrow the set: a fenced broker leaves the ISR
    unless it is its last member, and then it was the last one in sync when it lost power.

    ``sole``: the nodes the op itself found to be the partition's whole ISR in the metadata
    it read just before cutting power (``sole_in_sync_replica_of``). That read is later than
    any sample, and a leader cut from its followers shrinks each partition's ISR on its own
    clock, so a sample taken half a second before can still list them: the op's ISR then
    stands for the sample's (its ELR still counts, KIP-966)."""
    if last is None:
        return None
    p = last[1]
    isr = sole if sole else (p.get("isr") or [])
    needed = set(isr) | set(p.get("elr") or [])
    # KIP-966: with the ISR and the ELR both empty, the last known leader is elected once it
    # is back ("similar behavior prior to the 4.0 when all the replicas are offline")
    return sorted(needed or set(p.get("last_known_elr") or []))


def last_before(seen: list[tuple[dict, dict]], r: dict) -> tuple[dict, dict] | None:
    """The last of ``seen`` (sample row, partition state) that completed before op ``r``
    did, if at most ``MAX_BLIND_NS`` older than that; else None."""
    best = None
    for s, p in seen:
        if s["index"] < r["index"]:
            best = (s, p)
    if best is None or r["time"] - best[0]["time"] > MAX_BLIND_NS:
        return None
    return best
