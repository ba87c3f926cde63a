"""Fixtures shared by the unit tests: one local SparkSession for the whole suite."""

from __future__ import annotations

from typing import Iterator

import pytest
from pyspark.sql import SparkSession

from kafka_chaos.analysis.spark import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The suite's only SparkSession (JVM start-up costs seconds; ``analysis.check`` reuses it
    through ``getOrCreate``)."""
    s = session("local[2]")
    yield s
    s.stop()
