"""The seeded scheduler that runs nemesis packages (Jepsen ``nemesis/combined``; the packages
themselves: ``kafka_chaos.catalogue.faults``), and the nemeses that perform them.

The scheduler alternates: wait ``interval_s``, start a random fault from the chosen packages,
wait ``interval_s``, end it.
Every nemesis op is recorded in the history as process ``"nemesis"``; ``finish()`` always
ends with every fault healed.
"""

from __future__ import annotations

import random
import threading
from typing import Any, Callable, Iterator

from kafka_chaos.catalogue.faults import PACKAGES, describe, parse_targets
from kafka_chaos.clusters.base import Partitionable, Pausable, Skewable
from kafka_chaos.history import NEMESIS, HistoryWriter, OpType
from kafka_chaos.nemesis.base import Composed, Nemesis
from kafka_chaos.nemesis.clock import ClockNemesis
from kafka_chaos.nemesis.disk import DiskNemesis
from kafka_chaos.nemesis.faults import PartitionNemesis, ProcessNemesis
from kafka_chaos.nemesis.files import FileNemesis
from kafka_chaos.nemesis.leaders import LeaderNemesis
from kafka_chaos.nemesis.membership import MembershipNemesis


def plan(rng: random.Random, packages: list[str], targets: dict[str, list],
         topic: str) -> Iterator[tuple[str, Any]]:
    """The endless schedule of nemesis invokes ``(f, value)`` the ``Scheduler`` runs, in order:
    a fault's start, then its stop (aimed where the start was for packages with
    ``stop_at_target``). Faults come in rounds, each of every package once in a shuffled
    order, so each fault asked for happens within the first ``len(packages)`` (a draw per
    fault could leave one out of a short run: ``--nemesis kill,partition`` for 60 s once drew
    three partitions and no kill). A pure function of ``rng``'s seed, so a run's recorded
    nemesis invokes can be checked against it."""
    while True:
        round_ = list(packages)
        rng.shuffle(round_)
        for name in round_:
            kind = PACKAGES[name]
            # one start f is no draw: the schedule of a seed stays what it was
            start = kind.start[0] if len(kind.start) == 1 else rng.choice(kind.start)
            value = {"target": rng.choice(targets[name]), "topic": topic, "partition": 0}
            yield start, value
            yield kind.stop, value if kind.stop_at_target else None


def schedule_rng(seed: int) -> random.Random:
    """The schedule's own random stream for run seed ``seed`` (the nodes nemeses pick depend
    on the cluster; drawing them from another stream cannot shift the schedule)."""
    return random.Random(random.Random(f"schedule-{seed}").randrange(2**32))


def unhealed(cluster, healed: dict[str, Any], proxy=None) -> list[str]:
    """What the final heal left behind, read back from the cluster, as sentences: each nemesis
    whose teardown raised (``Composed.teardown`` records ``"error: ..."``), each node whose
    process is not running or is paused, each iptables rule of ours still in place, each clock
    still skewed, each request fault still active in ``proxy`` (a ``KafkaProxy``). Empty
    when the heal is verified."""
    left = [f"{name}: {what}" for name, what in (healed or {}).items()
            if isinstance(what, str) and what.startswith("error: ")]
    if proxy is not None:
        left += [f"request fault {i} is still active in the proxy"
                 for i in proxy.active_faults()]
    left += [f"{n.name} is not running" for n in cluster.nodes if not cluster.is_running(n)]
    try:
        if isinstance(cluster, Pausable):
            left += [f"{n.name} is paused" for n in cluster.nodes if cluster.is_paused(n)]
        if isinstance(cluster, Partitionable):
            left += [f"rule left on {rule}" for rule in cluster.rules_left()]
        if isinstance(cluster, Skewable):
            offsets = {n.name: cluster.clock_offset(n) for n in cluster.nodes}
            left += [f"{name}'s clock is {s:+g} s off" for name, s in offsets.items() if s]
    except Exception as exc:  # what cannot be read back is not verified
        left.append(f"the heal could not be checked: {type(exc).__name__}: {exc}")
    return left


#: The nemesis that performs each package of the fault catalogue (one instance serves every
#: package it performs); the runner adds the two that need more than the cluster: the
#: unclean toggle (the run's topics) and the proxy's request faults.
PERFORMED_BY: dict[str, type[Nemesis]] = {
    # the disk heals before the processes: a broker a full disk halted starts only once free
    "disk": DiskNemesis,
    "kill": ProcessNemesis, "stop": ProcessNemesis, "pause": ProcessNemesis,
    "lose-unfsynced": ProcessNemesis, "roll": ProcessNemesis, "partition": PartitionNemesis,
    "loss": PartitionNemesis, "clock": ClockNemesis, "leader": LeaderNemesis,
    "file": FileNemesis, "rollback": FileNemesis, "membership": MembershipNemesis}
#: Packages whose stop another package's nemesis performs: a file fault's ``start``.
STOPPED_BY: dict[str, type[Nemesis]] = {"file": ProcessNemesis}


