"""A run directory's verdict: analyse ``history.jsonl``, judge it with what the run proved, and
write ``results.json``, ``junit.xml`` and ``report.html`` (``run``, ``analyze`` and every cell
of ``compare`` end here).

Exit codes (``kafka_chaos.verdict``): 0 valid, 1 anomalies counted under ``fail_on`` or a
steady-state limit broken, 2 unknown or interrupted, 254 bad input (a malformed history), 255
a crash of the analysis or report files that could not be written; never 0 when the analysis
failed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from kafka_chaos import verdict
from kafka_chaos.report import terminal as report


@dataclasses.dataclass
class Verdict:
    """What ``analyze_run`` decided: ``code`` (the exit code: the verdict's, or 255/2 when
    its report files could not be written), ``results`` (the verdict ``results.json`` now
    holds; None when none was reached) and ``error`` (why not, naming the file or the
    exception; None otherwise)."""

    code: int
    results: verdict.RunVerdict | None = None
    error: str | None = None


def config_of(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/config.json`` (format-1 histories carry no configuration), or None."""
    try:
        return json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None


def analyze_run(run_dir: Path | str, spark_master: str, fail_on: str,
                facts: dict | None = None, console: Console | None = None,
                out_dir: Path | None = None, limits: dict | None = None) -> Verdict:
    """Check ``run_dir/history.jsonl`` and write the verdict files into ``out_dir`` (default
    ``run_dir``; another folder when ``run_dir`` cannot be written, e.g. a read-only mount of
    a CI artefact); print the verdict table on ``console`` when given.

    ``run_dir`` may be a URL (``hdfs://...``; ``kafka-chaos publish``): Spark reads the
    columnar copy there, the run's small files and ``history.jsonl`` (for the report) are
    fetched into a temporary folder in ``out_dir``, which is then required.

    ``facts`` are the run's own (``runner.run``); None keeps those of an earlier verdict in
    ``out_dir``, else in ``run_dir`` (``report.run_facts``). The steady-state limits
    (``max_unavailable``, ``max_recovery_s``: ``kafka_chaos.steady``) are the run's own
    (its ``config.json``), each replaced by ``limits``' value where it has one (None: no
    limit). Bad input (254) or a crash of
    the analysis (255) returns with ``error`` set and leaves an earlier ``results.json`` as it
    was. ``KeyboardInterrupt`` during the analysis propagates (no verdict, nothing written);
    during the report files it makes exit 2 with the verdict kept in ``results.json``.
    """
    from kafka_chaos.analysis import remote

    if not remote.is_url(run_dir):
        out = Path(out_dir) if out_dir is not None else Path(run_dir)
        return _verdict(Path(run_dir), Path(run_dir) / "history.jsonl", out, spark_master,
                        fail_on, facts, console, limits=limits)
    return _analyze_url(run_dir, spark_master, fail_on, facts, console, out_dir, limits)


def _analyze_url(url: str, spark_master: str, fail_on: str, facts: dict | None,
                 console: Console | None, out_dir: Path | None,
                 limits: dict | None = None) -> Verdict:
    """``analyze_run`` of a run directory at a URL."""
    from kafka_chaos.analysis import remote
    from kafka_chaos.publish import PublishError, fetch

    if out_dir is None:
        return Verdict(verdict.EXIT_BAD_INPUT, error=f"{url}: a URL: give --out DIR for "
                       "results.json, junit.xml and report.html")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetched-", dir=out))
    try:
        try:
            local = fetch(url, staging / url.rstrip("/").rpartition("/")[2], spark_master)
        except PublishError as exc:  # nothing to analyse there
            return Verdict(verdict.EXIT_BAD_INPUT, error=str(exc))
        except remote.RemoteError as exc:
            return Verdict(verdict.EXIT_ERROR, error=str(exc))
        except Exception as exc:  # Spark could not start
            return Verdict(verdict.EXIT_ERROR,
                           error=f"analysis failed: {type(exc).__name__}: {str(exc)[:300]}")
        return _verdict(local, remote.join(url, "history.jsonl"), out, spark_master, fail_on,
                        facts, console, source=url, limits=limits)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _verdict(run_dir: Path, history: Path | str, out: Path, spark_master: str, fail_on: str,
             facts: dict | None, console: Console | None, source: str | None = None,
             limits: dict | None = None) -> Verdict:
    """``analyze_run`` once the run's files are in the local ``run_dir``; ``history`` is what
    the analysis reads (``run_dir/history.jsonl``, or its URL: ``source/history.jsonl``)."""
    from kafka_chaos import analysis
    from kafka_chaos.history import HistoryError

    path = run_dir / "history.jsonl"
    config = config_of(run_dir)
    if console is not None:  # the analysis prints nothing for seconds to minutes
        size = path.stat().st_size if path.exists() else 0
        console.log(f"analysing the history ({size / 1e6:.1f} MB) with Spark {spark_master}")
    try:
        result = analysis.check(history, spark_master=spark_master, config=config)
    except HistoryError as exc:
        return Verdict(verdict.EXIT_BAD_INPUT,
                       error=str(exc) if source else f"{path}: {exc}")
    except (Exception, MemoryError) as exc:  # a crash of the analysis: no verdict
        return Verdict(verdict.EXIT_ERROR,
                       error=f"analysis failed: {type(exc).__name__}: {str(exc)[:300]}")
    if facts is None:
        facts = report.run_facts(out) or report.run_facts(run_dir)
    problem, data = _read(path, result)
    limits = {**{k: (config or {}).get(k) for k in LIMITS}, **(limits or {})}
    decided = verdict.build(result, facts, fail_on,
                            None if data is None else _summary(data), limits)
    decided.write(out)
    if console is not None:
        report.render(decided, console, source or run_dir)
    if problem is None:
        problem = _write_reports(run_dir, out, decided, data, source)
    code = decided.exit_code
    if problem is not None:
        text, interrupted = problem
        if console is not None:
            console.print(f"[red]error:[/] {text}")
        # never a silent 0; anomalies already found stay exit 1 unless interrupted
        code = (verdict.EXIT_UNKNOWN if interrupted else
                code if code == verdict.EXIT_ANOMALIES else verdict.EXIT_ERROR)
    elif console is not None:
        console.print(f"report: {out / 'report.html'} (and junit.xml, summary.md)")
    return Verdict(code, decided)


