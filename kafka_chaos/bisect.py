"""``kafka-chaos bisect``: which released versions show an outcome (a finding, a verdict), on
one axis (Kafka's version, or the Java client's), with several runs per version, since a
fault schedule finds a bug at a rate, not every time.

The runs are a comparison (``compare.core``) over one setting, whose cells are the versions
in release order, all with the same seeds: a bisect directory is a comparison directory
(``compare.json`` holds the bisect's own entry, ``"bisect"``, beside the cells), so
``--resume`` and the per-run outputs are the comparison's. Which cells run is this module's
choice (``next_version``): both ends first, then, like ``git bisect``, the middle of the
first span whose ends differ, until the versions where the outcome changes are adjacent; or
every version (``exhaustive``).

A version *shows* the outcome when at least ``min_rate`` of its judged runs showed it (by
default any one run: a finding seen once is there; one not seen in N runs is only not
seen). A run that reached no verdict it could be judged by (an error, an interrupt, an
unknown verdict where the outcome needs a known one) is counted apart and never as absence.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from kafka_chaos.catalogue.anomalies import CATALOGUE

#: The settings a bisect may walk, by ``--axis``.
AXES = {"kafka": "kafka_version", "client": "client_version"}
VERDICTS = ("violation", "unknown", "valid")
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a run must show: a verdict word (``VERDICTS``), an anomaly found at all
    (``anomaly:NAME``, permitted or not) or one the verdict counts as a violation
    (``violation:NAME``). ``parse`` makes one from its text."""

    kind: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "Outcome":
        """``"violation"``, ``"anomaly:lost-write"``, ... Raises ``ValueError`` naming the
        text and what is accepted."""
        kind, _, name = text.strip().partition(":")
        if not name and kind in VERDICTS:
            return cls("verdict", kind)
        names = {a.name for a in CATALOGUE}
        if kind in ("anomaly", "violation") and name in names:
            return cls(kind, name)
        if kind in ("anomaly", "violation"):
            raise ValueError(f"--outcome {text!r}: {name!r} is no anomaly name (e.g. "
                             "lost-write, duplicate, hanging-transaction)")
        raise ValueError(f"--outcome {text!r}: one of {', '.join(VERDICTS)}, anomaly:NAME "
                         "(found, permitted or not) or violation:NAME (found and forbidden)")

    def __str__(self) -> str:
        return self.name if self.kind == "verdict" else f"{self.kind}:{self.name}"

    def shown(self, results: dict[str, Any]) -> bool | None:
        """Whether the run whose ``results.json`` is ``results`` shows this outcome; None
        when its verdict cannot say (unknown, where a known verdict is needed: a finding
        not found in a run that could not be judged is not absent)."""
        word = results.get("verdict")
        if self.kind == "verdict":
            hit = word == self.name
        elif self.kind == "anomaly":
            hit = ((results.get("anomalies") or {}).get(self.name) or {}).get("count", 0) > 0
        else:
            hit = self.name in (results.get("violations") or [])
        if hit:
            return True
        return None if word == "unknown" and self.name != "unknown" else False


def release(version: str) -> tuple[int, int, int]:
    """``"3.9.1"`` -> ``(3, 9, 1)``. Raises ``ValueError`` for anything but
    ``MAJOR.MINOR.PATCH``."""
    if not (m := _RELEASE.fullmatch(version.strip())):
        raise ValueError(f"{version!r} is no release version (MAJOR.MINOR.PATCH)")
    return int(m[1]), int(m[2]), int(m[3])


def versions(spec: str, served: list[str] | None = None) -> list[str]:
    """The versions a ``--versions`` text names, oldest first: a list (``3.9.1,4.4.0``), or
    a range of ``served`` (``3.9.0..4.4.0``: every served release between, both included).
    Raises ``ValueError`` naming what is wrong (fewer than two versions, a bad one, a range
    without the served list, a range end that is not served)."""
    spec = spec.strip()
    if ".." in spec.replace("...", "") and "," not in spec:
        lo, _, hi = spec.partition("..")
        if served is None:
            raise ValueError(f"--versions {spec}: a range needs the served versions")
        for end in (lo, hi):
            if end not in served:
                raise ValueError(f"--versions {spec}: {end} is not a served release")
        chosen = [v for v in served if release(lo) <= release(v) <= release(hi)]
    else:
        chosen = [v.strip() for v in spec.split(",") if v.strip()]
    ordered = sorted(set(chosen), key=release)
    if len(ordered) < 2:
        raise ValueError(f"--versions {spec}: a bisect needs two versions or more")
    return ordered


