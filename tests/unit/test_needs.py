"""The markers are enforced (``tests/needs/kc_needs.py``): a test that starts what it has no
marker for fails with a message naming the marker, in the test's own process and in the
Pythons it starts; what it has a marker for, and what needs nothing, pass. Each case is a
test file run by a pytest of its own (``pytester``), with this suite's plugin."""

from __future__ import annotations

import re
import subprocess

import pytest

from kc_needs import HERE, classify, granted, tier

CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from kc_needs import *  # noqa: F401,F403 (the plugin's hooks)
"""


def _outcomes(result) -> dict[str, str]:
    """test name -> PASSED | FAILED | ERROR, from ``-rA``'s short summary."""
    return {m.group(2): m.group(1) for m in re.finditer(
        r"^(PASSED|FAILED|ERROR) \S+::(\w+)", result.stdout.str(), re.M)}


def test_what_a_test_starts_is_refused_and_named_without_its_marker(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner="""
        import subprocess, sys
        import pytest

        def test_pure_logic():
            assert sum(range(4)) == 6

        def test_a_jvm():
            subprocess.run(["java", "-version"], capture_output=True)

        def test_a_jvm_a_child_python_starts():
            subprocess.run([sys.executable, "-c",
                            "import subprocess; subprocess.run(['javac', '-version'])"])

        def test_docker():
            import socket
            with socket.socket(socket.AF_UNIX) as s:
                s.connect("/var/run/docker.sock")

        def test_a_namespace():
            subprocess.run(["ip", "netns", "add", "kc-needs-never"], capture_output=True)

        def test_spark():
            from kafka_chaos.analysis.spark import session
            session("local[1]")

        @pytest.mark.browser
        def test_a_marked_browser_may_start_but_a_jvm_not():
            subprocess.run(["chromium", "--version"], capture_output=True)
            subprocess.run(["java", "-version"], capture_output=True)
    """)
    result = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider")
    outcomes = _outcomes(result)
    assert outcomes == {"test_pure_logic": "PASSED", "test_a_jvm": "FAILED",
                        "test_a_jvm_a_child_python_starts": "FAILED",
                        "test_docker": "FAILED", "test_a_namespace": "FAILED",
                        "test_spark": "FAILED",
                        "test_a_marked_browser_may_start_but_a_jvm_not": "FAILED"}, \
        result.stdout.str()
    out = result.stdout.str()
    for what, marker in (("a JVM (java -version)", "jvm"), ("a JVM tool (javac -version)", "jvm"),
                         ("the Docker daemon", "docker"), ("ip netns add kc-needs-never", "root"),
                         ("Spark (", "spark")):
        assert re.search(rf"this test started .*{re.escape(what)}.* without the `{marker}` "
                         "marker", out), (what, out)
        assert f"@pytest.mark.{marker}" in out
    assert "without the `browser` marker" not in out
    # refused where it starts: nothing ran
    assert "kc-needs-never" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                  text=True).stdout


@pytest.mark.root
@pytest.mark.jvm
def test_a_cluster_started_without_the_kafka_marker_fails_naming_it(pytester, tmp_path):
    """``kafka-chaos cluster up`` (a child Python) from a test marked root and jvm but not
    kafka: its broker storage is refused before any broker starts, and the test fails naming
    ``kafka``; ``cluster down`` removes what the refused start had made."""
    pytester.makeconftest(CONFTEST)
    where = tmp_path / "cluster"
    pytester.makepyfile(test_inner=f"""
        import subprocess, sys
        import pytest

        @pytest.mark.root
        @pytest.mark.jvm
        def test_a_cluster():
            try:
                up = subprocess.run([sys.executable, "-m", "kafka_chaos", "cluster", "up",
                                     "--dir", {str(where)!r}], capture_output=True, text=True)
                assert up.returncode == 0, up.stdout + up.stderr
            finally:
                subprocess.run([sys.executable, "-m", "kafka_chaos", "cluster", "down",
                                "--dir", {str(where)!r}], capture_output=True)
    """)
    result = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert _outcomes(result) == {"test_a_cluster": "FAILED"}, out
    assert re.search(r"this test started a Kafka broker \(kafka\.tools\.StorageTool: .*\) "
                     "without the `kafka` marker", out), out
    assert "@pytest.mark.kafka" in out
    assert not subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True,
                              text=True).stdout


@pytest.mark.parametrize("argv, need", [
    (["ip", "netns", "exec", "kc-n1", "java", "-Xmx1g", "-cp", "x", "kafka.Kafka", "p"],
     "kafka"),
    (["/usr/lib/jvm/bin/java", "-cp", "x", "kafka.tools.StorageTool", "format"], "kafka"),
    (["/venv/pyspark/./bin/spark-submit", "--conf", "a=b", "pyspark-shell"], "spark"),
    (["java", "-cp", "x", "org.apache.spark.deploy.master.Master"], "spark"),
    (["/usr/bin/java", "-version"], "jvm"), (["mvn", "-q", "dependency:copy"], "jvm"),
    (["docker", "info"], "docker"), (["sudo", "-n", "/usr/bin/docker", "ps"], "docker"),
    (["pgrep", "-x", "dockerd"], None), (["/usr/bin/chromedriver", "--port=1"], "browser"),
    (["mount", "--bind", "a", "b"], "root"), (["ip", "link", "add", "x"], "root"),
    (["ip", "netns", "list"], None), (["git", "status"], None), (["python3", "-c", ""], None)])
def test_what_each_program_needs(argv, need):
    found = classify(argv)
    assert (found[0] if found else None) == need, found


def test_markers_grant_what_they_imply_and_place_a_test_in_one_tier():
    assert granted(["kafka"]) == {"kafka", "jvm", "root", "spark"}
    assert granted(["spark", "docker"]) == {"spark", "jvm", "docker"}
    assert [tier(m) for m in ([], ["slow"], ["spark", "root"], ["kafka", "docker"],
                              ["kafka", "long"])] == ["fast", "slow", "spark", "kafka", "long"]
