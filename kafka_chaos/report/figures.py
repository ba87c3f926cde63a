"""The report's plotly figures: timeline, throughput, latency and offset diagrams.

Each function returns a figure as plotly JSON (``{"data": [...], "layout": {...}}``, for
``plotly.io.to_html``) of bounded size, whatever the
history's length: the timeline is a grid of at most ``TIMELINE_BINS`` time bins per row, the
time series have one point per bin (``report.stats``), offset diagrams a few dozen points.
Fault windows are shaded in their nemesis package's colour (``catalogue.faults.PACKAGES``).
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from kafka_chaos.analysis.explain import explain_evidence
from kafka_chaos.report.cluster import FaultWindow
from kafka_chaos.report.data import OUTCOMES, OffsetView, ReportData

#: Op outcome colours (Jepsen's timeline: ok blue, fail pink, info orange).
COLORS = {"ok": "#5AA9F0", "fail": "#E8559B", "info": "#F5A623"}
#: Time bins of the timeline grid.
TIMELINE_BINS = 1200
#: Monitor change kinds, most telling first: (kind, legend name, marker symbol, colour).
EVENT_STYLES = (("leader", "leader change", "star", "#C0392B"),
                ("isr-shrink", "ISR shrink", "triangle-down", "#E67E22"),
                ("isr-grow", "ISR grow", "triangle-up", "#27AE60"),
                ("controller", "controller change", "diamond", "#8E44AD"),
                ("answering", "node answering / not", "circle", "#7F8C8D"),
                ("unknown", "no broker answered", "x", "#000000"))
_LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=40, b=40),
               legend=dict(orientation="h", y=-0.18), hovermode="closest")


def package_colors() -> dict[str, str]:
    """Nemesis package -> plot colour (Jepsen's, from ``catalogue.faults.PACKAGES``)."""
    from kafka_chaos.catalogue.faults import PACKAGES

    return {name: p.color for name, p in PACKAGES.items()}


def _shade(fig: go.Figure, windows: list[FaultWindow], end_s: float, opacity: float = 0.3,
           legend: bool = True) -> list[dict]:
    """The shapes shading each fault window over the whole plot height; adds one legend
    entry per package to ``fig`` when ``legend``."""
    colors = package_colors()
    if legend:
        for package in dict.fromkeys(w.package for w in windows):
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"fault: {package}",
                                     marker=dict(symbol="square", size=12,
                                                 color=colors.get(package, "#CCCCCC"))))
    return _rects([(w.start_s, w.end_s if w.end_s is not None else end_s,
                    colors.get(w.package, "#CCCCCC")) for w in windows], opacity)


def _rects(spans: list[tuple[float, float, str]], opacity: float) -> list[dict]:
    """Full-height rectangles ``(x0, x1, colour)`` behind the traces, as layout shapes."""
    return [dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1,
                 line=dict(width=0), fillcolor=color, opacity=opacity, layer="below")
            for x0, x1, color in spans]


def _json(fig: go.Figure, shapes: list[dict]) -> dict:
    """The figure as plotly JSON with ``shapes`` added unvalidated: plotly validates shapes
    one by one at about a millisecond each, and a long run has hundreds of fault windows."""
    out = fig.to_plotly_json()
    out["layout"]["shapes"] = list(out["layout"].get("shapes") or []) + shapes
    return out


def timeline(data: ReportData, bins: int = TIMELINE_BINS,
             evidence: list[dict[str, Any]] = ()) -> dict:
    """Ops per worker row over time, a cell per (row, time bin) coloured by the worst outcome
    of the ops running in it (info > fail > ok), paler the fewer of them are not ok (hover:
    the counts); a ``nemesis`` row with the fault windows and ops, a ``monitor`` row with
    the cluster changes, and on it the ``evidence`` events that permitted anomalies
    (``report.html.evidence_events``), as the span of seconds the record places each in."""
    span = max(data.end_s, 1e-3)
    width = span / bins
    lanes = len(data.lanes)
    counts = [[[0, 0, 0] for _ in range(bins)] for _ in range(lanes)]
    ops = data.ops
    for i in range(len(ops)):
        end = ops.end_s[i]
        end = span if math.isnan(end) else end
        row, outcome = counts[ops.lane[i]], ops.outcome[i]
        for b in range(min(bins - 1, int(ops.start_s[i] / width)),
                       min(bins - 1, int(end / width)) + 1):
            row[b][outcome] += 1
    z = [[_cell(c) for c in row] for row in counts]
    fig = go.Figure(go.Heatmap(
        x=[(b + 0.5) * width for b in range(bins)], y=list(range(lanes)), z=z,
        customdata=counts, zmin=0, zmax=3, colorscale=_CELL_SCALE, showscale=False,
        hoverongaps=False, name="ops",
        hovertemplate="worker %{y}, %{x:.2f} s<br>ok %{customdata[0]} · fail "
                      "%{customdata[1]} · info %{customdata[2]}<extra></extra>"))
    for name in OUTCOMES:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 marker=dict(symbol="square", size=12, color=COLORS[name])))
    _nemesis_row(fig, data, span)
    _monitor_row(fig, data)
    _evidence_row(fig, evidence, span)
    shapes = _shade(fig, data.windows, span, opacity=0.18, legend=False)
    labels = ["monitor", "nemesis"] + [
        "final reads" if i == data.final_lane else _lane_label(i, procs)
        for i, procs in enumerate(data.lanes)]
    fig.update_layout(**_LAYOUT, title="Timeline: ops per worker (a retired process's "
                      "successor keeps its row)", height=min(1200, 220 + 22 * (lanes + 2)),
                      xaxis=dict(title="time since start (s)", range=[0, span]),
                      yaxis=dict(autorange="reversed", tickvals=list(range(-2, lanes)),
                                 ticktext=labels, zeroline=False))
    return _json(fig, shapes)


