"""`kafka-chaos cluster up | status | down` and distribution options, for real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from junitparser import JUnitXml
from typer.testing import CliRunner

from kafka_chaos.clusters import backends, dist, kafka_cds
from kafka_chaos.clusters.errors import DistributionError
from kafka_chaos.cli import app
from tests.integration.conftest import (ROOT, backend_param, down_removed, kafka_chaos, leftovers,
                                      prepare)

pytestmark = pytest.mark.kafka


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # a process that ended meanwhile
        return b""


def test_cluster_up_status_down(tmp_path):
    up = kafka_chaos("cluster", "up", "--dir", str(tmp_path / "cluster"))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "10.77.0.11:9092" in up.stdout
        status = kafka_chaos("cluster", "status")
        assert status.stdout.count("running") == 3, status.stdout
        # each broker JVM mapped the class archive of its Kafka (clusters/kafka_cds.py)
        archive = kafka_cds.archive(dist.resolve(), shutil.which("java"))
        brokers = [p.parent for p in Path("/proc").glob("[0-9]*/cmdline")
                   if b"kafka.Kafka" in _read(p) and str(tmp_path).encode() in _read(p)]
        assert len(brokers) == 3
        assert all(str(archive) in (b / "maps").read_text() for b in brokers), archive
        # a run must not take over (or tear down) a cluster somebody else started
        clash = kafka_chaos("run", "--time-limit", "1", "--out", str(tmp_path / "runs"))
        assert clash.returncode == 255 and "already running" in clash.stderr, clash.stderr
        # a run whose cluster never came up still leaves CI its verdict: unknown
        crashed = tmp_path / "runs" / "latest"
        res = json.loads((crashed / "results.json").read_text())
        assert res["verdict"] == "unknown" and res["valid"] is None, res
        assert "already running" in res["unknown_reasons"][0]
        [suite] = list(JUnitXml.fromfile(str(crashed / "junit.xml")))
        assert suite.errors >= 7 and "config=" in suite.name
        assert (crashed / "summary.md").read_text().startswith("## kafka-chaos: unknown")
        assert kafka_chaos("cluster", "status").stdout.count("running") == 3
    finally:
        down = kafka_chaos("cluster", "down")
    assert "removed broker process" in down.stdout, down.stdout
    # what `up` made goes: the nodes' data (their logs stay), so `up` works again
    said = " ".join(down.stdout.split())
    assert all(f"removed data of node n{i}" in said for i in (1, 2, 3)), said
    assert not list((tmp_path / "cluster").glob("*/data"))
    assert (tmp_path / "cluster" / "n1" / "logs").is_dir()
    assert leftovers() == []
    assert "no local cluster recorded" in kafka_chaos("cluster", "status").stdout
    again = kafka_chaos("cluster", "up", "--dir", str(tmp_path / "cluster"))
    down = kafka_chaos("cluster", "down")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "removed broker process" in down.stdout and leftovers() == []


# the full suite's: local and docker (the longer tier runs ssh's, docs/nightly.md)
@pytest.mark.parametrize("name", [backend_param(n, marks=(pytest.mark.long,) if n == "ssh" else ())
                                  for n in backends.OWN])
def test_a_sigkilled_run_leaves_what_cluster_down_removes(request, tmp_path, name):
    """SIGKILL the runner mid-run (no teardown at all): brokers, containers, networks, remote
    processes, chains and node directories stay; `cluster down` alone removes every one."""
    options, args = prepare(request, name, dist.resolve(), [["broker", "controller"]] * 3,
                            tmp_path / "inventory.yaml")
    runner = subprocess.Popen(
        [sys.executable, "-m", "kafka_chaos", "run", *args, "--time-limit", "120", "--nemesis",
         "partition", "--nemesis-interval", "1", "--out", str(tmp_path / "runs")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    history = tmp_path / "runs" / "latest" / "history.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (history.exists() and any(
            '"f":"partition"' in line for line in history.read_text().splitlines())):
        time.sleep(0.5)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    backend = backends.get(name)
    state = backend.status(options)
    assert state is not None and all(state["alive"].values()), state
    left = leftovers()
    assert left, "a SIGKILLed run left nothing behind?"
    if name == "ssh":
        remote = request.getfixturevalue("ssh_hosts").root / "remote"
        assert any("-chaos-" in rule for rule in left) and list(remote.glob("kc-n*"))
    down = kafka_chaos("cluster", "down", "--backend", name)
    assert down.returncode == 0 and "removed" in down.stdout, down.stdout
    assert leftovers() == [] and backend.status(options) is None
    if name == "ssh":
        assert not list(remote.glob("kc-n*"))
    assert down_removed(kafka_chaos("cluster", "down", "--backend", name)) == []


def test_kafka_home_uses_an_unpacked_distribution(tmp_path):
    cached = dist.resolve()
    (tmp_path / "libs").symlink_to(cached.libs)
    home = dist.from_home(tmp_path)
    assert home.version == dist.DEFAULT_KAFKA_VERSION
    assert "kafka_2.13-" in home.classpath
    with pytest.raises(DistributionError, match="no libs/kafka_2.13"):
        dist.from_home(tmp_path / "nowhere")


def test_old_or_missing_java_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "java"
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(DistributionError, match="Java 11 is too old"):
        dist.check_java()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(DistributionError, match="java not found"):
        dist.check_java()


@pytest.mark.parametrize("command", [["cluster", "up"], ["run", "--time-limit", "1"]])
def test_non_root_gets_one_clear_error(tmp_path, monkeypatch, command):
    """Without root the local backend refuses before creating or downloading anything."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    where = ["--out" if command[0] == "run" else "--dir", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*command, *where])
    assert result.exit_code == 254, result.output
    assert "needs root" in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
