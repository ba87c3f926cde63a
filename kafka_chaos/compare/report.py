"""What a comparison shows: one row per cell and one per run, read from each run's own
``results.json`` (so the table is what the cells' verdicts say), rendered as a terminal table,
``compare.csv`` (cells) and ``runs.csv`` (runs), ``junit.xml`` (a suite per cell, a test case
per repeat) and ``compare.html`` (self-contained, plotly inlined, links to each run's report).

Rates are per 10,000 acknowledged sends (``stats.acked_sends``), pooled over a cell's repeats:
``lost-write``, ``duplicate`` and ``reorder`` (``nonmonotonic-send`` plus
``int-nonmonotonic-send``: a producer's sends to a key landing out of order). Availability is
the share of attempted sends acknowledged, pooled; send latency (ms, invoke to ok completion
of ops that sent) is the median over repeats of each run's p50 and p99.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from kafka_chaos.compare.core import Comparison
from kafka_chaos.errors import ReportError
from kafka_chaos.verdict import RunVerdict

#: Anomaly rates shown per cell: name -> the anomalies counted in it.
RATES = {"lost-write": ("lost-write",), "duplicate": ("duplicate",),
         "reorder": ("nonmonotonic-send", "int-nonmonotonic-send")}
#: Run statuses: a verdict's kind (``verdict.banner``), or why there is none.
STATUSES = ("valid", "permitted", "violation", "unknown", "error", "pending")
_COLOURS = {"valid": "green", "permitted": "cyan", "violation": "red", "unknown": "yellow",
            "error": "yellow", "pending": "dim"}


@dataclasses.dataclass
class RunRow:
    """One run of a cell: ``status`` (``STATUSES``), ``exit_code`` (None: not run),
    ``counts`` (``RATES`` name -> anomalies found; None when a checker failed), ``acked_sends``
    (the analysis's count), ``sends``, ``acked``, ``unavailable_s`` and ``workload_s`` (the
    availability figures: attempted and acknowledged sends, seconds without an
    acknowledgement and of workload), ``ops_per_s`` (the rate the workload ran, which
    ``--rate`` asked for: ``runner``'s ``ops_per_s``),
    ``p50_ms``/``p99_ms`` (send latency), ``violations``/``permitted`` (anomaly names),
    ``error`` (why there is no verdict), ``report`` (``report.html`` relative to the
    comparison directory, None when absent), ``results`` (its ``results.json``, None without
    a verdict), ``config`` (the cell's run configuration) and ``no_chance`` (the rules of
    its configuration that allow lost writes whose event never happened in a run that lost
    none: ``RunVerdict.chances``)."""

    seed: int
    status: str
    exit_code: int | None = None
    counts: dict[str, int | None] = dataclasses.field(default_factory=dict)
    acked_sends: int = 0
    sends: int = 0
    acked: int = 0
    unavailable_s: float = 0.0
    workload_s: float = 0.0
    ops_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    violations: list[str] = dataclasses.field(default_factory=list)
    permitted: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None
    report: str | None = None
    results: RunVerdict | None = None
    config: dict[str, Any] | None = None
    no_chance: list[str] = dataclasses.field(default_factory=list)

    @property
    def shown(self) -> str:
        """``status`` as the tables write it: with ``(exit 1)`` when the run is valid yet
        exited 1 (``--fail-on any``, or a steady-state limit broken)."""
        failed = self.exit_code == 1 and self.status in ("valid", "permitted")
        return f"{self.status} (exit 1)" if failed else self.status


@dataclasses.dataclass
class CellRow:
    """One cell: its manifest entry (``id``, ``label``, ``settings``), its ``runs`` (one per
    seed, pending ones included) and ``skipped`` (why the cell cannot run, else None)."""

    id: str
    label: str
    settings: dict[str, str]
    runs: list[RunRow]
    skipped: str | None = None

    def judged(self) -> list[RunRow]:
        """The runs with a verdict (``results.json``)."""
        return [r for r in self.runs if r.results is not None]

    @property
    def acked_sends(self) -> int:
        """Acknowledged sends of the judged runs together."""
        return sum(r.acked_sends for r in self.judged())

    def rate(self, name: str) -> float | None:
        """``RATES[name]`` per 10,000 acknowledged sends over the judged runs; None when no
        run was judged, none acknowledged a send, or a checker failed."""
        runs = self.judged()
        counts = [r.counts.get(name) for r in runs]
        if not runs or None in counts or not self.acked_sends:
            return None
        return round(1e4 * sum(counts) / self.acked_sends, 3)

    @property
    def availability_pct(self) -> float | None:
        """Acknowledged over attempted sends (%), over the judged runs."""
        sends = sum(r.sends for r in self.judged())
        return round(100 * sum(r.acked for r in self.judged()) / sends, 3) if sends else None

    @property
    def unavailable_pct(self) -> float | None:
        """Share of the judged runs' workload time with no acknowledgement for 1 s or more
        (%): a cell can acknowledge 99 % of its sends and stand still half the time."""
        span = sum(r.workload_s for r in self.judged())
        return round(100 * sum(r.unavailable_s for r in self.judged()) / span, 3) if span \
            else None

    @property
    def ops_per_s(self) -> float | None:
        """The mean rate the judged runs' workloads ran (ops/s): cells that ran at other rates
        than asked compare the rates too."""
        values = [r.ops_per_s for r in self.judged() if r.ops_per_s is not None]
        return round(statistics.fmean(values), 1) if values else None

    def no_chance(self) -> str:
        """The rules whose event never happened, with in how many judged runs: e.g.
        ``acks-below-all 2/2`` (the cell's "0 lost writes" says nothing of them there)."""
        runs = self.judged()
        names = sorted({n for r in runs for n in r.no_chance})
        return ", ".join(f"{n} {sum(n in r.no_chance for r in runs)}/{len(runs)}"
                         for n in names)

    def latency_ms(self, which: str) -> float | None:
        """Median over the judged runs of their ``p50`` or ``p99`` send latency (ms)."""
        values = [getattr(r, f"{which}_ms") for r in self.judged()]
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 3) if values else None


def rows(comparison: Comparison) -> list[CellRow]:
    """The comparison's cells in matrix order, each with a ``RunRow`` per seed."""
    out = []
    for cell in comparison.cells:
        runs = [] if "skipped" in cell else [run_row(comparison, cell, seed)
                                             for seed in comparison.seeds]
        out.append(CellRow(cell["id"], cell["label"], cell["settings"], runs,
                           cell.get("skipped")))
    return out


def run_row(comparison: Comparison, cell: dict[str, Any], seed: int) -> RunRow:
    """The ``RunRow`` of ``cell`` with ``seed``, from its run directory."""
    done = comparison.manifest["done"].get(comparison.run_id(cell, seed))
    run_dir = comparison.run_dir(cell, seed)
    if done is None:
        return RunRow(seed, "pending")
    try:
        results = RunVerdict.load(run_dir)
    except ReportError as exc:
        return RunRow(seed, "error", done["exit_code"], error=done.get("error") or str(exc))
    counts: dict[str, int | None] = {}
    for name, members in RATES.items():
        found = [results.count(m) for m in members]
        counts[name] = None if None in found else sum(found)
    availability = results.availability
    latency = availability.get("send_latency_ms") or {}
    report = run_dir / "report.html"
    no_chance = [rule for rule, n in results.chances.items()
                 if n == 0 and counts.get("lost-write") == 0]
    return RunRow(
        seed, results.banner()["kind"], done["exit_code"], counts,
        acked_sends=results.stats.get("acked_sends") or 0,
        sends=availability.get("sends") or 0, acked=availability.get("acked") or 0,
        unavailable_s=availability.get("unavailable_s") or 0.0,
        workload_s=availability.get("workload_s") or 0.0,
        ops_per_s=results.run.get("ops_per_s"),
        p50_ms=latency.get("p50"), p99_ms=latency.get("p99"),
        violations=list(results.violations),
        permitted=list(results.permitted), error=done.get("error"),
        report=str(report.relative_to(comparison.dir)) if report.is_file() else None,
        results=results, config=cell.get("config"), no_chance=no_chance)


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render(cells: list[CellRow], comparison: Comparison, console: Console) -> None:
    """Print the comparison, a block per cell, made for an 80-column CI log (a table of a
    dozen columns cut every cell there; ``summary.md``, ``compare.csv`` and ``compare.html``
    hold the table): the cell's verdict per repeat, then a line per figure."""
    fail_on = comparison.manifest["fail_on"]
    console.print(f"Comparison {comparison.dir.name}: {len(comparison.seeds)} repeat(s) per "
                  f"cell, seeds {', '.join(map(str, comparison.seeds))}, --fail-on {fail_on}")
    for cell in cells:
        console.print()
        console.print(f"[bold]{escape(cell.label)}[/]")
        if cell.skipped:
            console.print(f"  [dim]skipped: {escape(cell.skipped)}[/]")
            continue
        verdicts = " ".join(f"[{_COLOURS[r.status]}]{r.shown}[/]" for r in cell.runs)
        lines = [("verdicts", verdicts), ("acked sends", f"{cell.acked_sends:,}"),
                 ("ops/s ran", _num(cell.ops_per_s, 1)),
                 *((f"{n} /10k", _num(cell.rate(n))) for n in RATES),
                 ("acked %", _num(cell.availability_pct)),
                 ("no ack, time %", _num(cell.unavailable_pct)),
                 ("send p50/p99 ms", f"{_num(cell.latency_ms('p50'), 1)} / "
                                     f"{_num(cell.latency_ms('p99'), 1)}")]
        if cell.no_chance():
            lines.append(("no chance", cell.no_chance() + " (the loss's event never happened)"))
        width = max(len(heading) for heading, _ in lines)
        for heading, value in lines:
            console.print(f"  {heading:<{width}}  {value}")


def write_csv(comparison: Comparison, cells: list[CellRow]) -> tuple[Path, Path]:
    """Write ``compare.csv`` (a row per cell, a column per matrix setting) and ``runs.csv``
    (a row per run); returns both paths."""
    settings = [d["label"] for d in comparison.manifest["matrix"]]
    fields = [d["setting"] for d in comparison.manifest["matrix"]]
    cell_path, run_path = comparison.dir / "compare.csv", comparison.dir / "runs.csv"
    with cell_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["cell", *settings, "runs", "verdicts", "acked_sends",
                    *(f"{n}_per_10k" for n in RATES), "availability_pct", "unavailable_pct",
                    "send_p50_ms",
                    "send_p99_ms", "skipped", "no_chance", "ops_per_s"])
        for cell in cells:
            w.writerow([cell.label, *(cell.settings[f] for f in fields), len(cell.judged()),
                        " ".join(r.status for r in cell.runs), cell.acked_sends,
                        *(_cell(cell.rate(n)) for n in RATES), _cell(cell.availability_pct),
                        _cell(cell.unavailable_pct), _cell(cell.latency_ms("p50")),
                        _cell(cell.latency_ms("p99")),
                        cell.skipped or "", cell.no_chance(), _cell(cell.ops_per_s)])
    with run_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["cell", "seed", "verdict", "exit_code", "acked_sends", *RATES, "sends",
                    "acked", "send_p50_ms", "send_p99_ms", "violations", "permitted", "error",
                    "report", "no_chance", "ops_per_s"])
        for cell in cells:
            for r in cell.runs:
                w.writerow([cell.label, r.seed, r.status, _cell(r.exit_code), r.acked_sends,
                            *(_cell(r.counts.get(n)) for n in RATES), r.sends, r.acked,
                            _cell(r.p50_ms), _cell(r.p99_ms), " ".join(r.violations),
                            " ".join(r.permitted), r.error or "", r.report or "",
                            " ".join(r.no_chance), _cell(r.ops_per_s)])
    return cell_path, run_path


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def write_junit(comparison: Comparison, cells: list[CellRow]) -> Path:
    """Write ``junit.xml``: a suite per cell (its settings and configuration as properties),
    a test case per repeat as ``junit.testcase`` makes it; a run without a verdict is an
    error, a run not yet done is skipped."""
    from junitparser import Error, Skipped, TestCase

    from kafka_chaos.report import junit

    suites = []
    for cell in cells:
        if cell.skipped:
            continue
        cases = []
        for r in cell.runs:
            name = f"{cell.label} seed={r.seed}"
            if r.results is not None:
                cases.append(junit.testcase(r.results, r.config, name))
                continue
            case = TestCase(name, classname=junit.SUITE)
            case.result = [Skipped("not run yet: kafka-chaos compare --resume "
                                   f"{comparison.dir}") if r.status == "pending"
                           else Error(r.error or "no verdict", "unknown")]
            cases.append(case)
        first = next((r for r in cell.runs if r.results is not None), None)
        props = junit.properties(first.results if first else None, cell.runs[0].config)
        props.pop("seed", None)
        props.pop("valid", None)
        props.update({f"matrix.{k}": v for k, v in cell.settings.items()})
        suites.append(junit.suite(f"{junit.SUITE} {cell.label}", props, cases))
    path = comparison.dir / "junit.xml"
    tmp = path.with_suffix(".xml.tmp")
    junit.document(suites).write(str(tmp), pretty=True)
    tmp.replace(path)
    return path
