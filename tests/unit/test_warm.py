"""The warm-up check a short run makes while its workload goes (``analysis.warm``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kafka_chaos.analysis.warm import warm_up


@pytest.mark.spark
def test_warm_up_checks_every_kind_of_op_and_leaves_nothing(spark) -> None:
    # this process's own: runs of the other test worker warm up in the same directory
    mine = f"kc-warm-up-{os.getpid()}-*"
    before = set(Path(tempfile.gettempdir()).glob(mine))
    result = warm_up("local[2]")
    # a clean verdict with nothing unknown: every checker ran on it without raising
    assert result["valid"] is True and result["unknown_reasons"] == []
    assert result["anomaly_types"] == []
    # sends, polls, a transaction and an assign: the plans of every checker get compiled
    assert {f for f, n in result["stats"]["by_f"].items() if n["ok"]} == {
        "assign", "poll", "send", "txn"}
    assert result["stats"]["acked_sends"] == 3 and result["cycle_search"]["complete"]
    assert set(Path(tempfile.gettempdir()).glob(mine)) == before


def test_a_process_ending_during_the_warm_up_leaves_no_history_behind(tmp_path) -> None:
    """The warm-up runs on a daemon thread: a run interrupted (Ctrl-C, SIGTERM) while it
    checks ends the interpreter without running the thread's ``finally``; the temporary
    directory's own finalizer still removes the made-up history at exit."""
    script = (
        "import pathlib, sys, threading, time\n"
        "from kafka_chaos.analysis.warm import warm_up\n"
        "threading.Thread(target=warm_up, args=('local[1]',), daemon=True).start()\n"
        "tmp = pathlib.Path(sys.argv[1])\n"
        "while not list(tmp.glob('kc-warm-up-*/history.jsonl')):\n"
        "    time.sleep(0.05)\n"
        "print('made', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0 and "made" in proc.stdout, proc.stderr[-2000:]
    assert list(tmp_path.glob("kc-warm-up-*")) == []


def test_stale_warm_up_histories_go_and_live_ones_stay(tmp_path) -> None:
    """A run SIGKILLed while it warmed up leaves its directory; ``cluster down`` removes
    those whose process is gone (``remove_stale``), never a running process's."""
    from kafka_chaos.analysis.warm import PREFIX, remove_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    gone, alive = tmp_path / f"{PREFIX}{dead}-abc", tmp_path / f"{PREFIX}{os.getpid()}-def"
    for d in (gone, alive):
        d.mkdir()
        (d / "history.jsonl").write_text("{}\n")
    assert remove_stale(tmp_path) == [f"warm-up history {gone}"]
    assert not gone.exists() and alive.exists()
