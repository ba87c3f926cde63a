"""The Spark settings the analysis derives from the machine and from the user's input."""

from __future__ import annotations

import os

import pytest

from kafka_chaos.analysis import spark


def _with_ram(monkeypatch, gib: int) -> None:
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": gib * 2**30 // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])


@pytest.mark.parametrize("gib, heap, page", [
    (4, "1024m", spark.SMALL_HEAP_PAGE),  # RAM / 8 below the floor: the floor
    (16, "2048m", spark.SMALL_HEAP_PAGE),
    (24, "3072m", None),
    (64, "3072m", None),  # the ceiling
])
def test_heap_and_pages_follow_the_ram(monkeypatch, gib, heap, page):
    _with_ram(monkeypatch, gib)
    settings = spark.machine_settings()
    assert settings["spark.driver.memory"] == settings["spark.driver.maxResultSize"] == heap
    assert settings.get("spark.buffer.pageSize") == page


def test_bad_settings_are_named():
    assert spark.parse_conf("spark.a=1, spark.b = x ,") == {"spark.a": "1", "spark.b": "x"}
    for bad in ("spark.a", "a=1", "spark.a="):
        with pytest.raises(ValueError, match=bad.split("=")[0]):
            spark.parse_conf([bad])


def test_local_threads_and_master_urls():
    assert spark.local_threads("local") == 1
    assert spark.local_threads("local[3]") == 3
    assert spark.local_threads("local[*]") == (os.cpu_count() or 1)
    assert spark.local_threads("spark://h:7077") is None
    spark.check_master("local[2]")
    with pytest.raises(ValueError, match="not a Spark master URL"):
        spark.check_master("local[0]")
    with pytest.raises(ValueError, match="no master answers"):
        spark.check_master("spark://127.0.0.1:1", timeout_s=0.5)
