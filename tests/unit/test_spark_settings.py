"""The Spark settings the analysis derives from the machine and from the user's input, and
``spark-server status`` with no server."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from kafka_chaos.analysis import spark
from kafka_chaos.cli import app


def _with_ram(monkeypatch, gib: int) -> None:
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": gib * 2**30 // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])


@pytest.mark.parametrize("gib, threads, heap, page", [
    (4, None, "1024m", spark.SMALL_HEAP_PAGE),  # RAM / 8 below the floor: the floor
    (16, None, "2048m", spark.SMALL_HEAP_PAGE),
    (24, None, "3072m", None),
    (64, None, "3072m", None),  # the ceiling
    (24, 2, "2048m", spark.SMALL_HEAP_PAGE),  # 1 GiB per local thread
    (24, 1, "1024m", spark.SMALL_HEAP_PAGE),
    (4, 8, "1024m", spark.SMALL_HEAP_PAGE),  # the RAM's share still bounds it
    (64, 8, "3072m", None),
])
def test_heap_and_pages_follow_the_ram_and_threads(monkeypatch, gib, threads, heap, page):
    _with_ram(monkeypatch, gib)
    settings = spark.heap_settings(spark.machine_settings(threads))
    assert settings["spark.driver.memory"] == settings["spark.driver.maxResultSize"] == heap
    assert settings.get("spark.buffer.pageSize") == page


def test_driver_settings_of_a_local_master(monkeypatch):
    _with_ram(monkeypatch, 24)
    settings = spark.driver_settings("local[2]")
    assert settings["spark.driver.memory"] == "2048m"
    assert "-XX:+UseParallelGC" in settings["spark.driver.extraJavaOptions"]
    assert spark.driver_settings("spark://h:7077")["spark.driver.memory"] == "3072m"
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    with spark.launch_env():
        assert os.environ["MALLOC_ARENA_MAX"] == spark.JVM_ENV["MALLOC_ARENA_MAX"]
    assert "MALLOC_ARENA_MAX" not in os.environ  # nothing started later inherits it
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    with spark.launch_env():
        assert os.environ["MALLOC_ARENA_MAX"] == "4"  # the user's own stays
    assert os.environ["MALLOC_ARENA_MAX"] == "4"


def test_pages_follow_the_heap_a_user_sets(monkeypatch):
    _with_ram(monkeypatch, 24)  # the machine's default heap, 3 GiB, keeps Spark's pages
    machine = spark.machine_settings()
    two = spark.heap_settings({**machine, "spark.driver.memory": "2g"})
    assert two["spark.buffer.pageSize"] == spark.SMALL_HEAP_PAGE
    assert two["spark.driver.maxResultSize"] == "2048m"
    big = spark.heap_settings({**machine, "spark.driver.memory": "8G"})
    assert "spark.buffer.pageSize" not in big and big["spark.driver.maxResultSize"] == "8192m"
    mine = {**machine, "spark.driver.memory": "1500", "spark.buffer.pageSize": "16m",
            "spark.driver.maxResultSize": "1g"}
    assert spark.heap_settings(mine) == mine  # what the user sets stays


def test_memory_sizes():
    assert [spark.size_mb(s) for s in ("2048", "2g", "2048m", "2GB", "3t", "4096k")] == [
        2048, 2048, 2048, 2048, 3 * 2**20, 4]
    for bad in ("lots", "2.5g", "-1g", ""):
        with pytest.raises(ValueError, match="spark.driver.memory"):
            spark.size_mb(bad)


def test_bad_settings_are_named():
    assert spark.parse_conf("spark.a=1, spark.b = x ,") == {"spark.a": "1", "spark.b": "x"}
    for bad in ("spark.a", "a=1", "spark.a=", "spark.driver.memory=lots"):
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


def test_spark_server_status_without_a_server_is_an_answer_not_an_error(tmp_path):
    """``spark-server status`` exits 0 when none runs, as ``cluster status`` does (1 is this
    tool's "anomalies"); a state file whose process is gone is removed."""
    def status() -> tuple[int, str]:
        got = CliRunner().invoke(app, ["spark-server", "status", "--dir", str(tmp_path)])
        return got.exit_code, got.stdout

    assert status() == (0, "none running\n")
    (tmp_path / "server.json").write_text(json.dumps(
        {"pid": 2**22 + 1, "url": "sc://127.0.0.1:1", "master": "local[2]",
         "log": str(tmp_path / "server.log")}))  # above any pid_max: no such process
    assert status() == (0, "none running\n")
    assert not (tmp_path / "server.json").exists()
