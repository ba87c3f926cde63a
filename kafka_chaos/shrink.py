"""``kafka-chaos shrink``: the smallest fault schedule of a run that still shows its finding.

A run's fault schedule becomes *units* a replay can keep or drop: each fault of a random
schedule (its start and its stop, as ``nemesis.schedule.plan`` paired them) or each step of
a scenario. A candidate is a set of units written as a scenario (``nemesis.script``) and
replayed ``runs`` times; it *reproduces* when ``need`` of them show the outcome
(``bisect.Outcome``). Which candidates run is Zeller and Hildebrandt's delta debugging
(``ddmin``, "Simplifying and Isolating Failure-Inducing Input", TSE 2002), which ends
1-minimal: no single unit of the answer can be removed without losing the finding at that
rate. Then the intervals are shortened (``TIMINGS``): the idle time between faults first,
then each fault's own duration, each kept only if it still reproduces.

A fault of a random schedule is replayed at the time it started in the run, on the nodes it
hit where its target was a random draw (``one``, ``minority``, ``isolate-one``, ``halves``
...: ``concrete``), and by role where its target was one (``leader``, ``lone-leader``,
``isolate-controller`` ...: the role is what made it matter, and another node may hold it in
a replay); a file fault on the kind of file it chose. The replay's workload is the run's, its
seeds the run's seed and the next ones.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Iterable

from kafka_chaos.catalogue.faults import PACKAGES
from kafka_chaos.errors import ShrinkError
from kafka_chaos.history import NEMESIS, SYSTEM_PROCESSES, Op, OpType

#: The timings a shrink tries once the units are 1-minimal, in order: as the run had them,
#: with at most ``GAP_S`` idle between faults (``LEAD_S`` before the first, ``TAIL_S``
#: after the last), then with each fault lasting half as long.
TIMINGS = ("as-run", "compact", "halved")
LEAD_S, GAP_S, TAIL_S = 5.0, 2.0, 5.0
#: Targets a random schedule draws nodes for: replayed on the nodes drawn.
DRAWN = {"one", "minority", "majority", "follower", "isolate-one", "halves"}
#: The ``ok`` value's keys that name the nodes a fault hit (a list, or a mapping by node):
#: process faults, file damage (after a kill, or under a running broker), file copies, disks.
_HIT = ("killed", "stopped", "paused", "running", "copied", "slow", "full")
#: The ``ok`` value's keys whose entries name the file a file fault chose (``nemesis.files``).
_FILES = ("damaged", "copied")
#: Packages a replay cannot express yet: a request fault's shape is not in its op's value.
UNSUPPORTED = ("request",)
_NAME = re.compile(r"([nc])(\d+)")


@dataclasses.dataclass(frozen=True)
class Unit:
    """One piece of a schedule a candidate keeps or drops: a fault of a random schedule
    (its start and stop steps) or a scenario's step. ``steps`` are ``nemesis.script.Step``
    fields as a scenario file writes them, with ``at`` (s since the workload began) for a
    random schedule's faults."""

    label: str
    steps: tuple[dict[str, Any], ...]


