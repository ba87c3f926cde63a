"""Fixtures shared by the unit tests: one local SparkSession for the whole suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from pyspark.sql import SparkSession

from kafka_chaos import analysis
from kafka_chaos.analysis.spark import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The suite's only SparkSession (JVM start-up costs seconds; ``analysis.check`` reuses it
    through ``getOrCreate``)."""
    s = session("local[2]")
    yield s
    s.stop()


@pytest.fixture
def run(spark, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``run(history, **check_kwargs)``: writes a hand-made history (``tests.builder``,
    ``tests.queue_builder``) and returns ``analysis.check``'s result, which must be plain
    JSON-able data."""
    n = iter(range(1000))

    def _run(history, **kw: Any) -> dict[str, Any]:
        result = analysis.check(history.write(tmp_path / f"history-{next(n)}.jsonl"), **kw)
        json.dumps(result)
        return result
    return _run
