"""Comparison matrices: keys, values and cells (``kafka_chaos.matrix``), the plan's
``matrix:`` and ``repeats:`` sections, and which cells a comparison runs (``compare.prepare``); all
before anything starts, so no cluster is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafka_chaos.compare import core as compare
from kafka_chaos import matrix
from kafka_chaos import plan as plan_file
from kafka_chaos.cli import app
from kafka_chaos.config import RunConfig


@pytest.mark.parametrize("key,field", [
    ("acks", "acks"), ("min.insync.replicas", "min_insync_replicas"),
    ("min-insync-replicas", "min_insync_replicas"), ("unclean", "unclean_leader_election"),
    ("unclean.leader.election.enable", "unclean_leader_election"),
    ("enable.idempotence", "idempotence"), ("Idempotence", "idempotence"),
    ("max.in.flight.requests.per.connection", "max_in_flight"), ("kafka", "kafka_version"),
    ("time-limit", "time_limit_s"), ("faults", "nemesis")])
def test_a_setting_is_named_as_the_option_the_field_or_the_kafka_config(key, field):
    assert matrix.field_of(key) == field


def test_values_take_the_types_and_bounds_of_their_run_option():
    dim = matrix.parse_option("acks=1, all")
    assert dim == matrix.Dimension("acks", ("1", "all")) and dim.label == "acks"
    assert matrix.parse_option("unclean=false,true").values == (False, True)
    assert matrix.parse_option("min.insync.replicas=1,2").values == (1, 2)
    assert matrix.parse_option("nemesis=kill,kill+partition,none").values == \
        (["kill"], ["kill", "partition"], [])
    assert matrix.parse_option("ops-per-txn=1..4,2").values == ((1, 4), (2, 2))
    # YAML's own types, as a plan gives them
    assert matrix.dimension("acks", [1, "all"], "matrix.acks").values == ("1", "all")
    assert matrix.dimension("nemesis", [["kill", "pause"]], "m").values == (["kill", "pause"],)


@pytest.mark.parametrize("text,words", [
    ("acsk=1,all", ["--matrix acsk=1,all", "'acsk' is no run setting"]),
    ("acks=2", ["'2'", "'0', '1' or 'all'"]),
    ("min.insync.replicas=0", ["'0'", "greater than or equal to 1"]),
    ("brokers=many", ["'many'", "valid integer"]),
    ("seed=1,2", ["cannot vary", "--repeats"]),
    ("backend=local,docker", ["cannot vary", "one cluster backend"]),
    ("acks=", ["no value"]), ("acks", ["KEY=VALUE"]),
    ("acks=1,1", ["1 given twice"]),
    ("nemesis=kill+flood", ["unknown fault 'flood'"])])
def test_bad_matrix_options_are_refused_naming_them(text, words):
    with pytest.raises(ValueError) as err:
        matrix.parse_option(text)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_cells_are_every_combination_first_setting_slowest():
    dims = [matrix.parse_option("acks=1,all"), matrix.parse_option("min.insync.replicas=1,2"),
            matrix.parse_option("nemesis=kill,kill+partition")]
    cells = matrix.cells(dims)
    assert len(cells) == 8
    assert cells[0].label == "acks=1 min.insync.replicas=1 nemesis=kill"
    assert cells[1].settings == {"acks": "1", "min_insync_replicas": 1,
                                 "nemesis": ["kill", "partition"]}
    assert cells[-1].id == "8_acks=all_min.insync.replicas=2_nemesis=kill+partition"
    assert len({c.id for c in cells}) == 8
    assert [c.label for c in matrix.cells([])] == ["base"]  # repeats only
    with pytest.raises(ValueError, match="min.insync.replicas is given twice"):
        matrix.check_distinct([dims[1], matrix.parse_option("min-insync-replicas=3")])


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.root
@pytest.mark.jvm
def test_a_plans_matrix_and_repeats_sections(tmp_path):
    path = _plan(tmp_path, "workload: {acks: all}\nmatrix:\n  acks: [1, all]\n"
                 "  unclean.leader.election.enable: [false, true]\nrepeats: 3\n")
    plan = plan_file.load(path)
    assert plan.compares and plan.repeats == 3
    dims = plan_file.dimensions(plan, path)
    assert [(d.field, d.values) for d in dims] == [("acks", ("1", "all")),
                                                  ("unclean_leader_election", (False, True))]
    out = CliRunner().invoke(app, ["plan", "check", "--json", str(path)])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)["compare"]
    assert shown == {"cells": ["acks=1 unclean=false", "acks=1 unclean=true",
                               "acks=all unclean=false", "acks=all unclean=true"],
                     "repeats": 3}
    # one configuration per run: a plan with a matrix belongs to compare
    out = CliRunner().invoke(app, ["run", "--plan", str(path)])
    assert out.exit_code == 254 and "kafka-chaos compare" in out.output


@pytest.mark.parametrize("text,words", [
    ("seed: 1\nmatrix:\n  acks: [1, all]\n  acsk: [1]\n", ["line 4", "matrix.acsk",
                                                            "no run setting"]),
    ("matrix:\n  acks: [1, 2]\n", ["line 2", "matrix.acks", "'0', '1' or 'all'"]),
    ("matrix:\n  acks: all\n", ["line 2", "matrix.acks", "valid list"]),
    ("matrix:\n  acks: [1]\n  min.insync.replicas: [1]\n  min_insync_replicas: [2]\n",
     ["line 4", "matrix.min_insync_replicas", "given twice"]),
    ("repeats: 0\n", ["line 1", "repeats", "greater than or equal to 1"]),
])
def test_bad_matrix_sections_name_the_line_and_key(tmp_path, text, words):
    with pytest.raises(ValueError) as err:
        plan_file.load(_plan(tmp_path, text))
    assert str(err.value).startswith("--plan ") and all(w in str(err.value) for w in words), \
        str(err.value)


def _params(**given) -> tuple[dict, set[str]]:
    """The ``run`` command's parameters with ``given`` set on its command line."""
    import typer

    run = typer.main.get_command(app).commands["run"]
    args = []
    for name, value in given.items():
        flag = "--" + name.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    ctx = run.make_context("run", args)
    return dict(ctx.params), set(given)


