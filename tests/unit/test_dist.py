"""A Kafka version Maven Central does not serve, or that Maven cannot fetch, is refused in one
line naming ``--kafka-version`` (and the nearest versions served), and leaves nothing in the
cache (``clusters/dist.py``, ``clusters/central.py``). The last two tests ask the real
Central, and Maven when its list cannot be read."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kafka_chaos.cli import app
from kafka_chaos.clusters import central, dist
from kafka_chaos.clusters.errors import DistributionError

SERVED = ["3.0.0", "3.0.2", "3.7.2", "3.8.0", "3.8.1", "3.9.0", "3.9.2", "4.0.0", "4.1.1",
          "4.3.0", "4.3.1", "4.4.0"]
ESC = "\x1b"

#: what mvn 3.8.7 printed (colour codes and all) when it failed, as seen on this machine
NOT_FOUND = ("\x1b[0m\x1b[0m[ERROR] Failed to execute goal on project kafka-dist: Could not "
             "resolve dependencies for project kafka-chaos:kafka-dist:jar:1: Could not find "
             "artifact org.apache.kafka:kafka_2.13:jar:9.9.7 in central "
             "(https://repo.maven.apache.org/maven2) -> [Help 1]\n[ERROR] \n[ERROR] To see the "
             "full stack trace of the errors, re-run Maven with the -e switch.\n\x1b[0m\x1b[0m")
REMEMBERED = ("\x1b[0m[ERROR] Failed to execute goal on project kafka-dist: Could not resolve "
              "dependencies for project kafka-chaos:kafka-dist:jar:1: org.apache.kafka:"
              "kafka_2.13:jar:9.9.7 was not found in https://repo.maven.apache.org/maven2 "
              "during a previous attempt. This failure was cached in the local repository and "
              "resolution is not reattempted until the update interval of central has elapsed "
              "or updates are forced -> [Help 1]\n[ERROR] \n\x1b[0m")
REFUSED = ("\x1b[0m\x1b[0m[ERROR] Failed to execute goal on project kafka-dist: Could not "
           "resolve dependencies for project kafka-chaos:kafka-dist:jar:1: Failed to collect "
           "dependencies at org.apache.kafka:kafka_2.13:jar:3.2.3: Failed to read artifact "
           "descriptor for org.apache.kafka:kafka_2.13:jar:3.2.3: Could not transfer artifact "
           "org.apache.kafka:kafka_2.13:pom:3.2.3 from/to central (https://127.0.0.1:9/): "
           "transfer failed for https://127.0.0.1:9/org/apache/kafka/kafka_2.13/3.2.3/"
           "kafka_2.13-3.2.3.pom: Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection "
           "refused -> [Help 1]\n[ERROR] \n")
OFFLINE = ("\x1b[0m[ERROR] Failed to execute goal on project kafka-dist: Could not resolve "
           "dependencies for project kafka-chaos:kafka-dist:jar:1: Cannot access central "
           "(https://repo.maven.apache.org/maven2) in offline mode and the artifact "
           "org.apache.kafka:kafka_2.13:jar:3.2.3 has not been downloaded from it before. "
           "-> [Help 1]\n")


def _release(t: tuple[int, int, int]) -> str:
    return ".".join(map(str, t))


versions = st.tuples(st.integers(3, 6), st.integers(0, 12), st.integers(0, 4)).map(_release)


def test_the_nearest_versions_share_major_minor_first_then_lie_closest():
    assert central.nearest("9.9.9", SERVED) == ["4.4.0", "4.3.1", "4.3.0"]
    assert central.nearest("3.8.5", SERVED) == ["3.8.1", "3.8.0", "3.9.0"]
    assert central.nearest("3.10.0", SERVED) == ["3.9.2", "3.9.0", "3.8.1"]
    assert central.nearest("3.0.1", SERVED + ["3.0.1-rc1", "junk"], n=5) == \
        ["3.0.2", "3.0.0", "3.7.2", "3.8.0", "3.8.1"]
    assert central.nearest("4.2.0", [], n=3) == []


@given(versions, st.lists(versions, max_size=30), st.integers(1, 5))
def test_the_nearest_are_served_releases_and_none_served_lies_closer(asked, served, n):
    got = central.nearest(asked, served + ["4.0.0-rc1"], n)
    others = set(served) - {asked}
    assert len(got) == len(set(got)) == min(n, len(others)) and set(got) <= others
    line = [v for v in others if v.split(".")[:2] == asked.split(".")[:2]]
    assert set(got) >= set(line) or set(got) <= set(line)  # its own line first

    def distance(v: str) -> int:
        return abs(int("".join(f"{int(x):06d}" for x in v.split(".")))
                   - int("".join(f"{int(x):06d}" for x in asked.split("."))))
    rank = [(v not in line, distance(v)) for v in got]
    assert rank == sorted(rank)
    left = others - set(got)
    assert not got or all((v not in line, distance(v)) >= rank[-1] for v in left)


def test_the_metadata_gives_its_releases_in_order_and_junk_is_one_line():
    xml = ("<metadata><versioning><versions><version>3.10.0</version><version>3.9.1</version>"
           "<version>4.0.0-rc1</version><version>2.8.2</version></versions></versioning>"
           "</metadata>")
    assert central.versions(xml) == ["2.8.2", "3.9.1", "3.10.0"]
    with pytest.raises(DistributionError, match="not a Maven metadata file") as info:
        central.versions(b"<html>")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("output, expected", [
    (NOT_FOUND, "--kafka-version 9.9.7: Maven Central has no Kafka 9.9.7; nearest served: "
                "4.4.0, 4.3.1, 4.3.0 (kafka-chaos fetch-kafka --list shows all)"),
    (REMEMBERED, "--kafka-version 9.9.7: Maven Central has no Kafka 9.9.7; nearest served: "
                 "4.4.0, 4.3.1, 4.3.0 (kafka-chaos fetch-kafka --list shows all)"),
    (REFUSED, "--kafka-version 9.9.7: Maven could not reach central (https://127.0.0.1:9/): "
              "Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused"),
    (OFFLINE, "--kafka-version 9.9.7: mvn could not fetch Kafka 9.9.7: Cannot access central "
              "(https://repo.maven.apache.org/maven2) in offline mode and the artifact "
              "org.apache.kafka:kafka_2.13:jar:3.2.3 has not been downloaded from it before."),
    ("", "--kafka-version 9.9.7: mvn could not fetch Kafka 9.9.7: no output"),
])
def test_mvn_failures_are_one_line_without_colour_codes(output, expected):
    assert central.mvn_failure("9.9.7", output, SERVED) == expected


def test_an_unknown_version_without_the_list_and_another_missing_artifact():
    assert central.mvn_failure("9.9.7", REMEMBERED, None) == (
        "--kafka-version 9.9.7: Maven Central has no Kafka 9.9.7 (its list of versions, to "
        "name the nearest, could not be read)")
    # another artifact missing is mvn's failure, not an unknown Kafka
    assert "mvn could not fetch" in central.mvn_failure("9.9.70", NOT_FOUND, SERVED)


def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    kept = tmp_path / "kafka-chaos" / "kafka" / "3.8.1"
    kept.mkdir(parents=True)  # a folder of an earlier run stays
    return kept.parent


def test_a_version_central_lacks_is_refused_before_maven_and_leaves_nothing(
        tmp_path, monkeypatch):
    root = _cache(tmp_path, monkeypatch)
    monkeypatch.setattr(dist, "served", lambda: SERVED)
    monkeypatch.setattr(dist.shutil, "which", lambda _: pytest.fail("mvn was looked for"))
    with pytest.raises(DistributionError) as info:
        dist.resolve("3.8.5")
    assert str(info.value) == ("--kafka-version 3.8.5: Maven Central has no Kafka 3.8.5; "
                               "nearest served: 3.8.1, 3.8.0, 3.9.0 (kafka-chaos fetch-kafka "
                               "--list shows all)")
    assert [p.name for p in root.iterdir()] == ["3.8.1"]


def test_when_the_list_cannot_be_read_mvn_decides_and_its_staging_goes(tmp_path, monkeypatch):
    root = _cache(tmp_path, monkeypatch)

    def unreadable(timeout_s: float = 3.0):
        raise DistributionError("no network")
    monkeypatch.setattr(central, "fetch_versions", unreadable)
    monkeypatch.setattr(dist.shutil, "which", lambda _: "/usr/bin/mvn")
    monkeypatch.setattr(dist.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 1, "", REFUSED.replace("3.2.3", "3.2.9")))
    with pytest.raises(DistributionError, match=r"^--kafka-version 3\.2\.9: Maven could not "
                       r"reach central \(https://127\.0\.0\.1:9/\): Connect to"):
        dist.resolve("3.2.9")
    assert [p.name for p in root.iterdir()] == ["3.8.1"]


def test_fetch_kafka_lists_the_versions_and_refuses_an_unknown_one(monkeypatch):
    monkeypatch.setattr(dist, "served", lambda: SERVED)
    monkeypatch.setattr(dist, "check_java", lambda: "java")
    out = CliRunner().invoke(app, ["fetch-kafka", "--list"])
    assert out.exit_code == 0 and out.stdout.split() == SERVED
    out = CliRunner().invoke(app, ["fetch-kafka", "9.9.9"])
    assert out.exit_code == 254
    assert out.output == ("error: --kafka-version 9.9.9: Maven Central has no Kafka 9.9.9; "
                          "nearest served: 4.4.0, 4.3.1, 4.3.0 (kafka-chaos fetch-kafka --list "
                          "shows all)\n")


def _exists(version: str) -> bool:
    url = f"{central.CENTRAL}/org/apache/kafka/kafka_2.13/{version}/kafka_2.13-{version}.pom"
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as r:
        return r.status == 200


@pytest.mark.jvm  # Maven decides when Central's list cannot be read
def test_real_central_refuses_9_9_9_in_one_line_naming_served_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(DistributionError) as info:
        dist.resolve("9.9.9")
    message = str(info.value)
    assert "\n" not in message and ESC not in message
    head, _, named = message.partition("nearest served: ")
    assert head == "--kafka-version 9.9.9: Maven Central has no Kafka 9.9.9; "
    named = named.removesuffix(" (kafka-chaos fetch-kafka --list shows all)").split(", ")
    assert len(named) == 3 and all(_exists(v) for v in named), named
    assert named[0] == dist.served()[-1]  # the newest is the nearest to 9.9.9
    assert not (tmp_path / "kafka-chaos" / "kafka" / "9.9.9").exists()


@pytest.mark.jvm
def test_real_maven_says_an_unknown_version_in_one_line_too(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(central, "METADATA", "https://127.0.0.1:9/maven-metadata.xml")
    with pytest.raises(DistributionError) as info:
        dist.resolve("9.9.9")
    assert str(info.value) == ("--kafka-version 9.9.9: Maven Central has no Kafka 9.9.9 (its "
                               "list of versions, to name the nearest, could not be read)")
    assert list((tmp_path / "kafka-chaos" / "kafka").iterdir()) == []
