"""Verdict rendering: terminal table, ``results.json`` and the exit code.

Results are data first (the analysis dict); this module only renders them.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

#: Exit codes of ``run`` and ``analyze``.
EXIT_VALID, EXIT_ANOMALIES, EXIT_UNKNOWN = 0, 1, 2


def exit_code(result: dict) -> int:
    """0 when ``valid`` is True, 1 when False, 2 for ``"unknown"`` (or anything else)."""
    valid = result.get("valid")
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_ANOMALIES
    return EXIT_UNKNOWN


def write_results(run_dir: Path, result: dict, facts: dict | None = None) -> Path:
    """Write ``results.json`` (analysis + run facts) atomically; returns its path."""
    path = run_dir / "results.json"
    payload = {**result, "run": facts or {}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)
    return path


def render(result: dict, console: Console, run_dir: Path | None = None) -> None:
    """Print the verdict table: one row per anomaly with count and first example."""
    valid = result.get("valid")
    colour = {True: "green", False: "red"}.get(valid, "yellow")
    table = Table(title=f"Verdict: [bold {colour}]valid = {str(valid).lower()}[/]")
    table.add_column("anomaly")
    table.add_column("count", justify="right")
    table.add_column("example")
    for name, found in (result.get("anomalies") or {}).items():
        count = found.get("count", 0)
        example = json.dumps(found["examples"][0]) if found.get("examples") else ""
        if count is None:  # the checker raised: the verdict is unknown, never "0 found"
            table.add_row(name, "[yellow]error[/]", found.get("error", "")[:100])
        else:
            table.add_row(name, f"[red]{count}[/]" if count else "0", example[:100])
    console.print(table)
    stats = result.get("stats") or {}
    if stats:
        console.print(f"sends: {stats.get('send')}  polls: {stats.get('poll')}  "
                      f"ops: {stats.get('ops')}  analysis: {result.get('analysis_time_s')} s")
    for reason in result.get("unknown_reasons") or []:
        console.print(f"[yellow]unknown: {reason}[/]")
    if run_dir is not None:
        console.print(f"run directory: {run_dir}")