#: The steady-state limits among a run's settings (``kafka_chaos.steady``).
LIMITS = ("max_unavailable", "max_recovery_s")

#: What went wrong after the analysis: ``(message, interrupted)``.
Problem = tuple[str, bool]


def _read(path: Path, result: dict[str, Any]) -> tuple[Problem | None, Any]:
    """Read the history once, for ``report.html`` and the availability figures; returns
    ``(problem or None, report.data.ReportData or None)``."""
    from kafka_chaos.report import html as html_report

    try:
        return None, html_report.read(path, result.get("anomalies") or {})
    except KeyboardInterrupt:
        return ("interrupted while reading the history for report.html", True), None
    except Exception as exc:
        return (f"could not read the history for report.html: {type(exc).__name__}: "
                f"{str(exc)[:300]}", False), None


def _summary(data: Any) -> dict[str, Any]:
    from kafka_chaos.report import stats as report_stats

    return report_stats.summary(data)


def _write_reports(run_dir: Path, out: Path, decided: verdict.RunVerdict,
                   data: Any, source: str | None = None) -> Problem | None:
    """Write ``junit.xml``, ``summary.md`` and ``report.html`` of ``run_dir`` into ``out``;
    returns what went wrong, or None."""
    from kafka_chaos.history import read_header
    from kafka_chaos.report import html as html_report
    from kafka_chaos.report import junit, markdown

    try:
        header = read_header(run_dir / "history.jsonl") or {}
        junit.write(out, decided, header.get("config") or config_of(run_dir))
        (out / "summary.md").write_text(markdown.run_summary(decided))
        html_report.write(run_dir, decided, data, out=out, source=source)
    except KeyboardInterrupt:
        return "interrupted while writing junit.xml and report.html", True
    except Exception as exc:
        return (f"could not write junit.xml and report.html: {type(exc).__name__}: "
                f"{str(exc)[:300]}", False)
    return None


def write_no_verdict(run_dir: Path, reason: str, facts: dict | None = None) -> None:
    """``results.json``, ``junit.xml`` and ``summary.md`` of a run that reached no verdict
    (its cluster did not come up, it crashed, it was interrupted, its analysis failed):
    ``valid`` and ``verdict`` unknown, ``reason`` the one unknown reason, so a CI job still
    finds its test case (an ``<error>``), its job summary and a script its verdict. Never
    overwrites a ``results.json``: one there holds a verdict. Best effort: the caller is
    already failing, and a file that cannot be written must not hide why."""
    from kafka_chaos.report import junit, markdown

    run_dir = Path(run_dir)
    if (run_dir / "results.json").exists():
        return
    try:
        decided = verdict.RunVerdict.unknown(reason, facts or report.run_facts(run_dir))
        decided.write(run_dir)
        junit.write(run_dir, decided, config_of(run_dir))
        (run_dir / "summary.md").write_text(markdown.run_summary(decided))
    except (OSError, ValueError):
        pass