def build_nemesis(cluster, packages: list[str], rng: random.Random,
                  extra: tuple[Nemesis, ...] = ()) -> Composed:
    """One composed nemesis able to run ``packages`` (plus ``extra`` nemeses) on ``cluster``."""
    needed = {PERFORMED_BY[p] for p in packages if p in PERFORMED_BY}
    needed |= {STOPPED_BY[p] for p in packages if p in STOPPED_BY}
    # in one order whatever the packages' (the final heal's order: processes, then network)
    kinds = [kind for kind in dict.fromkeys(PERFORMED_BY.values()) if kind in needed]
    return Composed([*extra, *(kind(cluster, rng) for kind in kinds)])


class Scheduler:
    """Runs faults on a background thread until ``finish()``.

    Args:
        nemesis: the composed nemesis.
        history: where nemesis ops are recorded.
        packages: names from ``PACKAGES``.
        interval_s: seconds between fault start and stop, and between faults.
        rng: seeded source of the schedule's choices (fault, target): its own, so the nodes the
            nemeses pick cannot shift it, and one seed gives one sequence of invokes.
        targets: package -> the targets it draws from (``parse_targets``); defaults if None.
        topic: topic whose partition-0 leader the ``leader`` targets aim at.
        log: called with a one-line description of each completed nemesis op (for the user).
        after_op: called with ``f`` after each nemesis op is recorded (``heal-all`` included).
        before_op: called with ``f`` right before each nemesis op is invoked (``heal-all``
            included): the monitor samples the cluster, so an election the op causes lies
            after that sample began (``analysis.evidence``: an event permits only inside an
            anomaly's window, and a wider bracket is doubt).
    """

    def __init__(self, nemesis: Composed, history: HistoryWriter, packages: list[str],
                 interval_s: float, rng: random.Random, topic: str,
                 targets: dict[str, list] | None = None,
                 log: Callable[[str], None] = lambda message: None,
                 after_op: Callable[[str], Any] = lambda f: None,
                 before_op: Callable[[str], Any] = lambda f: None) -> None:
        self.log = log
        self.after_op = after_op
        self.before_op = before_op
        self.nemesis = nemesis
        for n in [nemesis, *getattr(nemesis, "nemeses", ())]:
            n.clock = history.now_ns
        self.history = history
        self.packages = packages
        self.targets = targets or parse_targets("", packages)
        self.interval_s = interval_s
        self.rng = rng
        self.topic = topic
        self._ran: set[str] = set()  # packages whose start op completed ok
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="nemesis")
        self._lock = threading.Lock()  # one nemesis op at a time, finish() included

    def start(self) -> None:
        """Start the fault thread (nothing to start when no package was chosen)."""
        if self.packages:
            self._thread.start()

    def run_op(self, f: str, value: Any) -> Any:
        """Invoke ``f`` now and record it; an exception completes the op as ``info`` (and a
        ``KeyboardInterrupt`` is re-raised once the op is completed, so the history never holds
        an open nemesis op that ``heal-all`` would collide with). Then ``after_op(f)`` runs
        (the monitor samples the cluster), as ``before_op(f)`` did before it."""
        with self._lock:
            self.before_op(f)
            self.history.append(NEMESIS, OpType.INVOKE, f, value)
            try:
                done = self.nemesis.invoke(f, value)
            except BaseException as exc:  # NemesisError, a backend error, Ctrl-C: indeterminate
                self.history.append(NEMESIS, OpType.INFO, f, value, f"{type(exc).__name__}: {exc}")
                if not isinstance(exc, Exception):
                    raise
                self.log(f"nemesis {f} failed: {exc}")
                done = None
            else:
                self.history.append(NEMESIS, OpType.OK, f, done)
                # the fault's shape (target) and what it did, as the report names it
                self.log(f"nemesis {describe(f, value, done, limit=160)}")
                self._ran.update(p for p in self.packages if f in PACKAGES[p].start)
            self.after_op(f)
            return done

    def not_run(self) -> list[str]:
        """The packages asked for whose start never completed ``ok`` (a run too short for a
        round of them, or a fault that raised every time): the verdict names them."""
        return [p for p in self.packages if p not in self._ran]

    def _loop(self) -> None:
        for f, value in plan(self.rng, self.packages, self.targets, self.topic):
            if self._stop.wait(self.interval_s):
                break
            self.run_op(f, value)

    def finish(self) -> Any:
        """Stop scheduling and heal everything (Jepsen's final generator). Never raises. An op
        in flight that waits for a condition before it acts is told to stop waiting
        (``Nemesis.end``): a run then ends at its time limit, not up to 45 s later (a
        lone-leader kill). A started rolling restart still runs to its end."""
        self._stop.set()
        self.nemesis.end()
        if self._thread.is_alive():
            self._thread.join(120)
        with self._lock:
            try:
                self.before_op("heal-all")
            except ValueError:
                pass  # the history was closed: healing matters more
            try:
                self.history.append(NEMESIS, OpType.INVOKE, "heal-all", None)
            except ValueError:
                pass  # history already closed (error path): healing matters more
            healed = self.nemesis.teardown()
            try:
                self.history.append(NEMESIS, OpType.OK, "heal-all", healed)
                self.after_op("heal-all")
            except ValueError:
                pass
        return healed