def test_invalid_combinations_are_skipped_and_bad_values_refused():
    params, given = _params(nemesis="kill", time_limit=7, seed=5)
    dims = [matrix.parse_option("acks=1,all"), matrix.parse_option("idempotence=false,true")]
    manifest = compare.prepare(params, given, dims, repeats=2)
    cells = manifest["cells"]
    assert [("skipped" in c) for c in cells] == [False, True, False, False]
    assert "acks=all" in cells[1]["skipped"] and "KIP-98" in cells[1]["skipped"]
    assert manifest["seeds"] == [5, 6] and manifest["fail_on"] == "violation"
    cfg = RunConfig(**cells[3]["config"])
    assert (cfg.acks, cfg.idempotence, cfg.nemesis, cfg.time_limit_s) == \
        ("all", True, ["kill"], 7)
    # acks=0 runs in no cell that has idempotence: still one cell for it, so it is kept
    params, given = _params(idempotence=True)
    with pytest.raises(compare.CompareError, match="acks=0 is refused in every cell"):
        compare.prepare(params, given, [matrix.parse_option("acks=0,all")], 1)
    with pytest.raises(compare.CompareError, match="no cell can run"):
        compare.prepare(params, given, [matrix.parse_option("acks=0,1")], 1)


def test_a_scenario_cell_keeps_the_matrix_value_over_the_scenarios_setting():
    """zombie-leader sets acks=1; a cell that varies acks keeps its own value."""
    params, given = _params(scenario="zombie-leader")
    manifest = compare.prepare(params, given, [matrix.parse_option("acks=1,all")], 1)
    configs = [RunConfig(**c["config"]) for c in manifest["cells"]]
    assert [c.acks for c in configs] == ["1", "all"]
    assert "acks" not in configs[1].scenario_settings
    assert all(c.scenario_settings["keys"] == 1 == c.keys for c in configs)


def test_resume_runs_what_is_left_and_sets_interrupted_runs_aside(tmp_path):
    params, given = _params()
    manifest = compare.prepare(params, given, [matrix.parse_option("acks=1,all")], 2)
    comparison = compare.create(tmp_path, manifest)
    assert len(comparison.pending()) == 4 and compare.exit_code(comparison) == 2
    first, second = comparison.cells
    comparison.manifest["done"][comparison.run_id(first, 0)] = {"exit_code": 0, "error": None}
    comparison.save()
    again = compare.load(comparison.dir)
    assert [(c["id"], s) for c, s in again.pending()] == \
        [(first["id"], 1), (second["id"], 0), (second["id"], 1)]
    # a run cut short: set aside, never overwritten, and run again
    cut = again.run_dir(first, 1)
    cut.mkdir(parents=True)
    (cut / "run.json").write_text(json.dumps({"interrupted": True}))
    ran = []

    def execute(cfg, run_dir, command):
        ran.append((run_dir, cfg.seed, cfg.acks))
        assert command.startswith("kafka-chaos run ") and f"--seed {cfg.seed}" in command
        (run_dir / "run.json").write_text(json.dumps({"final_reads": {}}))
        if len(ran) == 2:
            raise KeyboardInterrupt
        return {"final_reads": {}}

    class Verdict:
        code, error = 1, None

    with pytest.raises(KeyboardInterrupt):
        compare.run_pending(again, execute, lambda d, f: Verdict(), lambda text: None)
    assert (cut.parent / "seed-1.interrupted-1" / "run.json").is_file()
    assert ran[0] == (cut, 1, "1") and ran[1][1:] == (0, "all")
    saved = compare.load(comparison.dir)
    assert saved.manifest["running"] == saved.run_id(second, 0)
    assert len(saved.pending()) == 2
    # the interrupted run had ended its final reads: resuming analyses it, runs nothing
    analysed = []
    (saved.run_dir(second, 0) / "history.jsonl").write_text("")
    saved.manifest["done"][saved.run_id(second, 1)] = {"exit_code": 0, "error": None}
    compare.run_pending(saved, lambda *a: pytest.fail("ran again"),
                        lambda d, f: analysed.append(d) or Verdict(), lambda text: None)
    assert analysed == [saved.run_dir(second, 0)] and not saved.pending()
    assert compare.exit_code(saved) == 1  # a run with anomalies ranks above unknown
