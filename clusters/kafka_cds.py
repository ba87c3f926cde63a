"""A class data sharing (CDS) archive of a Kafka broker's classes, for the JVMs the local
backend starts: a broker starts in a third of the time.

A broker JVM loads, parses and verifies the classes of Kafka, Scala and their libraries
before it serves anything. On the 2-core machine (Kafka 4.4.0, one KRaft node, the local
backend's JVM options) "Kafka Server started" came 2.9-3.0 s after the launch, and 1.1 s with
the archive; a cluster of three on two cores waits for three such starts. ``ensure`` makes
the archive once per Kafka distribution and JVM: a one-node KRaft cluster on 127.0.0.1 whose
JVM writes every class it loaded to an archive when it exits after the broker started
(HotSpot's dynamic archive, JEP 350: ``-XX:ArchiveClassesAtExit``); ``java_options`` then maps
it into each broker and storage-tool JVM (``-XX:SharedArchiveFile``).

An archive holds for the JVM build and the class path it was made with. Its name hashes both,
and HotSpot maps it only when they match (otherwise the JVM starts without it, as without an
archive; its CDS log lines are off). ``KAFKA_CHAOS_CDS=off`` turns it off, as it does the
analysis's archive (``analysis.cds``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from kafka_chaos.clusters.dist import KafkaDist, cache_root
from kafka_chaos.clusters.kafka_config import LOG4J1, LOG4J2
from kafka_chaos.waiting import WaitTimeout, wait_until

#: ``KAFKA_CHAOS_CDS=off``: no archive is used or made.
ENV = "KAFKA_CHAOS_CDS"
#: HotSpot's CDS log lines (an archive that does not match) would go to each node's output.
_QUIET = "-Xlog:cds*=off"
#: Longest wait for the archive's broker to start, and then to exit and write it, seconds.
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0


def enabled() -> bool:
    """Archives are neither used nor made when ``KAFKA_CHAOS_CDS`` is ``off``."""
    return os.environ.get(ENV, "").strip().lower() != "off"


def archive(dist: KafkaDist, java: str) -> Path:
    """Where the archive of ``dist`` run by ``java`` is: ``<cache>/kafka-cds/<version>-<hash>.jsa``
    (a folder of its own: the analysis's archive folder removes archives it did not make),
    the hash of the class path and of the JVM (its real path, size and modification time)."""
    real = os.path.realpath(java)
    stat = os.stat(real)
    key = f"{dist.classpath}\n{real}\n{stat.st_size}\n{stat.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root() / "kafka-cds" / f"{dist.version}-{digest}.jsa"


def java_options(dist: KafkaDist, java: str) -> list[str]:
    """The JVM options that map the archive (none when there is none, or archives are off)."""
    path = archive(dist, java)
    if not enabled() or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", _QUIET]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure(dist: KafkaDist, java: str, jvm_options: list[str], cluster_id: str,
           log: Callable[[str], object] = lambda _: None) -> Path | None:
    """The archive of ``dist`` and ``java``, made now when there is none (about 8 s once):
    a one-node broker of cluster ``cluster_id`` (a Kafka Uuid) started with ``jvm_options``
    (those of the JVMs that will map it) and stopped with SIGTERM once started. Returns its
    path, or None when archives are off or it could not be made (``log`` says why; the
    brokers then start without one). Never raises for a broker that would not start: that
    is the cluster's own start to report."""
    path = archive(dist, java)
    if not enabled():
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kc-kafka-cds-", dir=path.parent) as tmp:
        d = Path(tmp)
        broker, controller = _free_port(), _free_port()
        (d / "server.properties").write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{controller}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={d / 'data'}\noffsets.topic.replication.factor=1\n")
        # the brokers' own logging (log4j 2 from Kafka 4, log4j 1 before): server.log here
        (d / "log4j2.properties").write_text(LOG4J2)
        (d / "log4j.properties").write_text(LOG4J1)
        props = [f"-Dkafka.logs.dir={d}", f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}",
                 f"-Dlog4j.configuration=file:{d / 'log4j.properties'}"]
        made = d / "kafka.jsa"
        formatted = subprocess.run(
            [java, *jvm_options, *props, "-cp", dist.classpath, "kafka.tools.StorageTool",
             "format", "-t", cluster_id, "-c", str(d / "server.properties")],
            capture_output=True, text=True)
        if formatted.returncode != 0:
            log(f"no class archive for Kafka {dist.version}: formatting its broker failed")
            return None
        # killed with this process, whatever ends it (a SIGKILL runs no ``finally``): it is
        # recorded nowhere a later ``cluster down`` would find it
        dies_with_us = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        with open(d / "server.out", "wb") as out:
            proc = subprocess.Popen(
                [*dies_with_us, java, *jvm_options, f"-XX:ArchiveClassesAtExit={made}", *props,
                 "-cp", dist.classpath, "kafka.Kafka", str(d / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: proc.poll() is not None or "Kafka Server started" in (
                (d / "server.log").read_text(errors="replace")
                if (d / "server.log").exists() else ""), START_TIMEOUT_S, 0.1,
                "the archive's broker to start")
            proc.send_signal(signal.SIGTERM)  # a normal exit: the JVM writes the archive
            proc.wait(EXIT_TIMEOUT_S)
        except (WaitTimeout, subprocess.TimeoutExpired):
            pass
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if not made.is_file():
            tail = (d / "server.out").read_text(errors="replace").strip()[-300:]
            log(f"no class archive for Kafka {dist.version}: its broker wrote none ({tail})")
            return None
        os.replace(made, path)  # atomic: a concurrent run maps a whole archive or none
    log(f"class archive for Kafka {dist.version}: {path}")
    return path