#: Timeline cells: 0 all ok; 1..2 fail the worst outcome, 2..3 info, the fraction past the
#: whole number being the share of ops not ok (pale: a few, full colour: all).
_CELL_SCALE = [[0, COLORS["ok"]], [1 / 3, COLORS["ok"]], [1 / 3 + 1e-9, "#F8D5E6"],
               [2 / 3, COLORS["fail"]], [2 / 3 + 1e-9, "#FBE3BD"], [1, COLORS["info"]]]


def _cell(counts: list[int]) -> float | None:
    """The colour value of a timeline cell holding ``[ok, fail, info]`` ops (None: empty)."""
    total = counts[0] + counts[1] + counts[2]
    if not total:
        return None
    if not (counts[1] or counts[2]):
        return 0.0
    worst = 2 if counts[2] else 1
    return worst + (counts[1] + counts[2]) / total


def _lane_label(lane: int, processes: list[int]) -> str:
    shown = ", ".join(map(str, processes[:3]))
    more = f", … ({len(processes)})" if len(processes) > 3 else ""
    return f"w{lane}: p {shown}{more}"


def _nemesis_row(fig: go.Figure, data: ReportData, span: float) -> None:
    colors = package_colors()
    by_package: dict[str, list[FaultWindow]] = {}
    for w in data.windows:
        by_package.setdefault(w.package, []).append(w)
    for package, windows in by_package.items():
        xs: list[Any] = []
        texts: list[Any] = []
        for w in windows:
            end = w.end_s if w.end_s is not None else span
            label = w.label + (" (the op did not complete ok)" if w.failed else "")
            xs += [w.start_s, end, None]
            texts += [f"{label}<br>{w.start_s:.2f}–{end:.2f} s", f"ends: {end:.2f} s", None]
        fig.add_trace(go.Scatter(x=xs, y=[-1 if x is not None else None for x in xs],
                                 mode="lines", line=dict(width=12, color=colors.get(package)),
                                 name=f"fault: {package}", text=texts, hoverinfo="text"))
    if data.nemesis:
        fig.add_trace(go.Scatter(
            x=[op.start_s for op in data.nemesis], y=[-1] * len(data.nemesis), mode="markers",
            marker=dict(symbol="line-ns-open", size=14, color="#333333"), name="nemesis op",
            hoverinfo="text", text=[f"{op.f} ({op.type}) at {op.start_s:.2f} s<br>asked: "
                                    f"{_short(op.value)}<br>done: "
                                    f"{_short(op.done if op.error is None else op.error)}"
                                    for op in data.nemesis]))


def _monitor_row(fig: go.Figure, data: ReportData) -> None:
    for kind, name, symbol, color in EVENT_STYLES:
        events = [e for e in data.events
                  if next(k for k, *_ in EVENT_STYLES if k in e.kinds) == kind]
        if events:
            fig.add_trace(go.Scatter(
                x=[e.time_s for e in events], y=[-2] * len(events), mode="markers", name=name,
                marker=dict(symbol=symbol, size=11, color=color), hoverinfo="text",
                text=[f"{e.time_s:.2f} s<br>" + "<br>".join(e.text[:12]) for e in events]))


def _evidence_row(fig: go.Figure, evidence: list[dict[str, Any]], span: float) -> None:
    xs: list[Any] = []
    texts: list[Any] = []
    for e in evidence:
        lo, hi = e.get("at_s") or (None, None)
        if lo is None:
            continue
        hi = span if hi is None else hi
        text = (f"evidence: {explain_evidence(e)}<br>permits: "
                f"{', '.join(e.get('cites') or [])}")
        xs += [lo, hi, None]
        texts += [text, text, None]
    if xs:
        fig.add_trace(go.Scatter(
            x=xs, y=[-2 if x is not None else None for x in xs], mode="lines+markers",
            line=dict(width=6, color="#1F3A93"), marker=dict(symbol="hexagram", size=13),
            name="evidence of a permitted anomaly", text=texts, hoverinfo="text"))


