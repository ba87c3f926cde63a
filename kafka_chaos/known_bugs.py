"""The known-bug matrix (``kafka-chaos known-bugs``): each bug of the catalogue
(``catalogue.bugs``) run on each Kafka version with each client, several runs per cell, and
how often each cell showed the bug.

The runs' outcomes are kept in a *record* (``docs/known-bugs.json``), one entry per cell and
seed, added as each run is judged: the record is what the matrix has measured, across as many
sessions as it takes (a command run again runs only the seeds its cells lack), and
``docs/known-bugs.md`` is drawn from it alone (``render``). A record entry::

    {"seed": 1, "date": "2026-12-01", "verdict": "violation", "shown": true,
     "seconds": 181.4, "client": "confluent-kafka 2.16.1"}

``shown`` is ``bisect.Outcome.shown``'s answer (None: the run could not say, e.g. an unknown
verdict): a cell's rate counts only the runs that could say. An entry may also carry
``rejudged``: when and why its verdict is that of a later ``kafka-chaos analyze`` of the same
run rather than the one its run gave (``verdict_as_run``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from kafka_chaos.bisect import release
from kafka_chaos.catalogue.bugs import KNOWN_BUGS, KnownBug
from kafka_chaos.errors import CompareError

#: The record's format.
FORMAT = 1
#: The clients of the matrix's columns, in order.
CLIENTS = ("librdkafka", "java")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell: a bug on a Kafka version with a client."""

    bug: KnownBug
    kafka: str
    client: str

    @property
    def key(self) -> str:
        """``<bug>/<kafka version>/<client>``: its key in the record."""
        return f"{self.bug.name}/{self.kafka}/{self.client}"


