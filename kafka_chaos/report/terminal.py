"""Verdict rendering for the terminal. The verdict itself (``verdict.RunVerdict``: the run's
facts judged, its word, banner and exit code, ``results.json``) is built before; this module
only renders it.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kafka_chaos.analysis.explain import explain, explain_evidence
from kafka_chaos import steady
from kafka_chaos.verdict import RunVerdict


def run_facts(run_dir: Path) -> dict:
    """The run facts of an earlier verdict in ``run_dir`` (its ``results.json`` ``run``
    section, else ``run.json``), so that re-analysing keeps seed, versions and timings."""
    for name, pick in (("results.json", lambda d: d.get("run")), ("run.json", lambda d: d)):
        try:
            facts = pick(json.loads((run_dir / name).read_text()))
        except (OSError, ValueError, AttributeError):
            continue
        if facts:
            return facts
    return {}


def verdict_cell(found: dict) -> str:
    """How an anomaly's findings were judged, for a table cell: ``permitted``, ``VIOLATION``,
    ``unexplained``, or their counts when they differ (``2 VIOLATION, 5 permitted``)."""
    outcomes = found.get("outcomes") or {}
    parts = [(n, o) for o, n in ((o, outcomes.get(o, 0)) for o in
                                 ("violation", "unexplained", "permitted")) if n]
    label = {"violation": "[bold red]VIOLATION[/]", "unexplained": "[yellow]unexplained[/]",
             "permitted": "[cyan]permitted[/]"}
    if len(parts) == 1:
        return label[parts[0][1]]
    if not parts:
        return "[cyan]permitted[/]" if found.get("permitted") else "[bold red]VIOLATION[/]"
    return ", ".join(f"{n} {label[o]}" for n, o in parts)


def no_chance(result: RunVerdict) -> list[str]:
    """A sentence for each rule of the configuration under which lost writes are possible
    whose event never happened in a run that lost none (``RunVerdict.chances``): its "0 lost
    writes" says nothing of that promise."""
    from kafka_chaos.analysis.promises import RULES

    if result.count("lost-write") != 0:
        return []
    mechanisms = {r.name: r.mechanism for r in RULES}
    return [f"{rule}: {mechanisms.get(rule) or 'its event'} never happened: the run's 0 "
            "lost writes say nothing about that promise"
            for rule, n in result.chances.items() if n == 0]


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word's end, ``…`` marking the cut."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def _n(x: object) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)


def _by_f(by_f: dict) -> str:
    """``send 84,638 ok, 24 info; poll 28,774 ok``: each client op's outcomes, zeros left out."""
    return "; ".join(f"{f} " + ", ".join(f"{_n(n)} {t}" for t, n in types.items() if n)
                     for f, types in by_f.items() if any(types.values()))


def render(result: RunVerdict, console: Console, run_dir: Path | None = None) -> None:
    """Print the verdict table: one row per anomaly found with count, how its findings were
    judged (permitted, and by which rule and event; violation; unexplained), and the first
    example; one line names the anomalies checked for and not found."""
    shade = {True: "green", False: "red"}.get(result.valid, "yellow")
    table = Table(title=f"Verdict: [bold {shade}]{result.verdict}[/]")
    for col, kw in (("anomaly", {}), ("count", {"justify": "right"}), ("verdict", {}),
                    ("example", {})):
        table.add_column(col, **kw)
    none, unchecked = [], result.not_applicable
    for name, found in result.anomalies.items():
        count = found.get("count", 0)
        label = name + (" (consumer)" if found.get("side") == "consumer" else "")
        example = escape(clip(explain(name, found["examples"][0]), 160)) if found.get("examples") \
            else ""
        if count is None:  # the checker raised: the verdict is unknown, never "0 found"
            table.add_row(label, "[yellow]error[/]", "[yellow]unknown[/]",
                          clip(found.get("error", ""), 90))
        elif not count:
            if name not in unchecked:  # listed apart, with why
                none.append(name)
        else:
            colour = "cyan" if found.get("permitted") else "red"
            table.add_row(label, f"[{colour}]{count}[/]", verdict_cell(found), example)
    console.print(table if table.row_count else f"Verdict: [bold {shade}]{result.verdict}[/]")
    # the one headline every view shows: what was found and what decides the exit code
    console.print(f"[bold {shade}]{escape(result.banner()['headline'])}[/]")
    if none:
        console.print(f"[dim]none found ({len(none)}): {', '.join(none)}[/]")
    for why, names in result.not_applicable_by_reason().items():
        console.print(f"[dim]not applicable, {escape(why)}: {', '.join(names)}[/]")
    stats = result.stats
    if stats:
        console.print(f"client ops: {_n(result.client_ops())} "
                      f"({_by_f(stats.get('by_f') or {})}); nemesis ops: "
                      f"{_n(stats.get('nemesis'))}; monitor samples: "
                      f"{_n(stats.get('monitor'))}; history lines: {_n(stats.get('ops'))}")
        console.print(f"acknowledged sends: {_n(stats.get('acked_sends'))}; records read: "
                      f"{_n(stats.get('records_read'))}; analysis: "
                      f"{result.analysis_time_s} s")
    if line := result.availability_line():
        console.print(f"availability: {line}")
    if line := steady.line(result.steady_state):
        colour = {True: "green", False: "red"}.get(result.steady_state.get("held"), "yellow")
        console.print(f"steady state: [{colour}]{escape(line)}[/]")
    search = result.cycle_search
    if search:
        console.print(f"cycle search: {'complete' if search['complete'] else 'INCOMPLETE'}, "
                      f"{search['edges']:,} edges, {search['components']:,} cyclic components, "
                      f"{search.get('time_s') or 0:.3f} s")
    for name in result.violations:
        a = result.anomalies[name]
        n = (a.get("outcomes") or {}).get("violation", a.get("count"))
        console.print(f"[red]violation[/]: {name} ({n}): "
                      f"{escape(a.get('violation_because') or a['because'])}")
    by_rule: dict[str, list[str]] = {}
    for name in result.anomaly_types:
        for rule in (result.anomalies[name].get("rules") or {}):
            by_rule.setdefault(rule, []).append(name)
    for rule, names in by_rule.items():
        a = next((result.anomalies[n] for n in names
                  if result.anomalies[n]["rule"] == rule), None)
        because = f": {a['because']} ({a['source']})" if a else ""
        console.print(f"[cyan]permitted by {rule}[/]: {', '.join(names)}{escape(because)}")
        for name in names:
            shown = next((ex for ex in result.anomalies[name].get("examples") or []
                          if ex.get("rule") == rule and ex.get("evidence")), None)
            if shown is not None:
                console.print(f"  e.g. {name} by {escape(explain_evidence(shown['evidence']))}")
    for line in no_chance(result):
        console.print(f"[yellow]no chance[/]: {escape(line)}")
    if result.faults_not_run:
        console.print(f"[yellow]never ran[/]: {', '.join(result.faults_not_run)}: asked "
                      "for, but the run ended before they started (or each attempt raised): "
                      "the verdict says nothing about them")
    for reason in result.unknown_reasons:
        console.print(f"[yellow]unknown: {escape(reason)}[/]")
    if run_dir is not None:
        console.print(f"run directory: {run_dir}")
