"""The benchmark's history generator: its background keeps every promise and each seeded
vignette is found exactly as ``expected.json`` says (the benchmarks' exactness check, small)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kafka_chaos import analysis

_VERSIONS = importlib.import_module("kafka_chaos.analysis.checkers.versions")

_GEN = Path(__file__).resolve().parents[2] / "bench" / "history_gen.py"


def _gen_module():
    spec = importlib.util.spec_from_file_location("history_gen", _GEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("plan", ["small", "large"])
def test_seeded_anomalies_are_found_exactly_and_nothing_else(spark, tmp_path: Path, plan: str,
                                                             monkeypatch) -> None:
    """Both plans: a large history's (code generation, sort-merge joins to the writers,
    several partitions) is otherwise met only by the benchmarks' large histories."""
    if plan == "large":
        monkeypatch.setattr(analysis, "SMALL_HISTORY_OPS", 0)
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


def test_the_background_alone_is_valid(spark, tmp_path: Path) -> None:
    gen = _gen_module()
    assert gen.generate(tmp_path, 20_000, anomalies=0, seed=3) == {}
    result = analysis.check(tmp_path / "history.jsonl")
    assert result["valid"] is True, result["anomaly_types"]
    assert result["stats"]["acked_sends"] > 1000
