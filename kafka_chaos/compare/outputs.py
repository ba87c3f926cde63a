"""Every file of a comparison at once: the tables (``compare.report``) and the page
(``compare.html``), which itself draws on the tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kafka_chaos.compare import html as compare_html
from kafka_chaos.compare.core import Comparison
from kafka_chaos.compare.report import RATES, render, rows, write_csv, write_junit
from kafka_chaos.report import markdown


def write_all(comparison: Comparison, console: Console | None = None) -> dict[str, Path]:
    """Read every run and write the CSVs, ``junit.xml``, ``summary.md`` (Markdown) and
    ``compare.html``; print the table on ``console`` when given. Returns the paths written
    by name."""
    cells = rows(comparison)
    if console is not None:
        render(cells, comparison, console)
    cell_csv, run_csv = write_csv(comparison, cells)
    summary = comparison.dir / "summary.md"
    summary.write_text(f"## kafka-chaos compare {comparison.dir.name}\n\n"
                       + markdown.compare_table(cells, list(RATES)))
    return {"compare.csv": cell_csv, "runs.csv": run_csv, "summary.md": summary,
            "junit.xml": write_junit(comparison, cells),
            "compare.html": compare_html.write(comparison, cells)}
