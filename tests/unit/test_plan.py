"""Plan files: the ``cluster:`` section, its errors, and flags overriding it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos import plan
from kafka_chaos.cli import app
from kafka_chaos.admission import admit
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
    assert out.exit_code == 254 and "exceeds" in out.output  # the plan's 2 brokers count
    out = runner.invoke(app, ["run", "--plan", str(path), "--replication-factor", "3",
                              "--brokers", "4", "--spark-master", "spark://127.0.0.1:1"])
    assert out.exit_code == 254 and "--spark-master" in out.output  # --brokers 4 won
    assert "exceeds" not in out.output


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "plans").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_plan_gives_a_valid_run(path):
    out = CliRunner().invoke(app, ["plan", "check", "--json", str(path)])
    assert out.exit_code == 0, out.output
    import json

    cfg = json.loads(out.stdout)
    cfg.pop("compare", None)
    assert RunConfig(**{k: v for k, v in cfg.items() if k != "fail_on"})
    assert cfg["fail_on"] in ("violation", "any")
    if cfg["scenario"]:  # what the run will use: the scenario's settings, and it says so
        assert cfg["scenario_settings"] and f"scenario {cfg['scenario']} sets" in out.stderr
        for field, value in cfg["scenario_settings"].items():
            assert cfg[field] == value, field


@pytest.mark.root
@pytest.mark.jvm
def test_plan_check_online_refuses_what_run_refuses(tmp_path):
    """A Kafka version Maven Central does not have stops ``plan check --online`` as it stops
    ``run`` (offline, only its text is checked); a missing inventory stops both, offline
    too."""
    for text, words, offline in (("cluster: {kafka_version: '9.9.9'}\n", "9.9.9", 0),
                                 ("cluster: {backend: ssh, inventory: nowhere.yaml}\n",
                                  "nowhere.yaml", 254)):
        path = _plan(tmp_path, text)
        assert CliRunner().invoke(app, ["plan", "check", str(path)]).exit_code == offline
        for args in (["plan", "check", "--online", str(path)], ["run", "--plan", str(path)]):
            out = CliRunner().invoke(app, args)
            assert out.exit_code == 254 and words in out.output, (args, out.output)


def test_every_section_reaches_the_run(tmp_path):
    path = _plan(tmp_path, "topics: {count: 2, keys: 8, min_insync_replicas: 1}\n"
                 "workload:\n  time_limit_s: 12\n  acks: 1\n  ops_per_txn: [2, 3]\n"
                 "  sub_via: subscribe\n"
                 "nemesis: {faults: [kill, clock], targets: [leader, 2], interval_s: 3}\n"
                 "checkers: {fail_on: any, stop_on_violation: true, live_interval_s: 4}\n"
                 "seed: 9\n")
    fields = plan.run_fields(plan.load(path), path)
    assert fields == {"topics": 2, "keys": 8, "min_insync_replicas": 1, "time_limit_s": 12,
                      "acks": "1", "ops_per_txn": (2, 3), "sub_via": "subscribe",
                      "nemesis": ["kill", "clock"], "nemesis_interval_s": 3,
                      "nemesis_targets": "leader,2", "fail_on": "any", "seed": 9,
                      "stop_on_violation": True, "live_interval_s": 4}
    fields.pop("fail_on")
    cfg = RunConfig(**fields)
    assert admit(cfg).backend.clock and cfg.follows_live and not cfg.live
    scenario = _plan(tmp_path, "nemesis: {scenario: my.yaml}\n")
    assert plan.run_fields(plan.load(scenario), scenario)["scenario"] == str(
        tmp_path / "plans" / "my.yaml")


@pytest.mark.parametrize("text,words", [
    ("workload:\n  time_limit_s: 5\n  acsk: all\n", ["line 3", "workload.acsk", "Extra inputs"]),
    ("workload:\n  rate: fast\n", ["line 2", "workload.rate", "valid number"]),
    ("workload:\n  rate: -1\n", ["line 2", "workload.rate", "greater than 0"]),
    ("topics:\n  count: 40\n", ["line 2", "topics.count", "less than or equal to 16"]),
    ("nemesis:\n  faults: kill\n", ["line 2", "nemesis.faults", "valid list"]),
    ("checkers:\n  fail_on: sometimes\n", ["line 2", "checkers.fail_on", "violation"]),
    ("checkers:\n  live_interval_s: 0.1\n", ["line 2", "checkers.live_interval_s",
                                              "greater than or equal to 1"]),
    ("seed: [1]\n", ["line 1", "seed"]),
])
def test_typos_wrong_types_and_bad_values_name_the_key_path(tmp_path, text, words):
    with pytest.raises(ValueError) as err:
        plan.load(_plan(tmp_path, text))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_bad_combinations_in_a_plan_are_refused_and_flags_override_it(tmp_path):
    runner = CliRunner()
    bad = _plan(tmp_path, "workload: {acks: 1, idempotence: true}\n"
                "nemesis: {faults: [kill], scenario: zombie-leader}\n")
    out = runner.invoke(app, ["plan", "check", str(bad)])
    assert out.exit_code == 254 and "idempotence" in out.output
    path = _plan(tmp_path, "workload: {acks: 1, idempotence: true}\n")
    out = runner.invoke(app, ["run", "--plan", str(path), "--acks", "all", "--brokers", "2"])
    assert out.exit_code == 254 and "exceeds" in out.output  # --acks all won over the plan's 1
    out = runner.invoke(app, ["run", "--plan", str(path), "--brokers", "2"])
    assert out.exit_code == 254 and "idempotence" in out.output


def test_the_schema_covers_every_section():
    import json

    out = CliRunner().invoke(app, ["plan", "schema"])
    schema = json.loads(out.output)
    assert set(schema["properties"]) == {"cluster", "topics", "workload", "nemesis", "checkers",
                                         "seed", "matrix", "repeats"}
    assert schema["properties"]["repeats"]["anyOf"][0]["minimum"] == 1
    workload = schema["$defs"]["WorkloadPlan"]
    assert workload["additionalProperties"] is False
    assert {"acks", "idempotence", "txn", "isolation_level", "time_limit_s"} <= set(
        workload["properties"])


def test_checkers_allow_and_forbid_override_the_promises_table(tmp_path):
    from kafka_chaos.analysis.promises import facts_of, judge

    path = _plan(tmp_path, "checkers: {forbid: [duplicate], allow: [lost-write]}\n")
    fields = plan.run_fields(plan.load(path), path)
    facts = facts_of(RunConfig(**fields).model_dump(mode="json"))
    # the default producer retries without idempotence: Kafka documents duplicates (of a
    # non-transactional writer: judged per finding)
    default = judge("duplicate", facts_of(RunConfig().model_dump(mode="json")))
    assert default["per_case"] and default["rule"] == "retries-without-idempotence"
    assert judge("duplicate", facts) == {"per_case": False, "permitted": False, "rule": None,
                                         "because": "the plan forbids it, whatever Kafka "
                                         "documents", "source": "plan checkers.forbid"}
    assert judge("lost-write", facts)["rule"] == "plan-allows"
    with pytest.raises(ValueError, match=r"line 1, checkers.allow: .*unknown anomaly 'lost'"):
        plan.load(_plan(tmp_path, "checkers: {allow: [lost]}\n"))
    with pytest.raises(ValueError, match="both allowed and forbidden"):
        RunConfig(allow=["G0"], forbid=["G0"])
