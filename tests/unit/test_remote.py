"""`kafka-chaos publish URL` and `kafka-chaos analyze URL --out DIR` through the Hadoop file
system of the Spark session (``analysis.remote``), here with ``file://`` URLs: the same code
path as ``hdfs://`` (tested against HDFS in tests/integration/test_spark_standalone.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos.cli import app
from tests.unit.test_cli_analyze import files, run_dir, with_duplicates


def cli(*args: str):
    # wide enough for a long temporary path (an xdist worker's) on one line
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return res, " ".join(res.output.split())


@pytest.mark.spark
def test_a_run_published_to_a_url_is_analysed_from_there(spark, tmp_path: Path) -> None:
    d = run_dir(tmp_path, with_duplicates(), facts={"seed": 7})
    store = (tmp_path / "store").as_uri()
    res, text = cli("publish", str(d), store)
    assert res.exit_code == 0 and f"published: {store}/run" in text, text
    published = tmp_path / "store" / "run"
    assert {"history.jsonl", "results.json", "history.parquet/meta.json",
            "history.parquet/reads.parquet"} <= set(files(published))
    res, text = cli("publish", str(d), store)
    assert res.exit_code == 254 and "exists already" in text  # never overwritten

    res, text = cli("analyze", f"{store}/run")
    assert res.exit_code == 254 and "give --out DIR" in text
    before = files(published)
    out = tmp_path / "verdict"
    res, text = cli("analyze", f"{store}/run", "--out", str(out), "--fail-on", "any")
    assert res.exit_code == 1, text  # the permitted duplicate, under --fail-on any
    # no fetched copy left
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html",
                                                     "results.json", "summary.md"]
    saved = json.loads((out / "results.json").read_text())
    assert saved["anomaly_types"] == ["duplicate"] and saved["run"] == {"seed": 7}
    assert f"{store}/run" in (out / "report.html").read_text()
    assert files(published) == before
    res, _ = cli("analyze", str(d), "--fail-on", "any")
    assert res.exit_code == 1
    here = json.loads((d / "results.json").read_text())
    for key in ("valid", "anomalies", "stats", "violations"):
        assert saved[key] == here[key], key

    # a history changed after publishing no longer matches its columnar copy
    history = published / "history.jsonl"
    history.write_bytes(history.read_bytes()[:-1])
    res, text = cli("analyze", f"{store}/run", "--out", str(out))
    assert res.exit_code == 254 and "publish the run directory again" in text, text
    (published / "history.parquet" / "meta.json").unlink()
    res, text = cli("analyze", f"{store}/run", "--out", str(out))
    assert res.exit_code == 254 and "no complete columnar copy" in text, text
    res, text = cli("analyze", f"{store}/elsewhere", "--out", str(out))
    assert res.exit_code == 254 and "no history.jsonl here" in text, text
    assert json.loads((out / "results.json").read_text()) == saved  # left as it was
