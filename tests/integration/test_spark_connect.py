"""The analysis as a client of a warm Spark Connect server (``kafka-chaos spark-server``): the
server started from the pyspark installation, ``analyze --spark-master sc://...`` finding
exactly the anomalies seeded in a generated history, and everything refused or cleaned up
around it (a second server, an analysis without a server, the server's process and port once
stopped)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, history_gen
from tests.integration.conftest import kafka_chaos as _cli

pytestmark = pytest.mark.spark


def _kafka_chaos(*args) -> subprocess.CompletedProcess:
    return _cli(*map(str, args))


def _group_running(pgid: int) -> list[int]:
    """Processes of group ``pgid`` still running (a zombie has ended: init reaps it later)."""
    running = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            running.append(int(stat.parent.name))
    return running


def test_a_warm_spark_connect_server_finds_the_seeded_anomalies(tmp_path: Path) -> None:
    run = tmp_path / "run"
    expected = history_gen().generate(run, 8_000, anomalies=1, seed=13)
    port, state = free_port(), tmp_path / "server"
    url = f"sc://127.0.0.1:{port}"
    # the precondition: without a server the analysis is refused before it starts
    alone = _kafka_chaos("analyze", run, "--spark-master", url)
    assert alone.returncode == 254 and "no master answers" in alone.stderr, alone.stderr
    assert not (run / "results.json").exists()

    started = _kafka_chaos("spark-server", "start", "--port", port, "--dir", state,
                           "--warm-up", 1)
    try:
        assert started.returncode == 0, started.stdout + started.stderr[-3000:]
        assert f"--spark-master {url}" in started.stdout and "warmed up: " in started.stdout
        pid = json.loads((state / "server.json").read_text())["pid"]
        status = _kafka_chaos("spark-server", "status", "--dir", state)
        assert status.returncode == 0 and f"{url} (pid {pid}" in status.stdout, status.stdout
        twice = _kafka_chaos("spark-server", "start", "--port", port, "--dir", state)
        assert twice.returncode == 254 and "already runs" in twice.stderr, twice.stderr
        other = _kafka_chaos("spark-server", "start", "--port", port, "--dir",
                             tmp_path / "other", "--warm-up", 0)
        assert other.returncode == 254 and "is taken" in other.stderr, other.stderr

        proc = _kafka_chaos("analyze", run, "--spark-master", url)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # anomalies
        results = json.loads((run / "results.json").read_text())
        assert {n: a["count"] for n, a in results["anomalies"].items()
                if a["count"]} == expected
        assert results["stats"]["ops"] > 0 and results["cycle_search"]["complete"]
        assert results["unknown_reasons"] == []
    finally:
        stopped = _kafka_chaos("spark-server", "stop", "--dir", state)
    assert stopped.returncode == 0 and f"stopped {url} (pid {pid})" in stopped.stdout
    assert not (state / "server.json").exists()
    assert _group_running(pid) == []
    none = _kafka_chaos("spark-server", "status", "--dir", state)
    assert none.returncode == 0 and none.stdout.strip() == "none running", none.stdout
    gone = _kafka_chaos("analyze", run, "--spark-master", url)
    assert gone.returncode == 254 and "no master answers" in gone.stderr, gone.stderr
