"""A history published to an S3 bucket and analysed from its ``s3a://`` URL, with Hadoop's S3
connector set up as ``docs/spark-cluster.md`` says (``spark.jars.packages`` of ``hadoop-aws``
of pyspark's Hadoop version, from Maven Central).

The object store is SeaweedFS's S3 gateway (a master, a volume server, a filer and the S3
API in one ``weed server``), built from the Go module proxy (no release download can be
reached here) into ``~/.cache/kafka-chaos/seaweedfs`` on first use. The analysis runs in
local mode: that executors on other hosts read what ``publish`` put on shared storage is the
HDFS test's subject (``test_spark_standalone.py``); this one is about the S3 path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.conftest import free_port, hadoop_version, history_gen

# its SeaweedFS build takes 4 minutes on a fresh machine: the longer tier (docs/nightly.md); a
# history on remote storage stays in the full suite with test_spark_standalone's HDFS
pytestmark = [pytest.mark.spark, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
#: The SeaweedFS version built (a Go pseudo-version the module proxy serves).
SEAWEEDFS = "v0.0.0-20261109003541-7506e5f91cd6"


def _weed() -> Path:
    """The ``weed`` binary of ``SEAWEEDFS``, built once (about 4 min and 2 GB of modules,
    which are removed afterwards)."""
    binary = Path.home() / ".cache" / "kafka-chaos" / "seaweedfs" / f"weed-{SEAWEEDFS}"
    if binary.is_file():
        return binary
    go = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go",) if os.access(p, os.X_OK)), None)
    if go is None:
        pytest.fail("building SeaweedFS needs the go command (the Go toolchain)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="seaweedfs-build-") as tmp:
        env = {**os.environ, "GOPATH": f"{tmp}/gopath", "GOMODCACHE": f"{tmp}/mod",
               "GOCACHE": f"{tmp}/cache", "GOFLAGS": "-modcacherw"}
        module = f"github.com/seaweedfs/seaweedfs@{SEAWEEDFS}"
        found = subprocess.run([go, "mod", "download", "-json", module], env=env,
                               capture_output=True, text=True, timeout=900, check=True)
        src = Path(tmp) / "src"
        # its go.mod has replace directives, so it is built as the main module, not installed
        shutil.copytree(json.loads(found.stdout)["Dir"], src)
        subprocess.run([go, "build", "-o", f"{binary}.tmp", "./weed"], cwd=src, env=env,
                       check=True, timeout=1800)
    os.replace(f"{binary}.tmp", binary)
    return binary


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> Iterator[str]:
    """A SeaweedFS S3 endpoint on 127.0.0.1 with a bucket ``runs``; yields its URL."""
    weed = _weed()
    tmp = tmp_path_factory.mktemp("seaweedfs")
    ports = {name: free_port() for name in (
        "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
        "filer.port.grpc", "s3.port", "s3.port.grpc")}
    args = [f"-{name}={port}" for name, port in ports.items()]
    proc = subprocess.Popen(
        [str(weed), "server", f"-dir={tmp}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer",
         "-s3", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false", *args],
        stdout=open(tmp / "weed.log", "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{ports['s3.port']}"
    try:
        deadline = time.monotonic() + 120
        while True:  # the bucket can be made once the filer and a volume server are up
            try:
                with urllib.request.urlopen(urllib.request.Request(f"{url}/runs", method="PUT"),
                                            timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"SeaweedFS did not come up:\n"
                                f"{(tmp / 'weed.log').read_text()[-3000:]}")
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_history_published_to_s3_is_analysed_from_its_s3a_url(s3, tmp_path: Path) -> None:
    local = tmp_path / "run-3"
    expected = history_gen().generate(local, 20_000, anomalies=1, seed=13)
    conf = {  # as docs/spark-cluster.md has it, with this endpoint's settings
        "spark.jars.packages": f"org.apache.hadoop:hadoop-aws:{hadoop_version()}",
        "spark.hadoop.fs.s3a.endpoint": s3,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    }
    env = {**os.environ, "KAFKA_CHAOS_SPARK_CONF": ",".join(f"{k}={v}" for k, v in conf.items()),
           "AWS_ACCESS_KEY_ID": "kafka-chaos", "AWS_SECRET_ACCESS_KEY": "kafka-chaos"}

    def kafka_chaos(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(ROOT / ".venv" / "bin" / "kafka-chaos"), *args], env=env,
                              capture_output=True, text=True, timeout=900)

    published = kafka_chaos("publish", str(local), "s3a://runs/nightly")
    assert published.returncode == 0, published.stdout + published.stderr[-3000:]
    assert "published: s3a://runs/nightly/run-3" in published.stdout.replace("\n", "")
    # the objects really are in the bucket, the history among them
    with urllib.request.urlopen(f"{s3}/runs?list-type=2&prefix=nightly/run-3/",
                                timeout=10) as r:
        listing = r.read().decode()
    assert "<Key>nightly/run-3/history.jsonl</Key>" in listing, listing[:2000]

    out = tmp_path / "verdict"
    proc = kafka_chaos("analyze", "s3a://runs/nightly/run-3", "--out", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # anomalies found
    results = json.loads((out / "results.json").read_text())
    assert {n: a["count"] for n, a in results["anomalies"].items() if a["count"]} == expected
    assert results["stats"]["ops"] > 0 and results["cycle_search"]["complete"]
    assert "s3a://runs/nightly/run-3" in (out / "report.html").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html",
                                                     "results.json", "summary.md"]