def throughput(series: dict[str, list[float]], bin_s: float, windows: list[FaultWindow],
               unavailable: list[tuple[float, float]], end_s: float) -> dict:
    """Completions per second by outcome, sends attempted and acknowledged per second, with
    the fault windows and the windows without any acknowledgement shaded."""
    fig = go.Figure()
    # steps hold each bin's value to its end: the last bin needs its end as a point too
    t = series["t"] + [series["t"][-1] + bin_s] if series["t"] else []

    def steps(name: str) -> list[float]:
        return series[name] + series[name][-1:]
    for name in OUTCOMES:
        fig.add_trace(go.Scatter(x=t, y=steps(name), name=f"{name} ops/s",
                                 mode="lines", line=dict(color=COLORS[name], shape="hv")))
    fig.add_trace(go.Scatter(x=t, y=steps("sends"), name="sends/s attempted",
                             mode="lines", line=dict(color="#999999", dash="dot", shape="hv")))
    fig.add_trace(go.Scatter(x=t, y=steps("acked"), name="sends/s acknowledged",
                             mode="lines", line=dict(color="#222222", shape="hv")))
    shapes = _shade(fig, windows, end_s) + _rects([(a, b, "#555555") for a, b in unavailable],
                                                  0.25)
    if unavailable:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="no ack ≥ 1 s",
                                 marker=dict(symbol="square", size=12, color="#AAAAAA")))
    fig.update_layout(**_LAYOUT, title=f"Throughput ({bin_s:g} s bins)", height=380,
                      xaxis=dict(title="time since start (s)", range=[0, end_s]),
                      yaxis=dict(title="per second", rangemode="tozero"))
    return _json(fig, shapes)


def latency(series: dict[str, dict[str, list[float]]], bin_s: float,
            windows: list[FaultWindow], end_s: float) -> dict:
    """p50 (solid), p99 (dashed) and max (dotted) latency per bin and outcome, log scale;
    each point at the middle of its bin."""
    fig = go.Figure()
    for name in OUTCOMES:
        s = series[name]
        for stat, dash in (("p50", "solid"), ("p99", "dash"), ("max", "dot")):
            # fail and info ops are sparse: markers show a bin that has no neighbour
            fig.add_trace(go.Scatter(x=[t + bin_s / 2 for t in s["t"]], y=s[stat],
                                     name=f"{name} {stat}",
                                     legendgroup=name, connectgaps=False,
                                     mode="lines" if name == "ok" else "lines+markers",
                                     marker=dict(size=5), line=dict(color=COLORS[name],
                                                                    dash=dash)))
    shapes = _shade(fig, windows, end_s)
    fig.update_layout(**_LAYOUT, title=f"Latency by invoke time ({bin_s:g} s bins)", height=380,
                      xaxis=dict(title="time since start (s)", range=[0, end_s]),
                      yaxis=dict(title="ms", type="log"))
    return _json(fig, shapes)


def offsets(name: str, view: OffsetView, examples: list[dict[str, Any]]) -> dict:
    """Key ``view.key`` between offsets ``view.lo`` and ``view.hi``: what acknowledged sends
    said was at each offset, what polls and the final reads returned there. The examples'
    values are drawn as red crosses; final-read values at their offsets in orange."""
    marked = set()
    spots = set()
    for ex in examples:
        marked.update([ex["value"]] if "value" in ex else ex.get("values") or [])
        if ex.get("offset") is not None:
            spots.add(ex["offset"])
    rows = {"acknowledged": 2, "polls": 1, "final reads": 0}
    xs, ys, texts, hovers, colors, symbols = [], [], [], [], [], []

    def point(row: str, offset: int, value: Any, stack: int, hover: str, bad: bool) -> None:
        xs.append(offset)
        ys.append(rows[row] + 0.3 * stack)
        texts.append(str(value))
        hovers.append(f"{row}: offset {offset}, value {value}{hover}")
        colors.append("#C0392B" if bad else "#F39C12" if row == "final reads" and offset in spots
                      else "#2C3E50")
        symbols.append("x" if bad else "circle")

    stacks: dict[tuple[str, int], int] = {}
    for offset, value, op in sorted(view.acked):
        n = stacks[("acknowledged", offset)] = stacks.get(("acknowledged", offset), -1) + 1
        point("acknowledged", offset, value, n, f" (op {op})", value in marked)
    for row, seen in (("polls", view.polled), ("final reads", view.final)):
        for offset in sorted(seen):
            for n, value in enumerate(sorted(seen[offset])):
                point(row, offset, value, n, "", value in marked and row != "final reads")
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers+text", text=texts,
                               textposition="middle right", hovertext=hovers, hoverinfo="text",
                               marker=dict(color=colors, symbol=symbols, size=10),
                               showlegend=False))
    if view.final_range is not None and view.lo < view.final_range[1] <= view.hi:
        fig.add_vline(x=view.final_range[1] - 0.5, line_dash="dash", line_color="#7F8C8D",
                      annotation_text="end of the final reads")
    fig.update_layout(**_LAYOUT, title=f"{name}: key {view.key}, offsets {view.lo}–{view.hi - 1}",
                      height=300, showlegend=False,
                      xaxis=dict(title="offset", dtick=1, range=[view.lo - 0.5, view.hi - 0.5]),
                      yaxis=dict(tickvals=list(rows.values()), ticktext=list(rows),
                                 range=[-0.5, 3.2], zeroline=False))
    return _json(fig, [])


def _short(value: Any, limit: int = 120) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
