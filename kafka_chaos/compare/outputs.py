"""Every file of a comparison at once: the tables (``compare.report``) and the page
(``compare.html``), which itself draws on the tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kafka_chaos.compare import html as compare_html
from kafka_chaos.compare.core import Comparison
from kafka_chaos.compare.report import render, rows, write_csv, write_junit


def write_all(comparison: Comparison, console: Console | None = None) -> dict[str, Path]:
    """Read every run and write the CSVs, ``junit.xml`` and ``compare.html``; print the table
    on ``console`` when given. Returns the paths written by name."""
    cells = rows(comparison)
    if console is not None:
        render(cells, comparison, console)
    cell_csv, run_csv = write_csv(comparison, cells)
    return {"compare.csv": cell_csv, "runs.csv": run_csv,
            "junit.xml": write_junit(comparison, cells),
            "compare.html": compare_html.write(comparison, cells)}
