"""`kafka-chaos analyze` as a user runs it: exit codes, --fail-on, what results.json keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos import analysis
from kafka_chaos.cli import app
from kafka_chaos.history import columnar
from tests.queue_builder import Q


def run_dir(tmp_path: Path, q: Q, facts: dict | None = None) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    q.write(d / "history.jsonl")
    if facts is not None:
        (d / "results.json").write_text(json.dumps({"valid": True, "run": facts}))
    return d


def files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def analyze(d: Path, *args: str):
    return CliRunner().invoke(app, ["analyze", str(d), *args])


def with_duplicates() -> Q:
    """A run of the default configuration (idempotence off) whose only finding is a
    duplicate, which that configuration permits."""
    q = Q(idempotence=False).send(0, [(0, 1)], offsets=[0])
    return q.final(1, 0, [(0, 1), (1, 1)])


@pytest.mark.spark
def test_permitted_anomalies_exit_0_under_violation_and_1_under_any(spark, tmp_path) -> None:
    d = run_dir(tmp_path, with_duplicates(), facts={"seed": 7, "kafka_version": "4.4.0"})
    res = analyze(d)
    assert res.exit_code == 0, res.output
    assert "permitted by retries-without-idempotence: duplicate" in " ".join(res.output.split())
    saved = json.loads((d / "results.json").read_text())
    assert saved["valid"] is True and saved["permitted"] == ["duplicate"]
    assert saved["run"] == {"seed": 7, "kafka_version": "4.4.0"}  # the run's facts are kept
    assert saved["fail_on"] == "violation"
    res = analyze(d, "--fail-on", "any")
    assert res.exit_code == 1, res.output
    assert json.loads((d / "results.json").read_text())["run"]["seed"] == 7


@pytest.mark.spark
def test_a_violation_exits_1(spark, tmp_path) -> None:
    d = run_dir(tmp_path, with_duplicates().__class__(idempotence=True)
                .send(0, [(0, 1)], offsets=[0]).final(1, 0, [(0, 1), (1, 1)]))
    res = analyze(d)
    assert res.exit_code == 1 and "VIOLATION" in res.output, res.output


def test_bad_input_is_exit_254_and_leaves_results_json_alone(tmp_path) -> None:
    d = run_dir(tmp_path, Q(), facts={"seed": 1})  # a header and no op
    before = (d / "results.json").read_text()
    res = analyze(d)
    assert res.exit_code == 254 and "holds no ops" in res.output
    (d / "history.jsonl").write_bytes(b'{"index":0,"time":1,"process":0,"type":"invoke",'
                                      b'"f":"poll","value":[["poll"]],"error":"\xff"}\n')
    res = analyze(d)
    assert res.exit_code == 254 and "line 1: not valid JSON or not UTF-8" in res.output
    assert (d / "results.json").read_text() == before
    assert analyze(d, "--fail-on", "some").exit_code == 254
    assert analyze(d, "--spark-master", "mesos://x").exit_code == 254
    for url, why in (("sc://127.0.0.1:1", "no master answers"),
                     ("sc://127.0.0.1:x", "not a Spark master URL")):
        res = analyze(d, "--spark-master", url)
        assert res.exit_code == 254 and why in res.output, res.output
    assert analyze(tmp_path / "nowhere").exit_code == 254


@pytest.mark.parametrize("error", [KeyboardInterrupt, MemoryError, RuntimeError])
def test_a_crash_of_the_analysis_is_255_an_interrupt_unknown(tmp_path, monkeypatch,
                                                              error) -> None:
    d = run_dir(tmp_path, with_duplicates(), facts={"seed": 1})

    def crash(*args, **kwargs):
        raise error("simulated")
    monkeypatch.setattr(analysis, "check", crash)
    res = analyze(d)
    assert res.exit_code == (2 if error is KeyboardInterrupt else 255), res.output
    assert json.loads((d / "results.json").read_text()) == {"valid": True, "run": {"seed": 1}}


@pytest.mark.root
@pytest.mark.spark
@pytest.mark.xdist_group("beside")  # the mount is its own tmp_path's: beside the others
@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_a_read_only_run_directory_is_analysed_into_out(spark, tmp_path, monkeypatch) -> None:
    d = run_dir(tmp_path, with_duplicates(), facts={"seed": 3})
    before = files(d)
    monkeypatch.setenv(columnar.CACHE_ENV, str(tmp_path / "cache"))
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(d), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        res = analyze(ro)
        assert res.exit_code == 254 and "give --out DIR" in " ".join(res.output.split())
        out = tmp_path / "verdicts" / "run"
        res = analyze(ro, "--out", str(out), "--fail-on", "any")
        assert res.exit_code == 1, res.output  # the permitted duplicate, under --fail-on any
        saved = json.loads((out / "results.json").read_text())
        assert saved["anomaly_types"] == ["duplicate"] and saved["run"] == {"seed": 3}
        assert "duplicate" in (out / "junit.xml").read_text()
        assert "duplicate" in (out / "report.html").read_text()
        assert files(ro) == before  # nothing written there
        (out / "results.json").write_text(json.dumps({"run": {"seed": 4}}))
        assert analyze(ro, "--out", str(out)).exit_code == 0  # a second verdict there
        assert json.loads((out / "results.json").read_text())["run"] == {"seed": 4}
        assert analyze(ro, "--out", str(out / "results.json")).exit_code == 254  # a file
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_a_typo_is_bad_input_not_an_unknown_verdict(tmp_path) -> None:
    """Exit 2 is the unknown verdict's; an unknown option or a bad value is 254 (Jepsen's code
    for bad arguments), as every other bad input is."""
    for args in (["analyze", str(tmp_path), "--no-such-option"], ["run", "--rate", "many"],
                 ["nosuchcommand"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 254, (args, res.output)
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("kafka-chaos ")
    # a flag takes no value: the help must not show one (``--json true`` used to look right)
    for command in (["run"], ["history"], ["cluster", "up"], ["spark-archive"]):
        text = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output
        flags = [line for line in text.splitlines() if "<bool>" in line and "--help" not in line]
        assert flags == [], (command, flags)


@pytest.mark.spark
def test_a_fresh_analysis_prints_no_jvm_start_up_lines_but_the_jvms_errors(tmp_path) -> None:
    """The driver JVM's start-up chatter (the JDK's incubator-module warning, Spark's log
    level hint) stays out of the terminal (``analysis.jvm``); what a JVM that cannot start
    prints still reaches the user, with exit 255."""
    d = run_dir(tmp_path, with_duplicates())
    command = [sys.executable, "-m", "kafka_chaos", "analyze", str(d)]
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_CHAOS_SPARK_CONF"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and "Verdict: valid" in done.stdout, done.stderr
    assert done.stderr == ""
    broken = {**env, "KAFKA_CHAOS_SPARK_CONF":
              f"spark.driver.extraJavaOptions=-javaagent:{tmp_path / 'missing.jar'}"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=broken)
    assert done.returncode == 255, done.stdout + done.stderr
    assert "missing.jar" in done.stderr and "incubator" not in done.stderr


def test_the_jvm_stderr_copy_leaves_out_only_the_start_up_lines(capsys) -> None:
    from kafka_chaos.analysis.jvm import _forward

    read, write = os.pipe()
    os.write(write, b"WARNING: Using incubator modules: jdk.incubator.vector\n"
             b'Setting default log level to "WARN".\nTo adjust logging level use '
             b"sc.setLogLevel(newLevel).\nERROR SparkContext: out of memory\n")
    os.close(write)
    _forward(read)
    assert capsys.readouterr().err == "ERROR SparkContext: out of memory\n"
