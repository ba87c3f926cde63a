"""`kafka-chaos plan check` as a user runs it: offline by default (no download, no root, no
network), a short summary ending in one ``ok:`` line, JSON only with ``--json``, one error
line naming the line and key of a bad plan, and ``--online`` contacting the cluster a plan
attaches to."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos import options
from kafka_chaos.cli import app
from kafka_chaos.cli.plan import CONTACT_TIMEOUT_S
from kafka_chaos.cli.run import run_params
from kafka_chaos.errors import BadInput, Unreachable

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "plans").glob("*.yaml"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty Kafka cache (``dist.cache_root``): a check that downloaded jars would make
    it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def check(*args: str):
    return CliRunner().invoke(app, ["plan", "check", *map(str, args)])


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_every_shipped_plan_passes_offline_with_one_ok_line(path, cache):
    out = check(path)
    assert out.exit_code == 0, out.output
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith(f"ok: {path} — kafka-chaos ")
    assert [line for line in lines if line.startswith("ok:")] == lines[-1:]
    assert len(lines) <= 12 and out.stderr == ""
    assert not cache.exists()  # nothing downloaded (and, by the suite's hooks, nothing run)


def test_a_comparison_plan_shows_its_cells_and_repeats(cache):
    out = check(ROOT / "plans/acks-comparison.yaml")
    assert out.exit_code == 0, out.output
    assert "4 × 2 repeat(s), seeds 1, 2" in out.stdout
    assert "    acks=all min.insync.replicas=2" in out.stdout.splitlines()
    assert "kafka-chaos compare: 4 cells × 2 repeat(s) = 8 runs of 60 s" in out.stdout


def test_json_prints_parseable_json_only(cache):
    out = check("--json", ROOT / "plans/unclean-toggle.yaml")
    assert out.exit_code == 0, out.output
    cfg = json.loads(out.stdout)
    assert (cfg["keys"], cfg["min_insync_replicas"], cfg["replica_lag_time_max_ms"]) == \
        (1, 1, 3000)
    assert cfg["fail_on"] == "violation" and "compare" not in cfg
    assert "scenario unclean-toggle sets --keys 1" in out.stderr  # beside the JSON, not in it
    cfg = json.loads(check("--json", ROOT / "plans/acks-comparison.yaml").stdout)
    assert cfg["compare"] == {"cells": ["acks=1 min.insync.replicas=1",
                                        "acks=1 min.insync.replicas=2",
                                        "acks=all min.insync.replicas=1",
                                        "acks=all min.insync.replicas=2"], "repeats": 2}


@pytest.mark.parametrize("text,words", [
    ("workload:\n  time_limit_s: 5\n  acsk: all\n", ["line 3", "workload.acsk"]),
    ("topics:\n  count: 40\n", ["line 2", "topics.count"]),
    ("matrix: {acks: ['1', sometimes]}\n", ["line 1", "matrix.acks"]),
    ("cluster: {backend: ssh, inventory: nowhere.yaml}\n", ["nowhere.yaml"]),
    ("cluster: {kafka_home: nowhere}\n", ["--kafka-home", "nowhere"]),
    ("cluster: {kafka_version: '2.8.0'}\n", ["--kafka-version 2.8.0"]),
    ("checkers: {spark_master: 'local[0]'}\n", ["--spark-master", "local[0]"]),
    ("nemesis: {scenario: nope}\n", ["--scenario 'nope'"]),
])
def test_a_bad_plan_exits_254_with_one_line_naming_the_line_or_key(tmp_path, cache, text,
                                                                    words):
    out = check(_plan(tmp_path, text))
    assert out.exit_code == 254, out.output
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("error: --plan ") and all(w in out.stderr for w in words)


def test_offline_checks_the_spark_master_by_its_text_and_reaches_nothing(tmp_path, cache):
    out = check(_plan(tmp_path, "checkers: {spark_master: 'spark://127.0.0.1:1'}\n"))
    assert out.exit_code == 0, out.output


def test_scenario_settings_appear_as_the_flags_a_user_would_type(cache):
    out = check(ROOT / "plans/unclean-toggle.yaml")
    assert ("scenario unclean-toggle sets --keys 1, --topics 1, --replica-lag-time-max-ms 3000, "
            "--no-unclean-leader-election, --min-insync-replicas 1") in out.stdout
    assert "  settings  --scenario unclean-toggle --seed 4" in out.stdout.splitlines()
    out = check(ROOT / "plans/late-produce-unverified.yaml")
    assert "broker_properties producer.id.expiration.ms=10000" in out.stdout
    assert "plan only broker_properties transaction.partition.verification.enable=false" \
        in out.stdout
    assert "False" not in out.stdout and "{" not in out.stdout
    # run says it the same way (options.scenario_settings), kept settings too
    told: list[str] = []
    params, given = run_params(["--scenario", "unclean-toggle", "--unclean-leader-election",
                                "--time-limit", "12.5"], "kafka-chaos run")
    options.configure(params, given, announce=told.append)
    assert "keeping your --unclean-leader-election (the scenario sets " \
           "--no-unclean-leader-election;" in told[0]
    assert options.args_of("time_limit_s", 60.0) == ["--time-limit", "60"]
    assert options.args_of("time_limit_s", 12.5) == ["--time-limit", "12.5"]


@pytest.mark.parametrize("cluster", [
    "backend: external, bootstrap_servers: '127.0.0.1:1'",
    "backend: docker-attach, bootstrap_servers: '127.0.0.1:1', compose_project: p",
])
def test_online_an_unreachable_cluster_is_one_line_and_exit_254(tmp_path, cache, cluster):
    """The connection is refused at once: no Kafka, no Docker, nothing downloaded (the
    cluster is contacted before the jars are resolved)."""
    path = _plan(tmp_path, f"cluster: {{{cluster}}}\n")
    assert check(path).exit_code == 0  # offline: the cluster is not contacted
    start = time.monotonic()
    out = check("--online", path)
    assert out.exit_code == 254, out.output
    assert time.monotonic() - start < CONTACT_TIMEOUT_S
    assert out.stderr.strip().splitlines() == [
        f"error: --plan {path}: no bootstrap server of 127.0.0.1:1 answers: "
        + out.stderr.split("answers: ", 1)[1].strip()]
    assert "127.0.0.1:1" in out.stderr and "ok:" not in out.stdout
    assert not cache.exists()
    assert issubclass(Unreachable, BadInput)  # run exits 254 for it too
