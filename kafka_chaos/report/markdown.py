"""The verdict as Markdown (GitHub-flavoured tables), for CI job summaries
(``$GITHUB_STEP_SUMMARY``), pull-request comments and chat: a run's ``summary.md``, the
trends of ``kafka-chaos history --format markdown`` and a comparison's ``summary.md``.

Renderers only, from the data the other renderers read (``verdict.RunVerdict``, ``trends.Trend``,
``compare.report.CellRow``); cells are not cut to a terminal's width (an example's
explanation to 200 characters) and nothing is drawn with box characters.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from kafka_chaos.analysis.explain import explain
from kafka_chaos.report.terminal import clip
from kafka_chaos import steady
from kafka_chaos.verdict import AVAILABILITY, RunVerdict


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table: ``header`` and one line per row; ``|`` and line breaks in cells are
    escaped, None is empty."""
    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def run_summary(results: RunVerdict, title: str = "kafka-chaos") -> str:
    """A run's verdict: its word and headline (the faults that never ran included), a table
    of the anomalies found (count, how they were judged, rule, first example), the reasons
    it is unknown, and the run's figures."""
    shown = results.banner()
    out = [f"## {title}: {results.verdict}\n", f"{shown['headline']}\n"]
    found = [(n, a) for n, a in results.anomalies.items() if a.get("count")]
    if found:
        out.append(table(("anomaly", "count", "judged", "rule", "first example"), (
            (name, a["count"], _outcomes(a), a.get("rule"),
             clip(explain(name, a["examples"][0]), 200) if a.get("examples") else "")
            for name, a in found)))
    for why, names in results.not_applicable_by_reason().items():
        out.append(f"Not applicable, {why}: {', '.join(names)}\n")
    errors = [n for n, a in results.anomalies.items() if a.get("count") is None]
    if errors:
        out.append(f"Checkers that failed: {', '.join(errors)}\n")
    for reason in shown["reasons"]:
        out.append(f"- unknown: {reason}")
    if shown["reasons"]:
        out.append("")
    stats, avail = results.stats, results.availability_shown()
    if stats:
        out.append(table(("client ops", "acknowledged sends", "records read", "analysis s"),
                         [(results.client_ops(), stats.get("acked_sends"),
                           stats.get("records_read"), results.analysis_time_s)]))
    if avail:
        out.append(table(tuple(AVAILABILITY.values()), [[avail[k] for k in AVAILABILITY]]))
    if line := steady.line(results.steady_state):
        out.append(f"Steady state: {line}\n")
    return "\n".join(out)


def _outcomes(a: dict[str, Any]) -> str:
    outcomes = a.get("outcomes") or {}
    parts = [f"{n} {o}" for o, n in outcomes.items() if n]
    return ", ".join(parts) or ("permitted" if a.get("permitted") else "violation")


def trends_table(groups: Sequence[Any], rates: Sequence[str]) -> str:
    """``kafka-chaos history`` as one table: a row per configuration (``trends.Trend``) with
    its runs, verdict marks (oldest first), last verdict and the last values of the rates
    and the availability (``RunVerdict.availability_figures``)."""
    def last(xs: list[float], digits: int = 2) -> str:
        return f"{xs[-1]:.{digits}f}" if xs else ""

    return table(("configuration", "group", "runs", "verdicts", "last",
                  *(f"{n} /10k" for n in rates), "acked %", "no ack, time %"),
                 ((t.label, t.group, len(t.runs), f"`{t.marks}`", t.runs[-1].kind,
                   *(last(t.series(n)) for n in rates), last(t.series("availability")),
                   last(t.series("no_ack"), 1)) for t in groups))


def compare_table(cells: Sequence[Any], rates: Sequence[str]) -> str:
    """A comparison as one table: a row per cell (``compare.report.CellRow``)."""
    def num(x: float | None) -> str:
        return "" if x is None else f"{x:.2f}"

    return table(("cell", "verdicts", "acked sends", "ops/s ran",
                  *(f"{n} /10k" for n in rates), "acked %", "no ack, time %", "no chance"),
                 ((c.label, "skipped: " + c.skipped if c.skipped else
                   " ".join(r.shown for r in c.runs), c.acked_sends,
                   "" if c.ops_per_s is None else f"{c.ops_per_s:.1f}",
                   *(num(c.rate(n)) for n in rates), num(c.availability_pct),
                   num(c.unavailable_pct), c.no_chance()) for c in cells))