def node_id(name: str, brokers: int) -> int | None:
    """The node id of a node the tool named (``n2`` -> 2; controller ``c1`` -> ``brokers``
    + 1, ``clusters.local``, ``clusters.docker_backend``); None for another name."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return int(m[2]) if m[1] == "n" else brokers + int(m[2])


def units_of_history(ops: Iterable[Op], brokers: int, skip_first: str | None = None
                     ) -> tuple[list[Unit], float]:
    """The faults of a random schedule's history, in order, and the workload's length (s,
    from its first client op to the final ``heal-all``).

    Args:
        ops: the run's ops (``history.read_history``).
        brokers: the run's ``--brokers`` (controllers' ids follow them).
        skip_first: an ``f`` whose first nemesis op is no scheduled fault (``--proxy-fault``
            starts one before the workload), or None.

    A fault still running at the final heal ends where ``heal-all`` began. Raises
    ``ShrinkError`` when the history has no client op, or a fault of ``UNSUPPORTED``."""
    ops = list(ops)
    t0 = next((op.time for op in ops if op.process not in SYSTEM_PROCESSES
               and op.type == OpType.INVOKE), None)
    if t0 is None:
        raise ShrinkError("the history has no client op: nothing to replay against")
    invokes = [op for op in ops if op.process == NEMESIS and op.type == OpType.INVOKE]
    done = {}  # invoke index -> its completion (nemesis ops run one at a time)
    pending: Op | None = None
    for op in ops:
        if op.process != NEMESIS:
            continue
        if op.type == OpType.INVOKE:
            pending = op
        elif pending is not None:
            done[pending.index], pending = op, None
    end = next((op.time for op in invokes if op.f == "heal-all"), ops[-1].time)
    package_of = {f: name for name, kind in PACKAGES.items() for f in kind.start}
    units: list[Unit] = []
    open_: dict[str, tuple[Op, Op | None]] = {}  # package -> its running fault's start
    for op in invokes:
        if op.f == skip_first:
            skip_first = None
            continue
        if op.f == "heal-all":
            break
        if op.f in package_of:
            name = package_of[op.f]
            if name in UNSUPPORTED:
                raise ShrinkError(f"a {name} fault ({op.f}) cannot be replayed from its op "
                                  "yet: shrink its scenario instead")
            open_[name] = (op, done.get(op.index))
            continue
        name = next((n for n, (s, _) in open_.items() if PACKAGES[n].stop == op.f), None)
        if name is not None:
            start, ok = open_.pop(name)
            units.append(_fault(start, ok, op, t0, brokers))
    units += [_fault(start, ok, None, t0, brokers, end) for start, ok in open_.values()]
    units.sort(key=lambda u: u.steps[0]["at"])
    return units, _secs(end - t0)


def _fault(start: Op, ok: Op | None, stop: Op | None, t0: int, brokers: int,
           end: int | None = None) -> Unit:
    """One fault's unit: its start step (target made concrete where drawn) and stop step."""
    value = start.value or {}
    target = concrete(start.f, value.get("target"), ok, brokers)
    step: dict[str, Any] = {"at": _secs(start.time - t0), "do": [start.f]}
    if target is not None:
        step["target"] = target
    step.update(_file_of(ok))
    kind = next(k for k in PACKAGES.values() if start.f in k.start)
    stop_step: dict[str, Any] = {"at": _secs((stop.time if stop else end) - t0),
                                 "do": [kind.stop]}
    if kind.stop_at_target and target is not None:
        stop_step["target"] = target
    shown = _target_text(target)
    label = f"{start.f} {shown} at {step['at']:g} s, {kind.stop} at {stop_step['at']:g} s"
    step["name"] = f"{start.f} {shown}" + (f" (drawn: {value.get('target')})"
                                           if isinstance(target, list) else "")
    return Unit(label, (step, stop_step))


def concrete(f: str, target: Any, ok: Op | None, brokers: int) -> Any:
    """A fault's target for its replay: the node ids it hit when the run drew them
    (``DRAWN``, read from the ``ok`` value), else the target as given (a role, a shape, a
    list of ids). A fault that did not complete ``ok``, or whose nodes have names the tool
    did not give, keeps its target."""
    if target not in DRAWN or ok is None or ok.type != OpType.OK:
        return target
    done = ok.value or {}
    if f == "partition" or f == "loss":
        names = (done.get("isolated") or [[]])[0]
    else:
        names = list(next((done[k] for k in _HIT if k in done), []))
    ids = [node_id(n, brokers) for n in names]
    return sorted(ids) if ids and None not in ids else target


def _file_of(ok: Op | None) -> dict[str, str]:
    """``{"file": kind}`` when a file fault's ``ok`` value shows the one kind of file it
    chose on every node (``nemesis.files``: drawn at random when the run named none), so
    its replay damages or copies the same kind; else nothing."""
    done = (ok.value if ok is not None and ok.type == OpType.OK else None) or {}
    chosen = next((done[k] for k in _FILES if isinstance(done.get(k), dict)), {})
    kinds = {entry.get("kind") for entry in chosen.values() if isinstance(entry, dict)}
    return {"file": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}


def units_of_script(steps: list[dict[str, Any]]) -> list[Unit]:
    """A scenario's steps (``Step`` dumps), one unit each."""
    return [Unit(s.get("name") or f"step {i + 1} ({', '.join(s.get('do') or []) or 'wait'})",
                 (s,)) for i, s in enumerate(steps)]


def _target_text(target: Any) -> str:
    """A step's target as the user reads it: ``nodes 1,3`` for node ids, else the name."""
    return "nodes " + ",".join(map(str, target)) if isinstance(target, list) else str(target)


