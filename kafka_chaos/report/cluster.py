"""What the cluster did, for the HTML report: fault windows from the nemesis's ops and
changes from the cluster-state monitor's samples (``docs/history-format.md``). Fed by
``report.data.extract``'s one pass over the history; times in seconds since the start."""

from __future__ import annotations

import dataclasses
from typing import Any

#: Monitor samples with a change kept for the report (the count of the others is kept).
MAX_EVENTS = 2000


@dataclasses.dataclass
class NemesisOp:
    """A nemesis op: invoke and completion times (s; ``end_s`` None if never completed),
    ``f``, completion ``type``, what was asked (``value``) and done (``done``), ``error``."""

    start_s: float
    end_s: float | None
    f: str
    type: str
    value: Any
    done: Any
    error: str | None


@dataclasses.dataclass
class FaultWindow:
    """A fault from the invoke of the op that started it to the completion of the op that
    undid it (``end_s`` None: never undone in the history). ``package`` is the nemesis
    package (``kill``, ``stop``, ``pause``, ``partition``, ``unclean``); ``label`` says what was
    done; ``failed``: the starting op did not complete ``ok`` (it may not have happened)."""

    package: str
    start_s: float
    end_s: float | None
    label: str
    failed: bool = False


@dataclasses.dataclass
class ClusterEvent:
    """Changes the monitor saw in one sample against the one before: ``time_s`` of the
    sample, ``kinds`` (a subset of ``leader``, ``isr-shrink``, ``isr-grow``, ``answering``,
    ``controller``, ``unknown``) and one line of ``text`` per change."""

    time_s: float
    kinds: set[str]
    text: list[str]


def fault_windows(nemesis: list[NemesisOp], end_s: float) -> list[FaultWindow]:
    """Pair the nemesis ops into fault windows by the packages' start and stop ``f``s
    (``catalogue.faults.PACKAGES``): e.g. ``start`` ends kill and stop, ``resume`` pause,
    ``heal`` partition, ``unclean-off`` unclean (at its target), ``heal-all`` everything."""
    from kafka_chaos.catalogue.faults import PACKAGES, describe

    # a package may start with any of several
    starts = {f: name for name, p in PACKAGES.items() for f in p.start}
    open_: list[tuple[FaultWindow, Any]] = []
    done: list[FaultWindow] = []
    for op in nemesis:
        if op.f in starts:
            target = op.value.get("target") if isinstance(op.value, dict) else None
            label = describe(op.f, op.value, op.done, op.error)
            failed = op.type != "ok" and op.error is not None  # format 1 completes info
            open_.append((FaultWindow(starts[op.f], op.start_s, None, label, failed), target))
            continue
        ends = {name for name, p in PACKAGES.items() if p.stop == op.f}
        if op.f == "heal-all":
            ends = set(PACKAGES)
        if not ends:
            continue
        stop_target = op.value.get("target") if isinstance(op.value, dict) else None
        still = []
        for window, target in open_:
            at_target = window.package in PACKAGES and PACKAGES[window.package].stop_at_target
            matches = window.package in ends and (
                not at_target or op.f == "heal-all" or stop_target in (None, target))
            if matches:
                window.end_s = op.end_s if op.end_s is not None else end_s
                done.append(window)
            else:
                still.append((window, target))
        open_ = still
    done.extend(w for w, _ in open_)
    return sorted(done, key=lambda w: w.start_s)


def _leader(node: Any) -> str:
    return "none" if node is None or node == -1 else str(node)


class Monitor:
    """Turns the monitor's samples (``sample(time_s, state)``, in order) into ``events``
    (``ClusterEvent``, the first ``MAX_EVENTS``; ``dropped`` counts the others) and
    ``isr_full`` transitions ``(time_s, every partition led and with its whole ISR)``."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], tuple] = {}
        self.answering: dict[str, bool] = {}
        self.controller: Any = None
        self.seen_partitions = True
        self.events: list[ClusterEvent] = []
        self.dropped = 0
        self.isr_full: list[tuple[float, bool]] = []
        self.samples = 0

    def sample(self, t: float, state: dict) -> None:
        self.samples += 1
        first = self.samples == 1
        kinds: set[str] = set()
        text: list[str] = []
        for node, up in sorted((state.get("answering") or {}).items()):
            if not first and self.answering.get(node) != up:
                kinds.add("answering")
                text.append(f"node {node} {'answers again' if up else 'stopped answering'}")
            self.answering[node] = up
        ctl = (state.get("controller") or {}).get("leader")
        if not first and ctl != self.controller:
            kinds.add("controller")
            text.append(f"active controller {self.controller} → {ctl}")
        self.controller = ctl
        partitions = state.get("partitions")
        full = partitions is not None
        if partitions is None and self.seen_partitions and not first:
            kinds.add("unknown")
            text.append("no broker answered DescribeTopicPartitions")
        self.seen_partitions = partitions is not None
        for topic, parts in sorted((partitions or {}).items()):
            for p in parts or []:
                if not isinstance(p, dict) or p.get("error"):
                    full = False
                    continue
                now = (p.get("leader"), p.get("leader_epoch"), tuple(sorted(p.get("isr") or [])))
                full = full and now[0] is not None and now[0] >= 0 and \
                    set(now[2]) >= set(p.get("replicas") or [])
                key = (topic, p.get("partition"))
                before = self.parts.get(key)
                self.parts[key] = now
                if before is None or before == now:
                    continue
                name = f"{topic}-{key[1]}"
                if before[:2] != now[:2]:
                    kinds.add("leader")
                    text.append(f"{name}: leader {_leader(before[0])} → {_leader(now[0])} "
                                f"(epoch {before[1]} → {now[1]})")
                if before[2] != now[2]:
                    kinds.add("isr-shrink" if set(before[2]) - set(now[2]) else "isr-grow")
                    text.append(f"{name}: ISR {list(before[2])} → {list(now[2])}")
        if not self.isr_full or self.isr_full[-1][1] != full:
            self.isr_full.append((t, full))
        if text:
            if len(self.events) < MAX_EVENTS:
                self.events.append(ClusterEvent(t, kinds, text))
            else:
                self.dropped += 1
