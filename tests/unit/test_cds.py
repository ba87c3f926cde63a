"""The class data sharing archive of the analysis's driver JVM (``analysis.cds``): built by a
child process on a real JVM, mapped by the next driver JVM, which checks a history as one
without it does; a damaged archive is dropped and the session still starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_chaos.analysis import cds

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "report_run" / "history.jsonl"

# A fresh interpreter checks the fixture and tells whether its driver JVM maps the archive
_CHECK = """
import json, sys
from pyspark import SparkContext
from kafka_chaos import analysis
from kafka_chaos.analysis import cds
r = analysis.check(sys.argv[1], spark_master="local[2]")
jvm = SparkContext._gateway.proc.pid
maps = open(f"/proc/{jvm}/maps").read()
for k in ("analysis_time_s", "timings_s"):
    r.pop(k)
r["cycle_search"].pop("time_s")
print(json.dumps({"mapped": ".jsa" in maps and str(cds.folder()) in maps, "result": r}))
"""


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "KAFKA_CHAOS_CACHE": str(cache)}
    env.pop("SPARK_CONF_DIR", None)  # the analysis's own empty one, as a user gets it
    env.pop(cds.ENV, None)
    return {**env, **extra}


def _check(history: Path, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHECK, str(history)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_java_options_follow_the_archive_on_disk(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    monkeypatch.delenv("KAFKA_CHAOS_CDS_DUMP", raising=False)
    # a JVM of its own: the archive's name needs one, not a Java installation
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    (tmp_path / "jdk" / "bin" / "java").write_bytes(b"")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    path = cds.archive()
    assert path is not None and path.parent == tmp_path / "cds" and path.suffix == ".jsa"
    assert cds.java_options() == ""  # none built yet
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={path}" in cds.java_options()
    monkeypatch.setenv(cds.ENV, "off")
    assert cds.java_options() == "" and not cds.enabled()
    monkeypatch.setenv(cds.ENV, "on")
    monkeypatch.setenv("KAFKA_CHAOS_CDS_DUMP", str(tmp_path / "x.tmp"))
    assert cds.java_options().startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'x.tmp'}")
    cds.discard()
    assert not path.exists()
    assert cds.conf_dir().is_dir() and not any(cds.conf_dir().iterdir())


@pytest.mark.spark
@pytest.mark.long  # builds an archive (about 60 s); setup.sh builds the one every run maps
def test_a_built_archive_is_mapped_and_a_damaged_one_is_dropped(tmp_path) -> None:
    cache = tmp_path / "cache"
    # archives of other installations: one whose jars are gone, one of a checkout still there
    (cache / "cds").mkdir(parents=True)
    elsewhere = tmp_path / "other-checkout-jars"
    elsewhere.mkdir()
    for name, jars in (("gone", tmp_path / "removed-venv"), ("kept", elsewhere)):
        (cache / "cds" / f"{name}.jsa").write_bytes(b"archive")
        (cache / "cds" / f"{name}.json").write_text(
            json.dumps({"java": str(cds.java()), "jars": str(jars)}))
    built = subprocess.run([sys.executable, "-m", "kafka_chaos", "spark-archive"],
                           env=_env(cache), capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert not (cache / "cds" / "gone.jsa").exists() and (cache / "cds" / "kept.jsa").exists()
    (cache / "cds" / "kept.jsa").unlink()
    archives = list((cache / "cds").glob("*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 50 * 2**20
    assert json.loads(archives[0].with_suffix(".json").read_text())["java"] == str(cds.java())
    assert not list((cache / "cds").glob("*.tmp"))  # renamed into place once complete

    history = tmp_path / "history.jsonl"
    history.write_bytes(FIXTURE.read_bytes())
    with_archive = _check(history, _env(cache))
    assert with_archive["mapped"]

    # HotSpot stops on a truncated archive: the session starts again without it, and the
    # archive goes
    archives[0].chmod(0o644)
    with archives[0].open("r+b") as f:
        f.truncate(2 * 2**20)
    damaged = _check(history, _env(cache))
    assert not damaged["mapped"] and not archives[0].exists()
    assert damaged["result"] == with_archive["result"]
    assert with_archive["result"]["anomaly_types"]  # the fixture has findings to compare
    assert not list(Path.cwd().glob("hs_err_pid*.log"))  # the crash report went elsewhere


@pytest.mark.spark
@pytest.mark.long  # 105 s in a CI run of 2026-12-01; setup.sh's build stays in every run
def test_a_build_that_fails_keeps_the_archive_there_was_and_leaves_no_file(tmp_path) -> None:
    """JDK 17 refuses, as the JVM exits, to archive a class path with a folder holding files
    (here the user's ``SPARK_CONF_DIR``): the build says so, and the archive already there
    stays."""
    cache = tmp_path / "cache"
    user_conf = tmp_path / "user-conf"
    user_conf.mkdir()
    (user_conf / "spark-defaults.conf").write_text("")
    env = _env(cache, SPARK_CONF_DIR=str(user_conf))
    existing = subprocess.run([sys.executable, "-c", "from kafka_chaos.analysis import cds; "
                               "print(cds.archive())"], env=env, capture_output=True,
                              text=True, check=True).stdout.strip()
    Path(existing).parent.mkdir(parents=True)
    Path(existing).write_bytes(b"an archive of before")
    built = subprocess.run([sys.executable, "-m", "kafka_chaos", "spark-archive"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 255, built.stdout + built.stderr
    assert "no class archive was written" in built.stderr
    assert Path(existing).read_bytes() == b"an archive of before"
    assert sorted(p.name for p in (cache / "cds").iterdir()) == [Path(existing).name,
                                                                 "spark-conf"]
