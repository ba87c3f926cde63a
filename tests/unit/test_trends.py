"""``kafka-chaos history``: verdicts and rates across stored runs, grouped by configuration."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kafka_chaos.compare import trends
from kafka_chaos.cli import app
from kafka_chaos.config import RunConfig
from tests import compare_builder
from tests.markdown_rows import markdown_rows
from tests.verdicts import verdict


def _night(runs: Path, stamp: str, config: RunConfig, found: dict, acked: int = 1000,
           reasons: tuple[str, ...] = ()) -> Path:
    """A run directory named as ``new_run_dir`` names them, with a hand-made verdict."""
    d = runs / stamp
    d.mkdir(parents=True)
    (d / "config.json").write_text(config.model_dump_json())
    res = verdict(config.model_dump(mode="json"), found, reasons=reasons, facts={"seed": 1})
    res["stats"] = {"acked_sends": acked}
    res["availability"] = {"sends": acked + 50, "acked": acked,
                           "ack_share": acked / (acked + 50)}
    (d / "results.json").write_text(json.dumps(res))
    return d


def test_runs_are_grouped_by_configuration_whatever_their_seed(tmp_path):
    runs = tmp_path / "runs"
    safe = RunConfig(idempotence=True, nemesis=["kill", "partition"])
    acks1 = RunConfig(acks="1", nemesis=["kill"])
    _night(runs, "20261120T020000", safe.model_copy(update={"seed": 1}), {})
    _night(runs, "20261121T020000", safe.model_copy(update={"seed": 2}),
           {"G0": (4, [])})  # permitted: concurrent producers interleave
    _night(runs, "20261122T020000", safe.model_copy(update={"seed": 3}),
           {"duplicate": (2, [])})  # idempotent: a violation
    _night(runs, "20261123T020000", safe.model_copy(update={"seed": 4}), {},
           reasons=("no ok final read of key(s) 0",))
    _night(runs, "20261121T030000", acks1, {"lost-write": (5, [])}, acked=2000)
    _night(runs, "20261122T030000", acks1, {"lost-write": (1, [])}, acked=500)
    (runs / "20261123T040000").mkdir()  # cut short: no results.json
    groups = trends.trends(trends.scan(runs))
    assert [g.label for g in groups] == ["acks=1 nemesis=kill",
                                         "idempotence=true nemesis=kill,partition"]
    lossy, safe_group = groups
    assert safe_group.marks == ".pX?" and lossy.marks == "pp"
    assert safe_group.runs[2].violations == ["duplicate"]
    assert lossy.series("lost-write") == [25.0, 20.0]
    assert lossy.as_dict()["lost-write"] == {"first": 25.0, "last": 20.0, "mean": 22.5}
    assert [g.marks for g in trends.trends(trends.scan(runs), last=2)] == ["pp", "X?"]


def test_the_history_command_reads_comparisons_too(tmp_path):
    compare_builder.build(tmp_path / "runs", html=False)
    night = _night(tmp_path / "runs", "20261124T020000", RunConfig(acks="1", nemesis=["kill"]),
                   {"lost-write": (3, [])})
    out = CliRunner().invoke(app, ["history", str(tmp_path / "runs"), "--json"])
    assert out.exit_code == 0, out.output
    groups = json.loads(out.output)
    paths = {r["path"] for g in groups for r in g["runs"]}
    assert str(night) in paths and len(paths) == 3  # two runs of the comparison have a verdict
    fixture = next(g for g in groups if any("seed-3" in r["path"] for r in g["runs"]))
    assert fixture["runs"][0]["verdict"] == "violation"
    out = CliRunner().invoke(app, ["history", str(tmp_path / "runs"), "--runs"],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "acks=1 nemesis=kill" in out.output, out.output
    assert "violations: lost-write, inconsistent-offsets" in " ".join(out.output.split())
    # for a CI job summary: a Markdown table, a row per configuration, nothing cut short
    out = CliRunner().invoke(app, ["history", str(tmp_path / "runs"), "--format", "markdown"])
    assert out.exit_code == 0, out.output
    rows = markdown_rows(out.stdout)
    assert rows[0][:4] == ["configuration", "group", "runs", "verdicts"]
    assert [r[:5] for r in rows[1:]] == [[g["label"], g["group"], str(len(g["runs"])),
                                          g["marks"], g["runs"][-1]["verdict"]] for g in groups]
    assert CliRunner().invoke(app, ["history", str(tmp_path / "runs"), "--format",
                                    "yaml"]).exit_code == 254
    empty = tmp_path / "empty"
    empty.mkdir()
    assert CliRunner().invoke(app, ["history", str(empty)]).exit_code == 254
