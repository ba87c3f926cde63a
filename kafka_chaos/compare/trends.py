"""``kafka-chaos history RUNS_DIR``: verdicts and anomaly rates across stored runs, for the
nightly job that keeps its run directories (``docs/nightly.md``).

Every ``results.json`` under ``RUNS_DIR`` is one run (comparison cells included). Runs are
grouped by configuration: the run configuration without its seed, Spark master and
duration, so a nightly plan whose seed changes every night stays one group. Per group:
the verdict of each run, oldest first, as one character (``.`` valid, ``p`` valid with
permitted anomalies, ``X`` violation, ``?`` unknown), the last verdict, and the trend of the
rates ``compare.report`` uses (per 10,000 acknowledged sends) and of availability.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from kafka_chaos.compare.report import RATES
from kafka_chaos.config import fingerprint, label
from kafka_chaos.errors import ReportError
from kafka_chaos.verdict import RunVerdict

#: One character per verdict kind, oldest run first.
MARKS = {"valid": ".", "permitted": "p", "violation": "X", "unknown": "?"}
@dataclasses.dataclass
class RunPoint:
    """One stored run: ``path`` (its directory), ``started`` (UTC), ``group`` (configuration
    key), ``label`` (its settings in short), ``kind`` (``MARKS`` key), ``violations``,
    ``rates`` (``RATES`` name -> per 10k acknowledged sends, None: unknown),
    ``availability_pct`` (% of sends acknowledged) and ``no_ack_pct`` (% of the workload's
    time with no acknowledged send), both ``RunVerdict.availability_figures`` (None when not
    recorded)."""

    path: Path
    started: datetime
    group: str
    label: str
    kind: str
    violations: list[str]
    rates: dict[str, float | None]
    availability_pct: float | None
    no_ack_pct: float | None = None


def scan(root: Path) -> list[RunPoint]:
    """Every run under ``root`` with a readable ``results.json``, oldest first. Unreadable
    ones are skipped (a run cut short has none)."""
    points = []
    for path in sorted(Path(root).rglob("results.json")):
        try:
            results = RunVerdict.load(path.parent)
        except ReportError:
            continue
        config = _config(path.parent)
        acked = results.stats.get("acked_sends") or 0
        rates: dict[str, float | None] = {}
        for name, members in RATES.items():
            counts = [results.count(m) for m in members]
            rates[name] = (None if None in counts or not acked
                           else round(1e4 * sum(counts) / acked, 3))
        figures = results.availability_figures()
        points.append(RunPoint(path.parent, _started(path.parent, results),
                               fingerprint(config), label(config), results.banner()["kind"],
                               list(results.violations), rates, figures.get("acked_pct"),
                               figures.get("no_ack_pct")))
    return sorted(points, key=lambda p: (p.started, str(p.path)))


def _config(run_dir: Path) -> dict[str, Any]:
    """The run's ``config.json``, else its history header's configuration, else ``{}``."""
    from kafka_chaos.history import HistoryError, read_header

    try:
        return json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        pass
    try:
        return (read_header(run_dir / "history.jsonl") or {}).get("config") or {}
    except (OSError, HistoryError):
        return {}


def _started(run_dir: Path, results: RunVerdict) -> datetime:
    """When the run started: its facts' ``started``, else its directory's name (a run
    directory is named by its UTC start), else ``history.jsonl``'s modification time."""
    text = results.run.get("started")
    for value, fmt in ((text, None), (run_dir.name[:15], "%Y%m%dT%H%M%S")):
        try:
            parsed = (datetime.fromisoformat(value) if fmt is None
                      else datetime.strptime(value, fmt).replace(tzinfo=timezone.utc))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
        except (TypeError, ValueError):
            continue
    for name in ("history.jsonl", "results.json"):
        try:
            return datetime.fromtimestamp((run_dir / name).stat().st_mtime, timezone.utc)
        except OSError:
            continue
    return datetime.fromtimestamp(0, timezone.utc)


