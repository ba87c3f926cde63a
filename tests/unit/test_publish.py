"""``kafka-chaos publish``: a run directory copied whole, with a current columnar copy, under its
own name, never over an existing one (no Spark: files only)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kafka_chaos.cli import app
from kafka_chaos.history import columnar
from kafka_chaos.publish import PublishError, publish
from tests.queue_builder import Q


def _run(tmp_path):
    run_dir = tmp_path / "runs" / "20261124T120000"
    run_dir.mkdir(parents=True)
    Q().assign(1, [0]).send(0, [(0, 1), (0, 2)]).read_all(9).write(run_dir / "history.jsonl")
    (run_dir / "config.json").write_text("{}")
    (run_dir / "results.json").write_text('{"valid": true}')
    (tmp_path / "runs" / "latest").symlink_to(run_dir.name)
    return run_dir


def test_a_published_run_has_everything_and_a_current_copy(tmp_path):
    run_dir = _run(tmp_path)
    columnar.copy_dir(run_dir / "history.jsonl").joinpath("meta.json").unlink()  # incomplete
    target = publish(tmp_path / "runs" / "latest", tmp_path / "shared")
    assert target == tmp_path / "shared" / run_dir.name
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "history.jsonl",
                                                       "history.parquet", "results.json"]
    assert (target / "history.jsonl").read_bytes() == (run_dir / "history.jsonl").read_bytes()
    copy = columnar.current(target / "history.jsonl")  # made again, then copied
    assert copy is not None and copy.meta["ops"] == 6  # lines: assign, send, final read, 2 each
    assert [p.name for p in (tmp_path / "shared").iterdir()] == [run_dir.name]  # no temp left


def test_publishing_refuses_to_overwrite_and_names_the_problem(tmp_path):
    run_dir = _run(tmp_path)
    publish(run_dir, tmp_path / "shared")
    (tmp_path / "shared" / run_dir.name / "results.json").write_text("mine")
    with pytest.raises(PublishError, match="exists already"):
        publish(run_dir, tmp_path / "shared")
    assert (tmp_path / "shared" / run_dir.name / "results.json").read_text() == "mine"
    with pytest.raises(PublishError, match="no history.jsonl"):
        publish(tmp_path, tmp_path / "elsewhere")
    out = CliRunner().invoke(app, ["publish", str(run_dir), str(tmp_path / "shared")])
    assert out.exit_code == 254 and "exists already" in out.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "history.jsonl").write_text('{"format": 2}\n{"index": 0, "oops": 1}\n')
    out = CliRunner().invoke(app, ["publish", str(bad), str(tmp_path / "shared")])
    assert out.exit_code == 254 and "line 2" in out.output and not (tmp_path / "shared" /
                                                                   "bad").exists()
