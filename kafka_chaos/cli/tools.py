"""``kafka-chaos report``, ``fetch-kafka`` and ``spark-archive``: rebuilding a run's page,
and preparing this machine (``setup.sh`` calls the last two)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import console
from kafka_chaos.clusters import dist


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding history.jsonl and "
                                   "results.json."),
) -> None:
    """Rebuild report.html of a run directory from its history.jsonl and results.json (no
    analysis; exit 254 naming the file when one is missing or malformed)."""
    from kafka_chaos.report import html as html_report

    console.print(f"report: {html_report.write(run_dir)}")


@app.command("fetch-kafka")
def fetch_kafka(
    versions: list[str] = typer.Argument(None, help="Versions (default: the pinned one)."),
    list_: bool = typer.Option(False, "--list", help="Print the versions Maven Central serves "
                               "that kafka-chaos can run, oldest first, and fetch nothing."),
) -> None:
    """Download Kafka broker jars from Maven Central into the cache, make the class archive
    its brokers start with on the local backend, and compile the Java client driver against
    them (for run --client java; done by setup.sh)."""
    from kafka_chaos.clusters import kafka_cds, local
    from kafka_chaos.workloads import java_client

    if list_:
        console.print("\n".join(dist.served()))
        return
    java = dist.check_java()
    for version in versions or [dist.DEFAULT_KAFKA_VERSION]:
        kafka = dist.resolve(version)
        console.print(f"Kafka {kafka.version}: {kafka.libs}")
        kafka_cds.ensure(kafka, java, local.JVM_OPTIONS, local.kafka_uuid(), console.print)
        classes, _ = java_client.build(version)
        console.print(f"Java client driver (kafka-clients {version}): {classes}")


@app.command("spark-archive")
def spark_archive(
    master: str = typer.Option("local[2]", help="Spark master of the check that loads the "
                               "classes."),
    if_missing: bool = typer.Option(False, "--if-missing", metavar="",
                                    help="Keep the archive for this Java and pyspark if there "
                                    "is one."),
) -> None:
    """Build the class data sharing archive of the analysis's driver JVM, so that its sessions
    start in half the time (done by setup.sh; again after upgrading Java or pyspark)."""
    from kafka_chaos.analysis import cds

    started = time.monotonic()
    existing = cds.archive()
    if if_missing and existing is not None and existing.is_file():
        console.print(f"class archive: {existing}")
        return
    path = cds.build(master)
    console.print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MiB, "
                  f"{time.monotonic() - started:.1f} s)")
