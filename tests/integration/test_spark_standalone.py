"""The analysis on a real Spark standalone cluster: a master and a worker started from the
pyspark installation (``spark-class``), ``kafka-chaos analyze --spark-master spark://...``, and
the same findings as local mode on the same history.

The worker runs in a mount namespace of its own in which the driver's run directories are
hidden, as on another host: it reads only what ``kafka-chaos publish`` copied to the storage
both share: the rest of the file system (like an NFS mount on every host), or HDFS (Hadoop's
MiniDFSCluster: a NameNode and a DataNode, ``MiniHdfs.java``, from the
``hadoop-client-minicluster`` jar of pyspark's Hadoop version on Maven Central)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pyspark
import pytest

from tests.integration.conftest import free_port, hadoop_version, history_gen

# a worker that cannot see the driver's files runs in a mount namespace of its own: root,
# and nothing another test sees, so it runs beside the real-cluster tests
pytestmark = [pytest.mark.spark, pytest.mark.root, pytest.mark.xdist_group("beside")]

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def _state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[tuple[str, int, Path]]:
    """A master and one worker (1 core, 1 GiB) on 127.0.0.1; yields (master URL, UI port, a
    directory the worker cannot see: an empty tmpfs is mounted on it in its namespace)."""
    tmp = tmp_path_factory.mktemp("spark-standalone")
    private = tmp_path_factory.mktemp("driver-only")
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(tmp),
           "SPARK_CONF_DIR": str(ROOT / "analysis" / "conf")}
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=open(tmp / "master.log", "wb"), stderr=subprocess.STDOUT))
        worker = [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", url, "--host",
                  "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                  str(free_port()), "--work-dir", str(tmp / "work")]
        procs.append(subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs driver-only "$0" && exec "$@"', str(private), *worker],
            env=env, stdout=open(tmp / "worker.log", "wb"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 90
        while True:
            try:
                if any(w["state"] == "ALIVE" for w in _state(ui)["workers"]):
                    break
            except (OSError, ValueError):  # not listening yet, or an empty page while it starts
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                logs = "".join((tmp / f).read_text()[-2000:] for f in ("master.log",
                                                                        "worker.log"))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(1)
        yield url, ui, private
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory) -> Iterator[str]:
    """A one-node HDFS on localhost; yields its URL (``hdfs://localhost:PORT``)."""
    jars = Path(pyspark.__file__).parent / "jars"
    version = hadoop_version()
    cache = Path.home() / ".cache" / "kafka-chaos" / "hadoop"
    jar = cache / f"hadoop-client-minicluster-{version}.jar"
    if not jar.is_file():
        subprocess.run(["mvn", "-q", "dependency:copy", f"-DoutputDirectory={cache}",
                        f"-Dartifact=org.apache.hadoop:hadoop-client-minicluster:{version}"],
                       check=True, timeout=600)
    tmp = tmp_path_factory.mktemp("hdfs")
    proc = subprocess.Popen(
        ["java", "-cp", f"{jar}:{jars}/*", str(Path(__file__).with_name("MiniHdfs.java")),
         str(tmp / "data"), "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(tmp / "hdfs.log", "wb"), text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("ready hdfs://"):
            pytest.fail(f"HDFS did not come up:\n{(tmp / 'hdfs.log').read_text()[-3000:]}")
        yield line.split()[1]
    finally:
        proc.stdin.close()  # MiniHdfs shuts its cluster down
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _kafka_chaos(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / ".venv" / "bin" / "kafka-chaos"), *args],
                          capture_output=True, text=True, timeout=900)


def _analyze(run_dir: Path, master: str) -> dict:
    proc = _kafka_chaos("analyze", str(run_dir), "--spark-master", master)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # anomalies found
    return json.loads((run_dir / "results.json").read_text())


@pytest.mark.long
def test_a_standalone_cluster_finds_what_local_mode_finds(standalone, tmp_path: Path) -> None:
    url, ui, private = standalone
    gen = history_gen()
    local = private / "run-1"
    expected = gen.generate(local, 30_000, anomalies=1, seed=11)
    # the precondition: the executor cannot read the driver's own run directory
    unseen = _kafka_chaos("analyze", str(local), "--spark-master", url)
    # an error goes to stderr (cli.common.fail)
    assert unseen.returncode == 255 and "analysis failed" in unseen.stderr, unseen.stderr[-3000:]
    assert "FileNotFoundException" in unseen.stderr.replace("\n", ""), unseen.stderr[-3000:]
    assert not (local / "results.json").exists()
    published = _kafka_chaos("publish", str(local), str(tmp_path / "shared"))
    assert published.returncode == 0, published.stdout
    remote = tmp_path / "shared" / "run-1"
    assert f"published: {remote}" in published.stdout.replace("\n", "")
    again = _kafka_chaos("publish", str(local), str(tmp_path / "shared"))
    assert again.returncode == 254 and "exists already" in again.stderr  # never overwritten

    on_cluster = _analyze(remote, url)
    here = _analyze(local, "local[2]")

    apps = _state(ui)["completedapps"] + _state(ui)["activeapps"]
    assert [a["name"] for a in apps] == ["kafka-chaos"] * 2  # the cluster ran the analyses
    assert all(a["cores"] >= 1 for a in apps)

    def counts(results: dict) -> dict:
        return {name: a["count"] for name, a in results["anomalies"].items() if a["count"]}

    assert counts(on_cluster) == counts(here) == expected
    for key in ("valid", "violations", "stats", "cycle_search"):
        if key == "cycle_search":
            on_cluster[key].pop("time_s"), here[key].pop("time_s")
        assert on_cluster[key] == here[key], key


@pytest.mark.long  # 144 s in a full run of 2026-12-01; Spark Connect stays in it
def test_a_standalone_cluster_analyses_a_history_published_to_hdfs(standalone, hdfs,
                                                                    tmp_path: Path) -> None:
    url, ui, private = standalone
    gen = history_gen()
    local = private / "run-2"
    expected = gen.generate(local, 20_000, anomalies=1, seed=12)
    published = _kafka_chaos("publish", str(local), f"{hdfs}/runs")
    assert published.returncode == 0, published.stdout + published.stderr[-3000:]
    assert f"published: {hdfs}/runs/run-2" in published.stdout.replace("\n", "")
    apps = len(_state(ui)["completedapps"] + _state(ui)["activeapps"])
    out = tmp_path / "verdict"
    proc = _kafka_chaos("analyze", f"{hdfs}/runs/run-2", "--spark-master", url,
                        "--out", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # anomalies found
    assert len(_state(ui)["completedapps"] + _state(ui)["activeapps"]) == apps + 1
    results = json.loads((out / "results.json").read_text())
    assert {n: a["count"] for n, a in results["anomalies"].items() if a["count"]} == expected
    assert results["stats"]["ops"] > 0 and results["cycle_search"]["complete"]
    assert f"{hdfs}/runs/run-2" in (out / "report.html").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html",
                                                     "results.json", "summary.md"]