@dataclasses.dataclass
class Trend:
    """The runs of one configuration, oldest first."""

    group: str
    label: str
    runs: list[RunPoint]

    @property
    def marks(self) -> str:
        """One ``MARKS`` character per run, oldest first."""
        return "".join(MARKS.get(p.kind, "?") for p in self.runs)

    def series(self, name: str) -> list[float]:
        """The known values of rate ``name`` (or ``availability``, ``no_ack``), oldest
        first."""
        if name == "availability":
            values = [p.availability_pct for p in self.runs]
        elif name == "no_ack":
            values = [p.no_ack_pct for p in self.runs]
        else:
            values = [p.rates.get(name) for p in self.runs]
        return [v for v in values if v is not None]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: group, label, marks, runs (path, started, kind, violations, rates,
        availability_pct, no_ack_pct) and per series first/last/mean."""
        out: dict[str, Any] = {"group": self.group, "label": self.label, "marks": self.marks,
                               "runs": [{"path": str(p.path), "started": p.started.isoformat(),
                                         "verdict": p.kind, "violations": p.violations,
                                         "rates_per_10k": p.rates,
                                         "availability_pct": p.availability_pct,
                                         "no_ack_pct": p.no_ack_pct}
                                        for p in self.runs]}
        for name in (*RATES, "availability", "no_ack"):
            xs = self.series(name)
            out[name] = ({"first": xs[0], "last": xs[-1], "mean": round(sum(xs) / len(xs), 3)}
                         if xs else None)
        return out


def trends(points: list[RunPoint], last: int = 0) -> list[Trend]:
    """``points`` grouped by configuration (groups ordered by their newest run, newest
    last), each keeping its ``last`` runs (0: all)."""
    groups: dict[str, Trend] = {}
    for p in points:
        groups.setdefault(p.group, Trend(p.group, p.label, [])).runs.append(p)
    out = sorted(groups.values(), key=lambda t: t.runs[-1].started)
    if last:
        for t in out:
            t.runs = t.runs[-last:]
    return out


def _trend(xs: list[float], digits: int = 2) -> str:
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return f"{xs[0]:.{digits}f}"
    return f"{xs[0]:.{digits}f} → {xs[-1]:.{digits}f} (mean {sum(xs) / len(xs):.{digits}f})"


def render(root: Path, groups: list[Trend], console: Console, runs: bool = False) -> None:
    """Print a block per configuration, made for an 80-column CI log (a table of nine
    columns cut every cell there): its name and fingerprint, its runs' verdicts oldest first
    and the last one, then one line per rate and availability figure with its trend (first
    → last, mean); with ``runs``, a line per run after it."""
    total = sum(len(t.runs) for t in groups)
    console.print(f"Verdicts under {escape(str(root))}: {total} run(s), {len(groups)} "
                  "configuration(s); marks oldest first (. valid, p permitted, X violation, "
                  "? unknown)")
    colour = {"valid": "green", "permitted": "cyan", "violation": "red", "unknown": "yellow"}
    figures = [*((f"{n} /10k", n, 2) for n in RATES), ("acked %", "availability", 2),
               ("no ack, time %", "no_ack", 1)]
    width = max(len(heading) for heading, _, _ in figures)
    for t in groups:
        last = t.runs[-1]
        console.print()
        console.print(f"[bold]{escape(t.label)}[/] [dim]config {t.group}[/]")
        console.print(f"  {'runs':<{width}}  {len(t.runs)}: {t.marks}  last "
                      f"[{colour[last.kind]}]{last.kind}[/] {last.started:%Y-%m-%d %H:%M}")
        for heading, name, digits in figures:
            console.print(f"  {heading:<{width}}  {_trend(t.series(name), digits)}")
        if runs:
            for p in t.runs:
                console.print(f"  {p.started:%Y-%m-%d %H:%M:%S} {MARKS[p.kind]} {p.kind:<9} "
                              f"{escape(str(p.path))}"
                              + (f" violations: {', '.join(p.violations)}" if p.violations
                                 else ""))
