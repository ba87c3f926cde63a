"""End-to-end through the CLI, as a user runs it: cluster -> workload -> nemesis -> verdict."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from history import read_history
from tests.integration.conftest import ROOT, kafka_chaos, leftovers

pytestmark = pytest.mark.kafka


def _results(out: Path) -> dict:
    return json.loads((out / "latest" / "results.json").read_text())


def test_run_without_faults_is_valid(tmp_path):
    proc = kafka_chaos("run", "--time-limit", "12", "--nemesis", "none", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = _results(tmp_path)
    assert res["valid"] is True
    assert res["stats"]["send"]["ok"] > 100
    run_dir = (tmp_path / "latest").resolve()
    for name in ("history.jsonl", "config.json", "command.txt", "run.json"):
        assert (run_dir / name).is_file(), name
    assert list(run_dir.glob("nodes/n*/logs/server.log"))
    assert "valid = true" in proc.stdout


def test_kill_and_partition_with_min_isr_2_loses_nothing(tmp_path):
    proc = kafka_chaos("run", "--time-limit", "40", "--nemesis", "kill,partition",
                       "--nemesis-interval", "6", "--acks", "all", "--min-insync-replicas", "2",
                       "--seed", "7", "--out", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # a verdict, not an error
    res = _results(tmp_path)
    assert res["valid"] in (True, False)
    assert res["anomalies"]["lost-write"]["count"] == 0
    ops = read_history(tmp_path / "latest" / "history.jsonl")
    nemesis_fs = {op.f for op in ops if op.process == "nemesis" and op.type.value == "ok"}
    assert nemesis_fs & {"kill", "partition"}, nemesis_fs
    assert "heal-all" in nemesis_fs


@pytest.mark.parametrize("min_isr,expect_lost", [(1, True), (2, False)])
def test_isr_shrink_unclean_scenario(tmp_path, min_isr, expect_lost):
    proc = kafka_chaos("run", "--scenario", "isr-shrink-unclean",
                       "--min-insync-replicas", str(min_isr), "--out", str(tmp_path))
    res = _results(tmp_path)
    lost = res["anomalies"]["lost-write"]["count"]
    facts = res["run"]
    assert facts["scenario"].get("new_leader"), facts["scenario"]
    if expect_lost:
        assert lost > 0, proc.stdout
        assert proc.returncode == 1
    else:
        assert lost == 0, res["anomalies"]["lost-write"]


def test_invalid_combination_is_refused_before_anything_starts(tmp_path):
    proc = kafka_chaos("run", "--acks", "0", "--idempotence", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "idempotence" in proc.stdout and "acks" in proc.stdout
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_ctrl_c_heals_and_tears_down(tmp_path):
    runner = subprocess.Popen([sys.executable, "-m", "kafka_chaos", "run", "--time-limit", "120",
                               "--nemesis", "partition", "--nemesis-interval", "2",
                               "--out", str(tmp_path)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    history = tmp_path / "latest" / "history.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if history.exists() and any('"f":"partition"' in line and '"ok"' in line
                                    for line in history.read_text().splitlines()):
            break
        time.sleep(1)
    runner.send_signal(signal.SIGINT)
    out, _ = runner.communicate(timeout=120)
    assert runner.returncode == 2, out
    assert leftovers() == []
    assert read_history(history)  # the history of an interrupted run stays readable
