"""The live verdict (``run --live``): the analysis follows the history while the run goes.

Every ``interval_s`` a thread copies the complete lines recorded so far into a snapshot
(``live/history.jsonl``, appended to, never rewritten) and runs the whole batch analysis
(``analysis.check``) on it. What a prefix shows stays shown: an offset that held two values,
a value read twice, an order that went backwards, an aborted write that was read, a cycle;
so do lost writes, which without final reads count only where a consumer read another value
at the write's offset (``analysis.checkers.lost``). A prefix's ``valid`` means nothing (its
writes are not read yet), so only its anomaly counts are used. Each check is one line of
``live.jsonl`` in the run directory.

With ``stop_on_violation`` the first check that finds an anomaly counted under ``--fail-on``
(a violation: one the configuration, plan ``forbid`` lists included, does not permit; with
``any``, any anomaly) calls ``on_stop``: the run then heals, reads every partition to its end
and runs the full analysis, whose verdict is the run's (never the prefix's).

Checks run one after another: when one takes longer than ``interval_s`` (a long run's history
grows, and each check converts and reads the whole prefix), the next starts when it ends.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

#: Longest error text kept per failed check.
_MAX_ERROR = 300


class LiveCheck:
    """Periodic analysis of the growing ``history`` on a thread of its own.

    Args:
        history: the run's ``history.jsonl``, being appended to (``history.HistoryWriter``
            flushes every line, so every complete line is an op).
        run_dir: where ``live/`` (the snapshot, removed by ``close``) and ``live.jsonl``
            (one JSON object per check: ``check``, ``t_s`` seconds since ``start``,
            ``lines``, ``check_s``, ``anomalies`` name -> count of those found,
            ``counted`` the names counted under ``fail_on``; or ``error``; or ``cancelled``
            for the check ``close`` cut short) go.
        spark_master: Spark master of the checks (the run's own).
        fail_on: ``"violation"`` or ``"any"`` (``verdict.exit_code``): what counts.
        interval_s: seconds from the end of one check to the start of the next.
        stop_on_violation: call ``on_stop(names)`` once, at the first check that counts one.
        on_stop: told the counted anomaly names; must return at once (sets an event).
        log: one line per check whose findings changed, for the user.
    """

    def __init__(self, history: Path, run_dir: Path, spark_master: str, fail_on: str,
                 interval_s: float, stop_on_violation: bool,
                 on_stop: Callable[[list[str]], None] = lambda names: None,
                 log: Callable[[str], None] = lambda text: None) -> None:
        self.history = Path(history)
        self.snapshot = Path(run_dir) / "live" / "history.jsonl"
        self.record = Path(run_dir) / "live.jsonl"
        self.spark_master, self.fail_on = spark_master, fail_on
        self.interval_s, self.stop_on_violation = interval_s, stop_on_violation
        self.on_stop, self.log = on_stop, log
        self.checks = 0
        self.errors = 0
        self.found: dict[str, int] = {}
        self.counted: list[str] = []
        self.stopped_at_s: float | None = None
        self.check_s: list[float] = []
        self._copied = 0  # bytes of the history in the snapshot
        self._lines = 0
        self._start = time.monotonic()
        self._halt = threading.Event()
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start checking, the first check ``interval_s`` from now."""
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="live-check", daemon=True)
        self._thread.start()

    def summary(self) -> str:
        """One line for the progress display: checks so far and the anomalies last found."""
        if not self.checks:
            return "live: first check pending"
        shown = ", ".join(f"{name} {n}" + (" (!)" if name in self.counted else "")
                          for name, n in self.found.items()) or "no anomaly"
        return f"live check {self.checks}: {shown}"

    def check_once(self) -> dict[str, Any] | None:
        """Append the new complete lines to the snapshot and check it; returns the record
        written to ``live.jsonl`` (None when the history holds no op yet). Never raises for a
        failed check: its ``error`` is recorded and the next check tries again."""
        from kafka_chaos import analysis

        with self._busy:
            lines = self._extend_snapshot()
            if lines < 2:  # the header alone (``runner.run`` always writes one)
                return None
            t = time.monotonic()
            entry: dict[str, Any] = {"check": self.checks + 1,
                                     "t_s": round(t - self._start, 2), "lines": lines}
            try:
                result = analysis.check(self.snapshot, spark_master=self.spark_master)
            except Exception as exc:  # the run goes on; the final analysis decides
                if self._halt.is_set():  # ``close`` cancelled its Spark jobs
                    entry["cancelled"] = True
                else:
                    entry["error"] = f"{type(exc).__name__}: {exc}"[:_MAX_ERROR]
            else:
                found = {name: a["count"] for name, a in result["anomalies"].items()
                         if a["count"]}
                counted = (result["anomaly_types"] if self.fail_on == "any"
                           else result["violations"])
                entry.update(anomalies=found, counted=counted)
            entry["check_s"] = round(time.monotonic() - t, 2)
            with self.record.open("a") as f:
                f.write(json.dumps(entry) + "\n")
            if "cancelled" in entry:  # neither a check made nor a failed one
                return entry
            self.checks += 1
            self.check_s.append(entry["check_s"])
            if "error" in entry:
                self.errors += 1
                self.log(f"live check {entry['check']} failed: {entry['error']}")
            elif entry["anomalies"] != self.found or entry["counted"] != self.counted:
                self.found, self.counted = entry["anomalies"], entry["counted"]
                self.log(f"{self.summary()} ({lines} lines, {entry['check_s']} s)")
            return entry

    def close(self) -> dict[str, Any]:
        """Stop checking (a check under way is cancelled), remove the snapshot and return the
        facts for ``run.json``: ``checks`` (done or failed; not the one cancelled),
        ``errors``, ``interval_s``, ``mean_check_s``, ``found`` (the last check's counts),
        ``counted``, ``stopped_at_s`` (seconds after ``start`` when ``on_stop`` was called,
        or None)."""
        self._halt.set()
        if self._thread is not None and self._thread.is_alive():
            _cancel_spark_jobs()
            self._thread.join(timeout=60)
        shutil.rmtree(self.snapshot.parent, ignore_errors=True)
        mean = sum(self.check_s) / len(self.check_s) if self.check_s else None
        return {"checks": self.checks, "errors": self.errors, "interval_s": self.interval_s,
                "mean_check_s": mean and round(mean, 2), "found": self.found,
                "counted": self.counted, "stopped_at_s": self.stopped_at_s}

    def _loop(self) -> None:
        while not self._halt.wait(self.interval_s):
            entry = self.check_once()
            if self._halt.is_set() or not entry or not entry.get("counted"):
                continue
            if self.stop_on_violation:
                self.stopped_at_s = round(entry["t_s"] + entry["check_s"], 2)
                self.log(f"live: {', '.join(entry['counted'])} found after "
                         f"{self.stopped_at_s:.1f} s: stopping the run (heal, final reads, "
                         "full analysis)")
                self.on_stop(entry["counted"])
                return

    def _extend_snapshot(self) -> int:
        """Append the history's complete lines not copied yet; returns the snapshot's size in
        lines (so far)."""
        self.snapshot.parent.mkdir(exist_ok=True)
        with self.history.open("rb") as src:
            src.seek(self._copied)
            new = src.read()
        complete = new[:new.rfind(b"\n") + 1]  # a line being written waits for the next check
        with self.snapshot.open("ab") as dst:
            dst.write(complete)
        self._copied += len(complete)
        self._lines += complete.count(b"\n")
        return self._lines


def _cancel_spark_jobs() -> None:
    """Cancel the running Spark jobs of this process: while the workload runs, only the live
    check has any (the final analysis starts after ``close``)."""
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.cancelAllJobs()
    except Exception:
        pass
