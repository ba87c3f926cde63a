"""The benchmark's history generator: its background keeps every promise and each seeded
vignette is found exactly as ``expected.json`` says (the benchmarks' exactness check, small)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from kafka_chaos import analysis

_VERSIONS = importlib.import_module("kafka_chaos.analysis.checkers.versions")
verdict = importlib.import_module("kafka_chaos.analysis.verdict")

def _gen_module():
    from kafka_chaos.history.simulate import vignettes

    return vignettes


@pytest.mark.spark
@pytest.mark.parametrize("plan", ["small", "large"])
def test_seeded_anomalies_are_found_exactly_and_nothing_else(spark, tmp_path: Path, plan: str,
                                                             monkeypatch) -> None:
    """Both plans: a large history's (code generation, sort-merge joins to the writers,
    several partitions) is otherwise met only by the benchmarks' large histories."""
    if plan == "large":
        monkeypatch.setattr(verdict, "SMALL_HISTORY_OPS", 0)
        monkeypatch.setattr(_VERSIONS, "SMALL_HISTORY_OPS", 0)
    gen = _gen_module()
    expected = gen.generate(tmp_path, 30_000, anomalies=2, seed=7)
    assert json.loads((tmp_path / "expected.json").read_text()) == expected
    assert set(expected) >= set(gen.VIGNETTES)
    result = analysis.check(tmp_path / "history.jsonl")
    found = {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}
    assert found == expected
    assert result["unknown_reasons"] == []
    assert abs(result["stats"]["ops"] - 30_000) < 1_500  # about N ops, as asked
    assert result["cycle_search"]["complete"] is True


@pytest.mark.spark
def test_the_background_alone_is_valid(spark, tmp_path: Path) -> None:
    gen = _gen_module()
    assert gen.generate(tmp_path, 20_000, anomalies=0, seed=3) == {}
    result = analysis.check(tmp_path / "history.jsonl")
    assert result["valid"] is True, result["anomaly_types"]
    assert result["stats"]["acked_sends"] > 1000


def test_the_simulated_run_under_faults_records_what_it_planted(tmp_path: Path) -> None:
    """``generate_run``: a valid history written through ``HistoryWriter`` (its columnar
    copy beside it), time that never runs backwards, each planted fault's start and stop
    among the nemesis ops, and final reads that miss exactly the planted lost writes."""
    from kafka_chaos.history import read_history
    from kafka_chaos.history.simulate import generate_run

    planted = generate_run(tmp_path, client_ops=600, seed=5, rate=90.0, keys=2,
                           fault_interval_s=2.0, lost=2, duplicates=1)
    assert (tmp_path / "history.parquet").is_dir() and (tmp_path / "config.json").is_file()
    ops = read_history(tmp_path / "history.jsonl")
    assert all(a.time <= b.time for a, b in zip(ops, ops[1:]))
    nemesis = [(op.f, op.type.value) for op in ops if op.process == "nemesis"]
    assert len(planted["faults"]) >= 3
    for kind, *_ in planted["faults"]:
        assert (kind, "ok") in nemesis
    final = {(int(k), v) for op in ops if op.type.value == "ok" and op.f == "poll"
             for m in op.value if len(m) == 3 and m[2].get("final")
             for k, recs in m[1].items() for _, v in recs}
    assert len(planted["lost"]) == 2
    for key, value, _ in planted["lost"]:
        assert (key, value) not in final
    with pytest.raises(FileExistsError):
        generate_run(tmp_path, client_ops=10)
