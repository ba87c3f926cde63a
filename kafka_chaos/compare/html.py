"""``compare.html``: the comparison on one self-contained page (plotly inlined once, as in
``report.html``): the cells table with each repeat's verdict linking to its run's report, and
bar charts per cell of the anomaly rates, availability and send latency."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import plotly.graph_objects as go
import plotly.io
from plotly.offline import get_plotlyjs

from kafka_chaos import __version__
from kafka_chaos.compare import report as compare_report
from kafka_chaos.compare.core import Comparison

_LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=40, b=120),
               legend=dict(orientation="h", y=1.12), barmode="group", height=380)
#: Rate colours: lost writes red, duplicates orange, reorders purple.
_RATE_COLOURS = {"lost-write": "#C0392B", "duplicate": "#E67E22", "reorder": "#8E44AD"}


def figures(cells: list[compare_report.CellRow]) -> dict[str, dict[str, Any]]:
    """Plotly JSON figures over the cells that ran: ``rates`` (per 10k acknowledged sends),
    ``availability`` (%) and ``latency`` (p50 and p99, ms)."""
    ran = [c for c in cells if not c.skipped]
    x = [c.label for c in ran]
    rates = go.Figure([go.Bar(name=name, x=x, y=[c.rate(name) for c in ran],
                              marker_color=_RATE_COLOURS[name])
                       for name in compare_report.RATES])
    rates.update_layout(title="anomalies per 10,000 acknowledged sends", **_LAYOUT)
    avail = go.Figure([go.Bar(name="acknowledged sends %", x=x,
                              y=[c.availability_pct for c in ran], marker_color="#27AE60")])
    avail.update_layout(title="availability: share of sends acknowledged (%)",
                        yaxis=dict(range=[0, 100]), **_LAYOUT)
    latency = go.Figure([go.Bar(name=which, x=x, y=[c.latency_ms(which) for c in ran],
                                marker_color=colour)
                         for which, colour in (("p50", "#5AA9F0"), ("p99", "#1F4E79"))])
    latency.update_layout(title="send latency (ms, median over repeats)", **_LAYOUT)
    return {"rates": rates.to_plotly_json(), "availability": avail.to_plotly_json(),
            "latency": latency.to_plotly_json()}


def build(comparison: Comparison, cells: list[compare_report.CellRow]) -> str:
    """The page's HTML text."""
    divs = {name: plotly.io.to_html(fig, full_html=False, include_plotlyjs=False,
                                    div_id=f"fig-{name}", validate=False,
                                    config={"displaylogo": False, "responsive": True})
            for name, fig in figures(cells).items()}
    env = jinja2.Environment(loader=jinja2.PackageLoader("kafka_chaos", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    manifest = comparison.manifest
    return env.get_template("compare.html.j2").render(
        title=f"kafka-chaos comparison {comparison.dir.name}", manifest=manifest,
        dir=comparison.dir,
        cells=cells, rates=list(compare_report.RATES), figures=divs,
        plotly_js=get_plotlyjs(), version=__version__,
        pending=sum(1 for c in cells for r in c.runs if r.status == "pending"),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


def write(comparison: Comparison, cells: list[compare_report.CellRow]) -> Path:
    """Write ``compare.html`` into the comparison directory (atomically); returns its path."""
    path = comparison.dir / "compare.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(build(comparison, cells), encoding="utf-8")
    tmp.replace(path)
    return path