def bugs_named(text: str | None) -> list[KnownBug]:
    """The catalogue's bugs a ``--bugs`` text names (all when None), in catalogue order.
    Raises ``ValueError`` naming an unknown one and the known ones."""
    if text is None:
        return list(KNOWN_BUGS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {b.name: b for b in KNOWN_BUGS}
    for name in names:
        if name not in known:
            raise ValueError(f"--bugs {text}: {name!r} is no known bug; choose among "
                             f"{', '.join(known)}")
    return [b for b in KNOWN_BUGS if b.name in names]


def newest_patches(served: list[str], since: str = "3.9.0") -> list[str]:
    """The newest patch release of each minor line of ``served`` from ``since`` on, oldest
    first: the default columns (``["3.9.1", "4.0.1", ...]``). Versions that are no
    ``MAJOR.MINOR.PATCH`` release (release candidates) are left out."""
    newest: dict[tuple[int, int], tuple[int, int, int]] = {}
    for version in served:
        try:
            r = release(version)
        except ValueError:
            continue
        if r >= release(since) and r > newest.get(r[:2], (-1, -1, -1)):
            newest[r[:2]] = r
    return [".".join(map(str, r)) for r in sorted(newest.values())]


def cells(bugs: list[KnownBug], versions: list[str], clients: list[str]) -> list[Cell]:
    """Every cell, in the order they run: Kafka version by version as given, each bug,
    each client (so a partial matrix holds whole versions)."""
    return [Cell(b, v, c) for v in versions for b in bugs for c in clients]


def columns(record: dict[str, Any], versions: list[str]) -> list[str]:
    """The Kafka versions a table shows, oldest first: ``versions`` and every other one
    ``record`` holds a run of, so that running part of the matrix (``--kafka-versions``)
    keeps the rest of its published table. Raises ``ValueError`` naming a version that is
    no release (``bisect.release``), e.g. in a record edited by hand."""
    held = {key.split("/")[1] for key in record["cells"]}
    return sorted(set(versions) | held, key=release)


def load(path: Path) -> dict[str, Any]:
    """The record in ``path`` (an empty one when the file does not exist). Raises
    ``CompareError`` naming the file when it is no record."""
    try:
        record = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {"format": FORMAT, "cells": {}}
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: not a known-bug record ({exc})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(
            record.get("cells"), dict):
        raise CompareError(f"{path}: not a known-bug record of format {FORMAT}")
    return record


def save(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` atomically (a crash leaves the old one whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def missing(record: dict[str, Any], cell: Cell, seeds: list[int]) -> list[int]:
    """The ``seeds`` the record holds no run of for ``cell``."""
    have = {r["seed"] for r in record["cells"].get(cell.key, [])}
    return [s for s in seeds if s not in have]


def add(record: dict[str, Any], cell: Cell, entry: dict[str, Any]) -> None:
    """Put one run's ``entry`` in the record, replacing a run of the same seed."""
    runs = [r for r in record["cells"].get(cell.key, []) if r["seed"] != entry["seed"]]
    record["cells"][cell.key] = sorted(runs + [entry], key=lambda r: r["seed"])


def tally(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"runs", "judged", "shown", "rate" (None without a judged run), "verdicts" (each
    verdict word's count), "rejudged" (how many verdicts are a later analysis's), "dates"
    [first, last], "clients" (the client releases run), "seconds"}`` of one cell's
    record."""
    judged = [r for r in runs if r.get("shown") is not None]
    shown = sum(1 for r in judged if r["shown"])
    dates = sorted(r["date"] for r in runs)
    verdicts: dict[str, int] = {}
    for r in runs:
        verdicts[str(r.get("verdict"))] = verdicts.get(str(r.get("verdict")), 0) + 1
    return {"runs": len(runs), "judged": len(judged), "shown": shown,
            "rate": shown / len(judged) if judged else None,
            "verdicts": dict(sorted(verdicts.items())),
            "rejudged": sum(1 for r in runs if r.get("rejudged")),
            "dates": [dates[0], dates[-1]] if dates else [],
            "clients": sorted({r["client"] for r in runs if r.get("client")}),
            "seconds": sum(r.get("seconds", 0.0) for r in runs)}


def _mark(t: dict[str, Any]) -> str:
    if not t["runs"]:
        return "not run"
    verdicts = ", ".join(f"{n} {w}" for w, n in t["verdicts"].items()) + (
        " †" if t["rejudged"] else "")
    if t["rate"] is None:
        return f"undecided: none of {t['runs']} judged ({verdicts}; {t['dates'][-1]})"
    word = "**shown**" if t["shown"] else "not shown"
    return f"{word} {t['shown']}/{t['judged']} ({verdicts}; {t['dates'][-1]})"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def render(record: dict[str, Any], bugs: list[KnownBug], versions: list[str],
           clients: list[str], runs: int, command: str) -> str:
    """``docs/known-bugs.md`` drawn from ``record``: per bug its ticket, status and a table
    of Kafka versions by client (each cell: shown or not, in how many of its judged runs,
    and the date of its last run); then what the matrix has cost so far and what remains
    at ``runs`` runs per cell. ``command`` regenerates it."""
    all_cells = cells(bugs, versions, clients)
    tallies = {c.key: tally(record["cells"].get(c.key, [])) for c in all_cells}
    done = sum(min(t["runs"], runs) for t in tallies.values())
    seconds = sum(t["seconds"] for t in tallies.values())
    total_runs = sum(t["runs"] for t in tallies.values())
    lines = [
        "# Known bugs by version",
        "",
        "Each Kafka or client bug that a built-in scenario reproduces, run on each Kafka "
        "version with each client. A cell says whether the bug showed, in how many of the "
        "runs that could be judged, their verdicts, and the date of its last run. A bug "
        "shown once is there; one not shown in N runs is only not seen. Generated by:",
        "",
        f"    {command}",
        "",
        "from the record `docs/known-bugs.json` (one entry per run: seed, date, verdict, "
        "whether it showed the bug, duration, client release). Run again, the command runs "
        "only the seeds its cells lack. † marks a cell with a verdict from a later "
        "`kafka-chaos analyze` of the same run (the entry's `rejudged` says when and why; "
        "`verdict_as_run` keeps the first).",
        "",
    ]
    for bug in bugs:
        flags = " ".join(bug.args) + "".join(
            f" (broker: {k}={v})" for k, v in bug.broker)
        lines += [f"## `{bug.name}`: {bug.ticket}", "",
                  f"{bug.summary[:1].upper()}{bug.summary[1:]}.", "",
                  f"- run: `kafka-chaos run {flags}`",
                  f"- shown when a run's verdict has: `{bug.outcome}`",
                  f"- status: {bug.status}", "",
                  "| Kafka | " + " | ".join(clients) + " |",
                  "|---|" + "---|" * len(clients)]
        for version in versions:
            row = [_mark(tallies[Cell(bug, version, c).key]) for c in clients]
            lines.append(f"| {version} | " + " | ".join(row) + " |")
        releases = sorted({r for c in clients for v in versions
                           for r in tallies[Cell(bug, v, c).key]["clients"]})
        if releases:
            lines += ["", f"Client releases run: {', '.join(releases)}."]
        lines.append("")
    want = len(all_cells) * runs
    lines += ["## What the matrix costs", "",
              f"{len(bugs)} bugs x {len(versions)} Kafka versions ({', '.join(versions)}) x "
              f"{len(clients)} clients = {len(all_cells)} cells, {runs} runs each: {want} runs.",
              f"The record holds {total_runs} runs, {done} of those {want}, which took "
              f"{_hours(seconds)} on the machine that ran them (their own durations: cluster "
              "up, scenario, final reads, analysis)."]
    if total_runs and done < want:
        mean = seconds / total_runs
        lines.append(f"At their mean ({mean / 60:.1f} min a run) the {want - done} runs left "
                     f"would take about {_hours(mean * (want - done))} more.")
    return "\n".join(lines + [""])
