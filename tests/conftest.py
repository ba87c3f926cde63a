"""Fixtures and hooks of the whole suite: the markers by what a test needs and their
enforcement (``tests/needs/kc_needs.py``), and the one Spark session of the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "needs"))
from kc_needs import (pytest_collection_modifyitems, pytest_configure,  # noqa: E402,F401
                      pytest_itemcollected, pytest_runtest_logreport,
                      pytest_runtest_makereport, pytest_runtest_setup,
                      pytest_terminal_summary, pytest_unconfigure)
from kc_workers import make_scheduler  # noqa: E402

#: ``pytester`` runs the enforcement's own tests (``tests/unit/test_needs.py``)
pytest_plugins = ["pytester"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``-n 2 --dist loadgroup``: the machine-changing tests on one worker
    (``tests/needs/kc_workers.py``)."""
    return make_scheduler(config, log)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The suite's only SparkSession (a JVM start costs seconds; ``analysis.check`` reuses it
    through ``getOrCreate``)."""
    from kafka_chaos.analysis.spark import session

    s = session("local[2]")
    yield s
    s.stop()


@pytest.fixture
def spark(request, spark_session) -> Any:
    """The suite's SparkSession, for a test marked ``spark`` (a session made in an earlier
    test starts nothing that the process hooks could see, so the marker is checked here)."""
    if request.node.get_closest_marker("spark") is None:
        pytest.fail("this test uses the Spark session without the `spark` marker\n"
                    "mark it: @pytest.mark.spark (tests/needs/kc_needs.py)", pytrace=False)
    return spark_session


@pytest.fixture
def run(spark, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``run(history, **check_kwargs)``: writes a hand-made history (``tests.builder``,
    ``tests.queue_builder``) and returns ``analysis.check``'s result, which must be plain
    JSON-able data."""
    from kafka_chaos import analysis

    n = iter(range(1000))

    def _run(history, **kw: Any) -> dict[str, Any]:
        result = analysis.check(history.write(tmp_path / f"history-{next(n)}.jsonl"), **kw)
        json.dumps(result)
        return result
    return _run