@dataclasses.dataclass(frozen=True)
class Tally:
    """One version's runs: ``runs`` ended, ``shown`` showed the outcome, ``judged`` could
    say (``shown`` among them), and each verdict word's count."""

    version: str
    runs: int = 0
    shown: int = 0
    judged: int = 0
    verdicts: tuple[tuple[str, int], ...] = ()

    @property
    def rate(self) -> float | None:
        """``shown / judged``; None without a judged run."""
        return self.shown / self.judged if self.judged else None

    def shows(self, min_rate: float) -> bool | None:
        """Whether the version shows the outcome (``rate`` at least ``min_rate``, and at
        least one run; ``min_rate`` 0 means any one), None without a judged run."""
        if self.rate is None:
            return None
        return self.shown > 0 and self.rate >= min_rate


def tally(version: str, results: list[dict[str, Any] | None], outcome: Outcome) -> Tally:
    """The ``Tally`` of ``version`` from its runs' ``results.json`` (None: a run that ended
    without one: an error)."""
    seen = [outcome.shown(r) for r in results if r is not None]
    words: dict[str, int] = {}
    for r in results:
        word = "error" if r is None else str(r.get("verdict"))
        words[word] = words.get(word, 0) + 1
    return Tally(version, len(results), sum(1 for s in seen if s),
                 sum(1 for s in seen if s is not None), tuple(sorted(words.items())))


def next_version(order: list[str], classes: dict[str, bool | None], exhaustive: bool
                 ) -> str | None:
    """The next version of ``order`` (oldest first) to run, given the ``classes`` of those
    run (``Tally.shows``); None when the search is over. Exhaustive: each in turn. Else both
    ends, then the middle of the oldest span between two run versions whose classes differ
    (with none run inside it), until every such span is two neighbours; a version that
    could not be judged (None) ends the search there (``result`` says so)."""
    pending = [v for v in order if v not in classes]
    if exhaustive:
        return pending[0] if pending else None
    for end in (order[0], order[-1]):
        if end not in classes:
            return end
    if None in classes.values():
        return None
    done = [i for i, v in enumerate(order) if v in classes]
    for a, b in zip(done, done[1:]):
        if classes[order[a]] != classes[order[b]] and b - a > 1:
            return order[(a + b) // 2]
    return None


def boundaries(order: list[str], classes: dict[str, bool | None]
               ) -> list[tuple[str, str]]:
    """``(last version before, first version after)`` of each change of class between
    neighbouring judged versions of ``order``."""
    run = [v for v in order if classes.get(v) is not None]
    return [(a, b) for a, b in zip(run, run[1:]) if classes[a] != classes[b]]


def result(order: list[str], tallies: dict[str, Tally], min_rate: float, exhaustive: bool,
           outcome: Outcome) -> dict[str, Any]:
    """The bisect's answer as JSON: ``versions`` (each run one's tally, rate and class),
    ``changes`` (``boundaries``: ``{"before", "after", "from", "to"}``), ``done`` (the
    search is over), ``undecided`` (versions with no judged run) and ``summary``, one
    sentence."""
    classes = {v: t.shows(min_rate) for v, t in tallies.items()}
    changes = [{"before": a, "after": b, "from": classes[a], "to": classes[b]}
               for a, b in boundaries(order, classes)]
    undecided = [v for v in order if v in classes and classes[v] is None]
    done = next_version(order, classes, exhaustive) is None
    rows = [{"version": v, "runs": t.runs, "shown": t.shown, "judged": t.judged,
             "rate": t.rate, "shows": classes[v], "verdicts": dict(t.verdicts)}
            for v in order if (t := tallies.get(v)) is not None]
    if undecided:
        summary = (f"no run of {', '.join(undecided)} could be judged for {outcome}: the "
                   "search stops there")
    elif not done:
        summary = "not finished (--resume DIR goes on)"
    elif not changes:
        word = "shows" if classes[order[0]] else "does not show"
        summary = f"every version run {word} {outcome}"
    else:
        summary = "; ".join(
            f"{outcome} {'appears' if c['to'] else 'disappears'} between {c['before']} and "
            f"{c['after']}" for c in changes)
    return {"outcome": str(outcome), "min_rate": min_rate, "exhaustive": exhaustive,
            "order": order, "versions": rows, "changes": changes, "undecided": undecided,
            "done": done, "summary": summary}
