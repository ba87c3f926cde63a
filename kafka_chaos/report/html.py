"""``report.html``: one self-contained page per run, rebuilt from ``history.jsonl`` and
``results.json`` (``kafka-chaos report RUN_DIR``; written after every ``run`` and ``analyze``).

The page opens offline: plotly's JavaScript is inlined once in its head (about 4.8 MB) and
every figure is a ``<div>`` drawn by it; no CDN, no other file. What it shows is described
in ``docs/report.md``. Data extraction is ``report.data`` (one streaming pass) and
``report.stats``; figures are ``report_figures``; the page is the Jinja2 template
``templates/report.html.j2``.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import plotly.io
from plotly.offline import get_plotlyjs

from kafka_chaos import __version__, options, steady
from kafka_chaos.analysis.explain import explain_judged
from kafka_chaos.config import SETTINGS
from kafka_chaos.errors import ReportError
from kafka_chaos.history import HistoryError
from kafka_chaos.report import figures as report_figures
from kafka_chaos.report import stats as report_stats
from kafka_chaos.report.data import ReportData, example_windows, extract
from kafka_chaos.verdict import RunVerdict

#: The configuration shown up front (the settings table's ``report`` ones; the rest is in
#: the full listing).
KEY_SETTINGS = tuple(name for name, s in SETTINGS.items() if s.report)


def build(run_dir: Path, results: RunVerdict | None = None,
          data: ReportData | None = None, source: str | None = None) -> str:
    """The HTML text of the report of ``run_dir``.

    Args:
        run_dir: holds ``history.jsonl`` and (unless ``results`` is given) ``results.json``;
            ``config.json`` and ``command.txt`` are used when present.
        results: the verdict, if already in memory (else ``RunVerdict.load``).
        data: ``report.data.extract(history, results.anomalies)``, if already read.
        source: the URL the run directory was fetched from (``kafka-chaos analyze URL``),
            shown instead of ``run_dir``.

    Raises ``ReportError`` for a missing or unreadable input file, ``HistoryError`` (message
    prefixed with the file) for a malformed history line.
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    history = run_dir / "history.jsonl"
    if not history.is_file():
        raise ReportError(f"{history}: missing")
    results = RunVerdict.load(run_dir) if results is None else results
    if data is None:
        data = read(history, results.anomalies)
    config = (data.header or {}).get("config") or _json(run_dir / "config.json")
    context = _context(run_dir, data, results, config, source)
    context["build_s"] = round(time.perf_counter() - started, 2)
    return _template().render(**context)


def read(history: Path, anomalies: dict[str, Any]) -> ReportData:
    """``report.data.extract`` with a ``HistoryError`` naming the file."""
    try:
        return extract(history, anomalies)
    except HistoryError as exc:
        raise HistoryError(f"{history}: {exc}") from exc


def write(run_dir: Path, results: RunVerdict | None = None,
          data: ReportData | None = None, out: Path | None = None,
          source: str | None = None) -> Path:
    """Build the report (``build``) and write ``report.html`` atomically into ``out``
    (default ``run_dir``)."""
    path = Path(out if out is not None else run_dir) / "report.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(build(run_dir, results, data, source), encoding="utf-8")
    tmp.replace(path)
    return path


def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("kafka_chaos", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["code"] = code_spans
    return env.get_template("report.html.j2")


def code_spans(text: Any) -> markupsafe.Markup:
    """``text`` escaped for HTML, its Markdown-style code spans (`` `x` ``, as the promises
    table's sources write Kafka's property names) set as ``<code>``, never as backticks."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: leave the text as it is
        return markupsafe.escape(text)
    return markupsafe.Markup("").join(
        markupsafe.Markup("<code>{}</code>").format(p) if i % 2 else markupsafe.escape(p)
        for i, p in enumerate(parts))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _div(fig: dict, div_id: str) -> str:
    """A ``<div>`` drawing ``fig`` (plotly JSON) with the page's one copy of plotly.js."""
    return plotly.io.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                             validate=False, config={"displaylogo": False, "responsive": True})


def _context(run_dir: Path, data: ReportData, results: RunVerdict,
             config: dict[str, Any] | None, source: str | None = None) -> dict[str, Any]:
    facts = results.run
    # a results.json older than its availability section: the same figures, from the history
    avail = results.availability or report_stats.summary(data)
    bin_s = report_stats.bin_width_s(data.workload_s[1])
    unavailable = report_stats.unavailability(data)
    figures = {
        "timeline": _div(report_figures.timeline(data, evidence=evidence_events(results)),
                         "fig-timeline"),
        "throughput": _div(report_figures.throughput(
            report_stats.throughput(data, bin_s), bin_s, data.windows, unavailable, data.end_s),
            "fig-throughput"),
        "latency": _div(report_figures.latency(report_stats.latency(data, bin_s), bin_s,
                                               data.windows, data.end_s), "fig-latency"),
    }
    views = {(v.key, v.lo, v.hi): v for v in data.views}
    diagrams: dict[str, list[str]] = {}
    for n, (name, key, lo, hi, examples) in enumerate(example_windows(results.anomalies)):
        fig = report_figures.offsets(name, views[(key, lo, hi)], examples)
        diagrams.setdefault(name, []).append(_div(fig, f"fig-offsets-{n}"))
    name = source.rstrip("/").rpartition("/")[2] if source else run_dir.resolve().name
    return {
        "title": f"kafka-chaos run {name}",
        "run_dir": source or str(run_dir),
        "rebuild": source is None,  # ``kafka-chaos report`` reads a local run directory
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "version": __version__,
        "plotly_js": get_plotlyjs(),
        "verdict": results.banner(),
        "exit_code": results.exit_code,
        "fail_on": results.fail_on,
        "steady": steady.line(results.steady_state),
        "facts": _facts(data, results, facts, config),
        "settings": [(SETTINGS[k].label, _show(config[k], SETTINGS[k].unit)
                      + _achieved(k, facts)) for k in KEY_SETTINGS if config and k in config],
        "config_json": json.dumps(config, indent=2) if config else None,
        "rerun": rerun(run_dir, config, facts),
        "figures": figures,
        "availability": {
            "acked": avail["acked"], "attempted": avail["sends"],
            "share": f"{100 * avail['ack_share']:.2f} %" if avail["sends"] else "n/a",
            "unavailable": [(a, b, b - a) for a, b in unavailable],
            "min_s": report_stats.UNAVAILABLE_S,
            "unavailable_s": avail["unavailable_s"],
            "workload_s": avail["workload_s"],
            "faults": _fault_rows(data),
            "outcomes": avail["ops"]},
        "anomalies": _anomalies(results, diagrams),
        "unknown_reasons": results.unknown_reasons,
        "not_applicable": results.not_applicable_by_reason(),
        "cycle_search": results.cycle_search,
        "events": data.events, "events_dropped": data.events_dropped,
        "nodes": data.nodes, "nemesis": data.nemesis, "lines": data.lines,
        "monitor_samples": data.monitor_samples,
    }


