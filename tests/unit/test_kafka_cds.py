"""Where the broker class archive lives and when it is used (``clusters/kafka_cds.py``); that
a real broker maps it is in ``tests/integration/test_cli_cluster.py``."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_chaos.clusters import kafka_cds
from kafka_chaos.clusters.dist import KafkaDist


def _dist(tmp_path: Path, *jars: str, version: str = "4.4.0") -> KafkaDist:
    libs = tmp_path / f"libs-{version}-{'-'.join(jars)}"
    libs.mkdir(exist_ok=True)
    for jar in jars:
        (libs / jar).write_bytes(b"")
    return KafkaDist(version, libs)


def _java(tmp_path: Path, name: str, size: int) -> str:
    java = tmp_path / name
    java.write_bytes(b"x" * size)
    return str(java)


def test_an_archive_belongs_to_one_class_path_and_one_jvm(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    java = _java(tmp_path, "java", 10)
    one = kafka_cds.archive(_dist(tmp_path, "kafka.jar"), java)
    assert one.parent == tmp_path / "cache" / "kafka-chaos" / "kafka-cds"
    assert one.name.startswith("4.4.0-") and one.suffix == ".jsa"
    assert kafka_cds.archive(_dist(tmp_path, "kafka.jar"), java) == one
    # another jar, another JVM build, a JVM reached through a link to the same file
    assert kafka_cds.archive(_dist(tmp_path, "kafka.jar", "extra.jar"), java) != one
    assert kafka_cds.archive(_dist(tmp_path, "kafka.jar"), _java(tmp_path, "java2", 11)) != one
    link = tmp_path / "link"
    link.symlink_to(java)
    assert kafka_cds.archive(_dist(tmp_path, "kafka.jar"), str(link)) == one


def test_options_map_an_archive_only_when_there_is_one_and_archives_are_on(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(kafka_cds.ENV, raising=False)
    dist, java = _dist(tmp_path, "kafka.jar"), _java(tmp_path, "java", 10)
    assert kafka_cds.java_options(dist, java) == []
    path = kafka_cds.archive(dist, java)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    options = kafka_cds.java_options(dist, java)
    assert f"-XX:SharedArchiveFile={path}" in options
    assert kafka_cds.ensure(dist, java, [], "cluster-id") == path  # made already: kept
    monkeypatch.setenv(kafka_cds.ENV, "OFF")
    assert kafka_cds.java_options(dist, java) == []
    assert kafka_cds.ensure(dist, java, [], "cluster-id") is None
    assert os.listdir(path.parent) == [path.name]  # off: nothing made or removed
