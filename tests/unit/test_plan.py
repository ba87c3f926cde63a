"""Plan files: the ``cluster:`` section, its errors, and flags overriding it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos import plan
from kafka_chaos.cli import app
from kafka_chaos.config import RunConfig


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plans" / "p.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_the_cluster_section_becomes_run_settings(tmp_path):
    path = _plan(tmp_path, "cluster:\n  backend: ssh\n  inventory: ../hosts.yaml\n"
                 "  brokers: 5\n  kafka_version: 3.9.1\n"
                 "  broker_config: {num.io.threads: 4, log.preallocate: true}\n")
    fields = plan.run_fields(plan.load(path), path)
    assert fields == {"backend": "ssh", "inventory": str(tmp_path / "hosts.yaml"), "brokers": 5,
                      "kafka_version": "3.9.1",
                      "broker_properties": {"num.io.threads": "4", "log.preallocate": "true"}}
    cfg = RunConfig(**fields, replication_factor=3)
    assert cfg.broker_config()["num.io.threads"] == "4"
    assert cfg.broker_config()["min.insync.replicas"] == "2"  # the run's own options still set


@pytest.mark.parametrize("text,words", [
    ("cluster:\n  backend: local\n  topics: 3\n", ["line 3", "cluster.topics", "Extra inputs"]),
    ("cluster:\n  brokers: many\n", ["line 2", "cluster.brokers", "valid integer"]),
    ("clusters: {}\n", ["line 1", "clusters"]),
    ("cluster: [\n", ["not valid YAML"]),
])
def test_bad_plans_name_the_line_and_key(tmp_path, text, words):
    with pytest.raises(ValueError) as err:
        plan.load(_plan(tmp_path, text))
    assert str(err.value).startswith("--plan ") and all(w in str(err.value) for w in words)


def test_properties_the_run_owns_are_refused_in_broker_config():
    for key, words in (("min.insync.replicas", "--min-insync-replicas"),
                       ("node.id", "per node"), ("advertised.listeners", "per node")):
        with pytest.raises(ValueError, match=words):
            RunConfig(broker_properties={key: "1"})


def test_flags_on_the_command_line_override_the_plan(tmp_path):
    """Checked through errors raised before anything starts, so no cluster is needed."""
    path = _plan(tmp_path, "cluster:\n  brokers: 2\n")
    runner = CliRunner()
    out = runner.invoke(app, ["run", "--plan", str(path), "--replication-factor", "3"])
    assert out.exit_code == 2 and "exceeds" in out.output  # the plan's 2 brokers count
    out = runner.invoke(app, ["run", "--plan", str(path), "--replication-factor", "3",
                              "--brokers", "4", "--spark-master", "spark://127.0.0.1:1"])
    assert out.exit_code == 2 and "--spark-master" in out.output  # --brokers 4 won
    assert "exceeds" not in out.output