def evidence_events(results: RunVerdict) -> list[dict[str, Any]]:
    """The distinct events the examples' permitting evidence names (``analysis.evidence``),
    each once with ``cites``: the anomalies and rules that cite it; in time order."""
    seen: dict[tuple, dict[str, Any]] = {}
    for name, found in results.anomalies.items():
        for ex in found.get("examples") or []:
            e = ex.get("evidence")
            if not e:
                continue
            key = (e.get("event"), e.get("partition"), tuple(e.get("indexes") or ()))
            entry = seen.setdefault(key, {**e, "cites": []})
            cite = f"{name} ({ex.get('rule')})"
            if cite not in entry["cites"]:
                entry["cites"].append(cite)
    return sorted(seen.values(), key=lambda e: tuple(e.get("at_s") or (0, 0)))


def _fault_rows(data: ReportData) -> list[dict[str, Any]]:
    """Every fault window with its recovery figures (None for a window never undone)."""
    healed = {id(r["window"]): r for r in report_stats.recovery(data)}
    return [healed.get(id(w), {"window": w, "first_ack_s": None, "first_read_s": None,
                                     "isr_full_s": None})
            for w in data.windows]


def _facts(data: ReportData, results: RunVerdict, facts: dict, config: dict | None) -> list:
    stats = results.stats
    rows = [("seed", facts.get("seed", (config or {}).get("seed"))),
            ("Kafka", facts.get("kafka_version") or (data.header or {}).get("kafka_version")
             or (config or {}).get("kafka_version")),
            ("history", f"{data.lines} op lines, {data.end_s:.1f} s "
                        f"(workload {data.workload_s[0]:.1f}–{data.workload_s[1]:.1f} s)"),
            ("acknowledged sends", stats.get("acked_sends")),
            ("records read", stats.get("records_read")),
            ("monitor samples", data.monitor_samples),
            ("nemesis ops", len(data.nemesis)),
            ("analysis", f"{results.analysis_time_s} s"
             if results.analysis_time_s is not None else None),
            ("run", f"{facts.get('total_s')} s" if facts.get("total_s") else None)]
    return [(k, v) for k, v in rows if v is not None]


def _anomalies(results: RunVerdict, diagrams: dict[str, list[str]]) -> list[dict]:
    """The anomalies found or whose checker failed, each with its explanations."""
    out = []
    for name, found in results.anomalies.items():
        count = found.get("count")
        if count == 0:
            continue
        outcomes = found.get("outcomes") or {}
        status = ("unknown" if count is None else "violation" if outcomes.get("violation")
                  else "unknown" if outcomes.get("unexplained")
                  else "permitted" if found.get("permitted") else "violation")
        out.append({"name": name, "count": "error" if count is None else count,
                    "status": status, "side": found.get("side"), "rule": found.get("rule"),
                    "because": found.get("because"), "source": found.get("source"),
                    "error": found.get("error"),
                    "outcomes": outcomes,
                    "explanations": [explain_judged(name, ex)
                                     for ex in found.get("examples") or []],
                    "diagrams": diagrams.get(name, [])})
    return out


def rerun(run_dir: Path, config: dict[str, Any] | None, facts: dict) -> dict[str, str] | None:
    """The command to rerun the run: ``command.txt`` (with the seed added when it was the
    default), else rebuilt from the configuration; None when neither is known."""
    recorded = run_dir / "command.txt"
    seed = facts.get("seed", (config or {}).get("seed"))
    if recorded.is_file():
        text = recorded.read_text().strip()
        if "--seed" not in text.split() and seed is not None:
            text += f" --seed {seed}"
        return {"command": text, "source": "command.txt"}
    if not config:
        return None
    return {"command": options.command_of(config), "source": "rebuilt from the configuration"}


def _achieved(field: str, facts: dict) -> str:
    """What the run achieved of a setting that is a target, after the value asked: the rate
    asked (``--rate``) and the ops per second the workload ran (``runner``'s ``ops_per_s``)."""
    if field == "rate" and facts.get("ops_per_s") is not None:
        return f" asked, {facts['ops_per_s']:g} ops/s ran"
    return ""


def _show(value: Any, unit: str | None = None) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    if value is None or value == "":
        return "—"
    return f"{value:g} {unit}" if unit and isinstance(value, (int, float)) else str(value)