def _secs(ns: int) -> float:
    return round(ns / 1e9, 1)


def timed(units: list[Unit], kept: Iterable[int], timing: str, end_s: float
          ) -> list[dict[str, Any]]:
    """The steps of the units ``kept`` (indices into ``units``) under ``timing``
    (``TIMINGS``), and a last wait step to the workload's end: at ``end_s`` as run, else
    ``TAIL_S`` after the last step. Scenario steps (no ``at``) are kept as they are."""
    chosen = [units[i] for i in sorted(kept)]
    if not chosen or "at" not in chosen[0].steps[0]:
        return [dict(s) for u in chosen for s in u.steps]
    if timing == "as-run":
        steps = [dict(s) for u in chosen for s in u.steps]
        return steps + [{"name": "the workload runs on to the run's end",
                         "at": max(end_s, steps[-1]["at"])}]
    steps = []
    clock = 0.0
    for u in chosen:
        first = u.steps[0]["at"]
        gap = min(first - clock, LEAD_S if not steps else GAP_S)
        base = (steps[-1]["at"] if steps else 0.0) + max(gap, 0.0)
        scale = 0.5 if timing == "halved" else 1.0
        for s in u.steps:
            steps.append({**s, "at": round(base + scale * (s["at"] - first), 1)})
        clock = u.steps[-1]["at"]
    return steps + [{"name": "the workload runs on a little", "at": steps[-1]["at"] + TAIL_S}]


def describe(steps: list[dict[str, Any]]) -> str:
    """Steps (``timed``) in one line: ``kill lagging-leader at 5 s; start at 6.9 s``."""
    said = []
    for s in steps:
        if not s.get("do"):
            continue
        shown = "" if s.get("target") is None else " " + _target_text(s["target"])
        when = f" at {s['at']:g} s" if "at" in s else ""
        said.append(f"{'+'.join(s['do'])}{shown}{when}")
    return "; ".join(said)


def script(name: str, about: str, settings: dict[str, Any], steps: list[dict[str, Any]]
           ) -> dict[str, Any]:
    """A scenario file's content (``nemesis.script.Script``'s fields)."""
    return {"name": name, "about": about, "settings": settings, "steps": steps}


def ddmin(units: int, reproduces: Callable[[tuple[int, ...]], bool]) -> tuple[int, ...]:
    """Delta debugging's minimising algorithm over unit indices ``0..units-1``: the
    1-minimal subset of them that still reproduces, given that all of them do.

    ``reproduces(candidate)`` (sorted unit indices) runs the candidate or answers from runs
    already made (so a search resumes from its directory by asking again). Subsets are tried
    as Zeller's ``ddmin`` tries them: each of ``n`` chunks, then each complement (none while
    ``n`` is 2: they are the chunks), then ``n`` doubled; the empty set is never tried."""
    current = tuple(range(units))
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        for chunk in chunks:
            if reproduces(chunk):
                current, n = chunk, 2
                break
        else:
            for chunk in chunks if n > 2 else ():
                rest = tuple(i for i in current if i not in chunk)
                if reproduces(rest):
                    current, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(current):
                    break
                n = min(len(current), 2 * n)
    return current


def _split(items: tuple[int, ...], n: int) -> list[tuple[int, ...]]:
    size, extra = divmod(len(items), n)
    out, at = [], 0
    for k in range(n):
        step = size + (1 if k < extra else 0)
        out.append(items[at:at + step])
        at += step
    return [c for c in out if c]


def decide(shown: int, ran: int, runs: int, need: int) -> bool | None:
    """Whether a candidate reproduces, from ``shown`` of the ``ran`` replays so far (of at
    most ``runs``), ``need`` of them having to show the outcome: True once ``need`` did,
    False once the rest cannot get there, else None (run another)."""
    if shown >= need:
        return True
    if shown + (runs - ran) < need:
        return False
    return None


def need_of(runs: int, need: int | None) -> int:
    """How many of ``runs`` replays must show the finding: ``need``, or a majority (2 of 3).
    Raises ``ShrinkError`` when it is not between 1 and ``runs``."""
    want = runs // 2 + 1 if need is None else need
    if not 1 <= want <= runs:
        raise ShrinkError(f"--need {want}: between 1 and --runs {runs}")
    return want
