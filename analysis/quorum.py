"""Metadata checks of the KRaft quorum, from the monitor's samples (``evidence.Record.samples``):
each sample's ``controller`` (``DescribeQuorum`` as the node that answered as quorum leader
reports it: its id, epoch, high watermark, and each voter's and observer's metadata log end
offset) and ``epochs`` (each answering broker's own view of each partition's leader epoch,
``DescribeTopicPartitions``, KIP-966). Pure Python: the samples are few (two a second).

Five anomalies (``catalogue.anomalies.METADATA``), each a promise of KRaft's Raft:

- ``quorum-split-brain``: two different nodes reported as quorum leader in one epoch. Raft's
  Election Safety, "at most one leader can be elected in a given term" (Ongaro and
  Ousterhout, "In Search of an Understandable Consensus Algorithm", USENIX ATC 2014, §5.2 and
  Figure 3); KRaft's epochs are Raft's terms (KIP-595), and a voter grants one vote per
  epoch, kept in its ``quorum-state`` file.
- ``quorum-hw-regress``: a leader at epoch ``e`` reported a high watermark below one a
  leader at an epoch ``<= e`` reported earlier (``-1``, a new leader's unknown high
  watermark, is skipped). Raft's Leader Completeness, "if a log entry is committed in a given
  term, then that entry will be present in the logs of the leaders for all higher-numbered
  terms" (§5.4); KIP-595: the high watermark is the offset a majority of voters has
  replicated, and a new leader knows it only once it commits an entry of its own epoch.
- ``quorum-epoch-regress``: a node answered as quorum leader at an epoch lower than one a
  sample had already shown, longer than ``bound_s`` after the first sample that showed a
  higher one. Since KAFKA-15489 (Kafka 3.7) a KRaft leader resigns when it has not received
  a Fetch or FetchSnapshot from a majority of the voters within 1.5 ×
  ``controller.quorum.fetch.timeout.ms`` (2000 ms by default): a deposed leader cut from the
  new majority stops answering as leader by then. Within the bound it is no anomaly (a stale
  leader that has not noticed yet). Time in which a ``pause`` or a clock fault was active
  does not count, and the bound starts again once it ended: a paused leader's timers do not
  run, and the check-quorum timer reads the wall clock, which a clock fault moves. A restarted
  leader starts resigned (``QuorumState``), so kills need nothing.
- ``metadata-lag``: a node whose metadata log end offset never reached the quorum's high
  watermark of the first sample after the final heal (the completion of the op that ended
  the last fault; ``liveness.disturbed``), within ``LAG_BOUND_S`` of the heal. Every replica
  of the metadata log is judged: a broker is an observer of the quorum (KIP-631), and in
  combined mode (the tool's default, no dedicated controllers) a broker shares its node's
  voter's log, so there every broker is a voter and the observers are none. A node absent
  from a sample's ``voters`` and ``observers`` is not caught up in it. Judged only where the
  samples reach past the bound; a run whose samples end before it while some node is still
  behind, or that has no sample after the heal, is *not judged*: the result says why
  (``not_judged``), and the verdict is unknown.
- ``leader-epoch-regress``: one broker's own view of a partition's leader epoch lower than an
  earlier view of the same broker. Leader epochs only grow (KIP-101, KIP-279): the
  controller bumps a partition's epoch with every leader change, and a broker applies the
  metadata log in its order; a broker restarted serves requests only once it has caught up
  with it. Topics are never deleted and created again in a run.

Doubt (the finding is *unexplained*, the verdict unknown, never a violation): a power loss
(``lose-unfsynced``) or a file fault (``bitflip``, ``truncate``, ``zero``, ``restore-file``)
began before the finding was seen: the metadata log, a ``quorum-state`` file, may have lost
un-fsynced writes or been damaged, and Raft's promises assume stable storage (Raft's Figure
2: persistent state is "updated on stable storage before responding to RPCs"). For
``quorum-epoch-regress`` also a Kafka before 3.7 (no check quorum), and a cluster the run
attached to whose fetch timeout it did not set; for ``metadata-lag`` a node that did not
answer the monitor after the bound (its process may not run: the run's own facts say
whether the final heal started it).

A history whose monitor recorded no quorum state (no sample has a ``controller``; an older
history, or no controller ever answered as leader) has nothing to check: the results say
``not_applicable`` (``kafka_chaos.verdict.RunVerdict.not_applicable``); so are
``metadata-lag`` without ``observers`` and ``leader-epoch-regress`` without ``epochs``.

Every result is ``{"count": n, "examples": [...]}`` as ``liveness.hanging``'s, examples
naming node ids, epochs, offsets, sample indexes (``indexes``) and times (``at_s``, seconds
since the run's start), at most ``MAX_EXAMPLES``, those in doubt last with their ``why``;
with ``doubt`` (the reasons) and ``doubtful`` (how many findings) when some are in doubt
(``judge.judge``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator

from kafka_chaos.analysis import evidence as ev
from kafka_chaos.analysis import liveness
from kafka_chaos.catalogue.anomalies import (LEADER_EPOCH_REGRESS, METADATA, METADATA_LAG,
                                             QUORUM_EPOCH_REGRESS, QUORUM_HW_REGRESS,
                                             QUORUM_SPLIT_BRAIN)
from kafka_chaos.catalogue.faults import PACKAGES

#: The anomalies this module finds, in report order.
NAMES = tuple(METADATA)
#: ``checkers.common.MAX_EXAMPLES`` (not imported: that module loads pyspark).
MAX_EXAMPLES = 5
#: Kafka's default ``controller.quorum.fetch.timeout.ms`` (ms).
FETCH_TIMEOUT_MS = 2000
FETCH_TIMEOUT = "controller.quorum.fetch.timeout.ms"
#: A leader resigns after this many fetch timeouts without a majority's fetch (KAFKA-15489).
CHECK_QUORUM_FACTOR = 1.5
#: Seconds added to the check-quorum time: two of the monitor's sample periods (500 ms), one
#: for the samples' own durations (each answer is known only to within its sample), one for
#: the old leader's Raft thread polling its timer late on a loaded machine.
SLACK_S = 1.0
#: Seconds after the final heal within which every node's metadata log must reach the
#: quorum's high watermark of the first sample after it: a replica fetches the metadata log
#: every few hundred ms, and a restarted broker replays it before it registers; 30 s is far
#: above what a healthy cluster needs and below the 90 s the runner waits for full ISRs.
LAG_BOUND_S = 30.0
#: The first Kafka with the check-quorum fix (KAFKA-15489).
CHECK_QUORUM_SINCE = (3, 7)
#: Nemesis ops after which the metadata log or a quorum-state file may be damaged.
_DAMAGING = ("lose-unfsynced", *PACKAGES["file"].start, PACKAGES["rollback"].stop)
#: Faults whose time does not count toward the check-quorum bound, with what ends them.
_TIMERS = (*PACKAGES["pause"].start, PACKAGES["pause"].stop, *PACKAGES["clock"].start,
           PACKAGES["clock"].stop, "heal-all")
#: Why each check had nothing to check.
NO_QUORUM = ("the monitor recorded no KRaft quorum state (DescribeQuorum): a history from "
             "before it did, or no controller ever answered as quorum leader")
NO_OBSERVERS = ("the monitor recorded no metadata log end offsets of the quorum's observers "
                "(a history from before it did)")
NO_EPOCHS = ("the monitor recorded no broker's own view of leader epochs "
             "(DescribeTopicPartitions per broker: a history from before it did)")


@dataclasses.dataclass(frozen=True)
class Leader:
    """One sample's quorum leader as it reported itself (the sample's ``controller``).

    ``index``: the sample's completion index; ``invoke_ns``, ``time_ns``: its invoke and
    completion (ns since the run's start); ``node``: the leader's id; ``epoch``; ``hw``: its
    high watermark (-1: unknown); ``voters``, ``observers``: node id -> metadata log end
    offset (``observers`` None when the sample has none: an older history)."""

    index: int
    invoke_ns: int
    time_ns: int
    node: int
    epoch: int
    hw: int
    voters: dict[int, int]
    observers: dict[int, int] | None

    def where(self) -> dict[str, Any]:
        """``{"node", "epoch", "index", "at_s"}``: the sample, for an example."""
        return {"node": self.node, "epoch": self.epoch, "index": self.index,
                "at_s": _s(self.time_ns)}


def _s(ns: float) -> float:
    return round(ns / 1e9, 3)


def _int(value: Any) -> int | None:
    """``value`` as an int: an int, or an id written as text (JSON keys); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _offsets(value: Any) -> dict[int, int]:
    """node id -> log end offset of a ``voters`` or ``observers`` map (ids as text); an entry
    whose offset is not a number is left out."""
    out = {}
    for k, v in (value or {}).items() if isinstance(value, dict) else ():
        if isinstance(v, dict):  # {"log_end_offset": n, ...}, should the monitor say more
            v = v.get("log_end_offset")
        node, offset = _int(k), _int(v)
        if node is not None and offset is not None:
            out[node] = offset
    return out


def leaders(rec: ev.Record) -> list[Leader]:
    """Every quorum leader the samples report, in sample order (a sample whose
    ``controller`` is a list, should the monitor report each node that answered as leader,
    gives one each)."""
    out = []
    for index, invoke, time, value in rec.samples:
        found = value.get("controller")
        for c in found if isinstance(found, list) else [found]:
            if not isinstance(c, dict):
                continue
            node, epoch = _int(c.get("leader")), _int(c.get("epoch"))
            if node is None or epoch is None or node < 0:
                continue
            hw = _int(c.get("high_watermark"))
            out.append(Leader(index, invoke, time, node, epoch, -1 if hw is None else hw,
                              _offsets(c.get("voters")),
                              _offsets(c["observers"]) if isinstance(c.get("observers"), dict)
                              else None))
    return out


def views(rec: ev.Record) -> Iterator[tuple[int, int, int, ev.TP, int]]:
    """``(sample index, time ns, broker id, (topic, partition), leader epoch)`` of every view a
    broker told of a partition's leader epoch (the samples' ``epochs``), in sample order
    (a generator: a long run of many partitions holds millions)."""
    tps: dict[tuple[str, Any], ev.TP | None] = {}  # each (topic, partition key) parsed once
    for index, _, time, value in rec.samples:
        epochs = value.get("epochs")
        for broker, topics in (epochs.items() if isinstance(epochs, dict) else ()):
            node = _int(broker)
            for topic, parts in (topics.items() if isinstance(topics, dict) and node is not None
                                 else ()):
                for p, epoch in (parts.items() if isinstance(parts, dict) else ()):
                    if (topic, p) not in tps:
                        partition = _int(p)
                        tps[(topic, p)] = None if partition is None else (topic, partition)
                    tp = tps[(topic, p)]
                    if tp is not None and type(epoch) is int:
                        yield index, time, node, tp, epoch


def _answering(rec: ev.Record) -> dict[int, dict[int, bool]]:
    """sample index -> node id -> it answered the monitor's ApiVersions in that sample."""
    out: dict[int, dict[int, bool]] = {}
    for index, _, _, value in rec.samples:
        told = value.get("answering")
        out[index] = {_int(k): a is True for k, a in (told.items() if isinstance(told, dict)
                                                      else ()) if _int(k) is not None}
    return out


def fetch_timeout_ms(config: dict[str, Any] | None) -> int | None:
    """The run's ``controller.quorum.fetch.timeout.ms`` as it set it on its nodes (the run
    config's ``broker_properties``, which the tool's clusters write on controllers too), or
    None."""
    value = ((config or {}).get("broker_properties") or {}).get(FETCH_TIMEOUT)
    return None if value is None else int(str(value))


def bound_s(config: dict[str, Any] | None) -> float:
    """Seconds a deposed quorum leader may still answer as leader after the first sample of a
    higher epoch: 1.5 × ``controller.quorum.fetch.timeout.ms`` (as the run set it, else
    Kafka's default) plus ``SLACK_S``."""
    timeout = fetch_timeout_ms(config) or FETCH_TIMEOUT_MS
    return CHECK_QUORUM_FACTOR * timeout / 1000 + SLACK_S


def _version(config: dict[str, Any] | None) -> tuple[int, int] | None:
    text = str((config or {}).get("kafka_version") or "")
    parts = text.split(".")[:2]
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _damage(rec: ev.Record, hi: int) -> str | None:
    """Why storage may have failed Raft before history index ``hi``: the first power loss
    (when the record holds one that may have taken effect) or file fault begun by then."""
    for op, f, invoked, _ in rec.nemesis:
        if op > hi or f not in _DAMAGING:
            continue
        if f == "lose-unfsynced" and not rec.power_losses:
            continue  # every one failed: no power went
        what = "a power loss" if f == "lose-unfsynced" else "a file fault"
        return (f"{what} ({f} at {_s(invoked)} s) came before it: the metadata log or a "
                "quorum-state file may have lost un-fsynced writes or been damaged")
    return None


def _result(findings: list[tuple[dict[str, Any], str | None]]) -> dict[str, Any]:
    """``{"count", "examples"}`` of ``(example, why in doubt or None)`` findings, those in
    doubt last (each with its ``why``), with ``doubt`` and ``doubtful`` when there are."""
    sure = [ex for ex, why in findings if why is None]
    unsure = [dict(ex, why=why) for ex, why in findings if why is not None]
    out: dict[str, Any] = {"count": len(findings), "examples": (sure + unsure)[:MAX_EXAMPLES]}
    if unsure:
        whys = list(dict.fromkeys(ex["why"] for ex in unsure))
        out["doubt"] = "; ".join(whys[:3]) + ("; ..." if len(whys) > 3 else "")
        out["doubtful"] = len(unsure)
    return out


def _not_applicable(why: str) -> dict[str, Any]:
    return {"count": 0, "examples": [], "not_applicable": why}


def split_brain(samples: list[Leader], rec: ev.Record) -> dict[str, Any]:
    """``quorum-split-brain``: one finding per epoch that more than one node reported as
    leader, ``{"epoch", "leaders": [ids], "indexes", "at_s"}`` (the first sample of each
    leader, in order)."""
    by_epoch: dict[int, dict[int, Leader]] = {}
    for s in samples:
        by_epoch.setdefault(s.epoch, {}).setdefault(s.node, s)
    findings = []
    for epoch, nodes in sorted(by_epoch.items()):
        if len(nodes) < 2:
            continue
        firsts = sorted(nodes.values(), key=lambda s: s.index)
        example = {"epoch": epoch, "leaders": [s.node for s in firsts],
                   "indexes": [s.index for s in firsts], "at_s": [_s(s.time_ns) for s in firsts]}
        findings.append((example, _damage(rec, firsts[1].index)))
    return _result(findings)


def hw_regress(samples: list[Leader], rec: ev.Record) -> dict[str, Any]:
    """``quorum-hw-regress``: one finding per leader, epoch and earlier sample it regressed
    from: ``{"node", "epoch", "high_watermark" (the lowest it reported), "earlier": {"node",
    "epoch", "high_watermark", "index", "at_s"} (the highest of an epoch at most its own
    before it), "indexes", "at_s" (first and last such sample)}``."""
    best: dict[int, Leader] = {}  # epoch -> its sample with the highest HW so far
    found: dict[tuple[int, int, int], dict[str, Any]] = {}
    for s in samples:
        if s.hw < 0:
            continue
        prior = max((b for e, b in best.items() if e <= s.epoch), key=lambda b: b.hw,
                    default=None)
        if prior is not None and s.hw < prior.hw:
            key = (s.node, s.epoch, prior.index)
            if key not in found:
                found[key] = {"node": s.node, "epoch": s.epoch, "high_watermark": s.hw,
                              "earlier": {**prior.where(), "high_watermark": prior.hw},
                              "indexes": [s.index, s.index],
                              "at_s": [_s(s.time_ns), _s(s.time_ns)]}
            ex = found[key]
            ex["high_watermark"] = min(ex["high_watermark"], s.hw)
            ex["indexes"][1], ex["at_s"][1] = s.index, _s(s.time_ns)
        if s.epoch not in best or s.hw > best[s.epoch].hw:
            best[s.epoch] = s
    return _result([(ex, _damage(rec, ex["indexes"][0])) for ex in found.values()])


def _epoch_doubt(config: dict[str, Any] | None) -> str | None:
    """Why the check-quorum bound may not hold for this run's cluster, or None."""
    version = _version(config)
    if version is not None and version < CHECK_QUORUM_SINCE:
        return (f"Kafka {(config or {}).get('kafka_version')} predates the check-quorum fix "
                "(KAFKA-15489, Kafka 3.7): a deposed quorum leader may answer as leader until "
                "it hears of the new epoch")
    if (config or {}).get("backend") in liveness._ATTACHED and fetch_timeout_ms(config) is None:
        return (f"the attached cluster's {FETCH_TIMEOUT} is unknown; the bound assumed "
                f"Kafka's default {FETCH_TIMEOUT_MS} ms")
    return None


def epoch_regress(samples: list[Leader], rec: ev.Record,
                  config: dict[str, Any] | None) -> dict[str, Any]:
    """``quorum-epoch-regress``: one finding per node and stale epoch, ``{"node", "epoch",
    "higher": {"node", "epoch", "index", "at_s"} (the first sample of an epoch above it),
    "indexes", "at_s" (its first and last sample past the bound), "after_s" (the longest
    stretch, s, between the higher epoch's first sample and its first one past the bound with
    no pause or clock fault active), "bound_s"}``."""
    limit = bound_s(config)
    timers = liveness.disturbed([n for n in rec.nemesis if n[1] in _TIMERS])
    general = _epoch_doubt(config)
    first: dict[int, Leader] = {}  # epoch -> its first sample
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for s in samples:
        higher = min((f for e, f in first.items() if e > s.epoch), key=lambda f: f.time_ns,
                     default=None)
        if higher is not None and s.invoke_ns > higher.time_ns:
            after = liveness._quiet_ns(higher.time_ns, s.invoke_ns, timers) / 1e9
            if after > limit:
                key = (s.node, s.epoch)
                if key not in found:
                    found[key] = {"node": s.node, "epoch": s.epoch, "higher": higher.where(),
                                  "indexes": [s.index, s.index],
                                  "at_s": [_s(s.time_ns), _s(s.time_ns)],
                                  "after_s": round(after, 3), "bound_s": limit}
                found[key]["indexes"][1], found[key]["at_s"][1] = s.index, _s(s.time_ns)
        first.setdefault(s.epoch, s)
    return _result([(ex, general or _damage(rec, ex["indexes"][0])) for ex in found.values()])


def healed_ns(rec: ev.Record, samples: list[Leader]) -> tuple[int | None, str | None]:
    """When the last fault was healed (ns): the completion of the op that ended the last
    fault (``liveness.disturbed``); without a fault, of the last ``heal-all``, else the first
    sample's invoke (nothing to heal). ``(None, why)`` when a fault never ended."""
    spans = liveness.disturbed(rec.nemesis)
    if spans:
        end = max(b for _, b in spans)
        if math.isinf(end):
            return None, "a fault never ended (no op that heals it completed)"
        return int(end), None
    heals = [done for _, f, _, done in rec.nemesis if f == "heal-all" and done is not None]
    if heals:
        return max(heals), None
    return (samples[0].invoke_ns if samples else None), None


def _end_offset(s: Leader, node: int) -> tuple[int | None, str | None]:
    """``node``'s metadata log end offset in sample ``s`` and its role there (``"voter"``,
    ``"observer"``), or ``(None, None)``: absent from both."""
    if node in s.voters:
        return s.voters[node], "voter"
    if s.observers is not None and node in s.observers:
        return s.observers[node], "observer"
    return None, None


def _reached(s: Leader, node: int, offset: int) -> bool:
    """``node``'s metadata log ended at ``offset`` or beyond in sample ``s``."""
    end = _end_offset(s, node)[0]
    return end is not None and end >= offset


def metadata_lag(samples: list[Leader], rec: ev.Record) -> dict[str, Any]:
    """``metadata-lag``: one finding per node not caught up within ``LAG_BOUND_S`` of the
    final heal, ``{"node", "role" ("voter" | "observer": where a sample last listed it),
    "high_watermark" (the quorum's at the first sample after the heal), "reference":
    {"node", "epoch", "index", "at_s"} (that sample), "healed_s", "bound_s", "end_offset"
    (its metadata log end offset at the first sample past the bound; None: absent from it),
    "caught_up_s" (the first sample that showed it caught up, past the bound; None: none
    did), "indexes", "at_s" (the reference sample and the first past the bound)}``.
    ``not_judged`` says why some node, or the whole check, could not be judged."""
    if not any(s.observers is not None for s in samples):
        return _not_applicable(NO_OBSERVERS)
    healed, why = healed_ns(rec, samples)
    if healed is None:
        return {"count": 0, "examples": [], "not_judged": why}
    after = [s for s in samples if s.invoke_ns >= healed]
    ref = next((s for s in after if s.hw >= 0), None)
    if ref is None:
        return {"count": 0, "examples": [], "not_judged": (
            f"no sample after the final heal at {_s(healed)} s showed the quorum's high "
            "watermark")}
    roles = {n: "voter" for s in samples for n in s.voters}
    roles.update({n: "observer" for s in samples for n in s.observers or () if n not in roles})
    deadline = healed + LAG_BOUND_S * 1e9
    seen = [s for s in after if s.observers is not None]
    late = [s for s in seen if s.invoke_ns > deadline]
    answering = _answering(rec)
    findings, pending = [], []
    for n in sorted(roles):
        caught = next((s for s in seen if _reached(s, n, ref.hw)), None)
        if caught is not None and caught.invoke_ns <= deadline:
            continue
        if not late:
            pending.append(n)
            continue
        judge = late[0]
        offset, role = _end_offset(judge, n)
        example = {"node": n, "role": role or roles[n], "high_watermark": ref.hw,
                   "reference": ref.where(), "healed_s": _s(healed), "bound_s": LAG_BOUND_S,
                   "end_offset": offset,
                   "caught_up_s": None if caught is None else _s(caught.time_ns),
                   "indexes": [ref.index, judge.index],
                   "at_s": [_s(ref.time_ns), _s(judge.time_ns)]}
        silent = next((s for s in late if not answering.get(s.index, {}).get(n)), None)
        doubt = (f"node {n} did not answer the monitor at {_s(silent.time_ns)} s, after the "
                 "bound: its process may not have been running (the final heal's own check "
                 "says whether it started)") if silent is not None else None
        findings.append((example, doubt or _damage(rec, judge.index)))
    out = _result(findings)
    if pending:
        last = seen[-1] if seen else ref
        out["not_judged"] = (
            f"node(s) {pending} had not reached the quorum's high watermark {ref.hw} (at "
            f"{_s(ref.time_ns)} s) by the monitor's last sample at {_s(last.time_ns)} s, "
            f"{round((last.time_ns - healed) / 1e9, 1)} s after the final heal at "
            f"{_s(healed)} s: within the {LAG_BOUND_S:g} s bound, so not judged")
    return out


def leader_epoch_regress(rec: ev.Record) -> dict[str, Any]:
    """``leader-epoch-regress``: one finding per broker, partition and highest earlier view
    it went below, ``{"node", "partition": "t-p", "epoch" (the lowest it told), "earlier":
    {"epoch", "index", "at_s"} (its highest view before), "indexes", "at_s" (its first and
    last sample below)}``."""
    if not any(isinstance(value.get("epochs"), dict) for *_, value in rec.samples):
        return _not_applicable(NO_EPOCHS)
    top: dict[tuple[int, ev.TP], tuple[int, int, int]] = {}  # its highest view so far
    found: dict[tuple[int, ev.TP, int], dict[str, Any]] = {}
    for index, time, node, tp, epoch in views(rec):
        best = top.get((node, tp))
        if best is not None and epoch < best[2]:
            key = (node, tp, best[0])
            if key not in found:
                found[key] = {"node": node, "partition": f"{tp[0]}-{tp[1]}", "epoch": epoch,
                              "earlier": {"epoch": best[2], "index": best[0],
                                          "at_s": _s(best[1])},
                              "indexes": [index, index], "at_s": [_s(time), _s(time)]}
            ex = found[key]
            ex["epoch"] = min(ex["epoch"], epoch)
            ex["indexes"][1], ex["at_s"][1] = index, _s(time)
        if best is None or epoch > best[2]:
            top[(node, tp)] = (index, time, epoch)
    findings = sorted(found.values(), key=lambda ex: (ex["indexes"][0], ex["node"]))
    return _result([(ex, _damage(rec, ex["indexes"][0])) for ex in findings])


def check(rec: ev.Record, config: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every anomaly of ``NAMES`` -> its result (the module docstring)."""
    samples = leaders(rec)
    out: dict[str, dict[str, Any]] = {}
    if samples:
        out[QUORUM_SPLIT_BRAIN] = split_brain(samples, rec)
        out[QUORUM_HW_REGRESS] = hw_regress(samples, rec)
        out[QUORUM_EPOCH_REGRESS] = epoch_regress(samples, rec, config)
        out[METADATA_LAG] = metadata_lag(samples, rec)
    else:
        for name in (QUORUM_SPLIT_BRAIN, QUORUM_HW_REGRESS, QUORUM_EPOCH_REGRESS):
            out[name] = _not_applicable(NO_QUORUM)
        out[METADATA_LAG] = _not_applicable(NO_OBSERVERS)
    out[LEADER_EPOCH_REGRESS] = leader_epoch_regress(rec)
    return {name: out[name] for name in NAMES}
