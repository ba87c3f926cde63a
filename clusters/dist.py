"""Kafka broker classpaths resolved from Maven Central, cached per version.

A distribution is a directory of jars: ``org.apache.kafka:kafka_2.13:<version>`` with its runtime
dependencies plus a logging binding (log4j2 for Kafka 4.x, reload4j for 3.x, matching what the
Apache tarballs ship). It is resolved once with ``mvn dependency:copy-dependencies`` on a generated
pom and kept in ``$XDG_CACHE_HOME/kafka-chaos/kafka/<version>/libs``; a version Maven Central does
not serve is refused before Maven starts (``central``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

# the default version is the settings' (a setting's default), named here too
from kafka_chaos.catalogue.backends import DEFAULT_KAFKA_VERSION
from kafka_chaos.clusters import central
from kafka_chaos.clusters.errors import DistributionError

#: Kafka 4.x brokers need Java 17 (KIP-1013); 3.9 runs on 11+, but we require one floor.
MIN_JAVA = 17

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")

_LOGGING_4X = """
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.17</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>"""
_LOGGING_3X = """
    <dependency><groupId>ch.qos.reload4j</groupId><artifactId>reload4j</artifactId><version>1.2.25</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>"""

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-chaos</groupId><artifactId>kafka-dist</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{version}</version></dependency>{logging}
  </dependencies>
</project>
"""


@dataclasses.dataclass(frozen=True)
class KafkaDist:
    """A usable Kafka distribution.

    Attributes:
        version: e.g. ``"4.4.0"``.
        libs: directory holding every jar of the broker classpath.
    """

    version: str
    libs: Path

    @property
    def classpath(self) -> str:
        """``:``-joined absolute jar paths, sorted for reproducible command lines."""
        return ":".join(str(p) for p in sorted(self.libs.glob("*.jar")))


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/kafka-chaos`` (default ``~/.cache/kafka-chaos``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-chaos"


def check_java() -> str:
    """Return the ``java`` path; raise ``DistributionError`` if missing or older than
    ``MIN_JAVA``."""
    java = shutil.which("java")
    if java is None:
        raise DistributionError(f"java not found on PATH: install a JDK/JRE >= {MIN_JAVA} "
                                "(e.g. apt-get install openjdk-17-jre-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    check_java_version(out, "java")
    return java


def check_java_version(version_output: str, where: str) -> int:
    """The major version in ``java -version`` output (``"1.8.0_x"`` counts as 8).

    Raises ``DistributionError`` naming ``where`` (e.g. a host) when it cannot be read or is
    older than ``MIN_JAVA``.
    """
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not m:
        raise DistributionError(f"cannot read the Java version of {where} from `java -version`: "
                                f"{version_output.strip()[:300]!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise DistributionError(f"{where}: Java {major} is too old: Kafka needs Java >= {MIN_JAVA}")
    return major


def from_home(home: Path) -> KafkaDist:
    """Use an unpacked Apache distribution (``DIR/libs/kafka_2.13-<version>.jar``).

    Raises ``DistributionError`` when ``DIR/libs`` holds no ``kafka_2.13-*.jar``.
    """
    libs = Path(home) / "libs"
    jars = sorted(libs.glob("kafka_2.13-*.jar"))
    jars = [j for j in jars if re.fullmatch(r"kafka_2\.13-\d+\.\d+\.\d+\.jar", j.name)]
    if not jars:
        raise DistributionError(f"--kafka-home {home}: no libs/kafka_2.13-<version>.jar found; "
                                "pass the directory of an unpacked Apache Kafka distribution")
    version = jars[0].name[len("kafka_2.13-"):-len(".jar")]
    return KafkaDist(version, libs)


def served(timeout_s: float = 3.0) -> list[str]:
    """The Kafka versions Maven Central serves that kafka-chaos can run (KRaft: 3.0.0 and
    later), oldest first. Raises ``DistributionError`` (one line) when Central's list cannot be
    read within about ``timeout_s`` seconds."""
    return [v for v in central.fetch_versions(timeout_s) if int(v.split(".")[0]) >= 3]


def check_version(version: str) -> int:
    """The major version of ``version``, from its text alone (no download). Raises
    ``DistributionError`` unless it is ``MAJOR.MINOR.PATCH`` with a KRaft major (3 or more).
    """
    m = _VERSION_RE.match(version)
    if not m:
        raise DistributionError(f"--kafka-version {version!r}: expected MAJOR.MINOR.PATCH, e.g. "
                                f"{DEFAULT_KAFKA_VERSION} or 3.9.1")
    major = int(m.group(1))
    if major < 3:
        raise DistributionError(f"--kafka-version {version}: KRaft needs Kafka >= 3.x")
    return major


def resolve(version: str = DEFAULT_KAFKA_VERSION, *, offline: bool = False) -> KafkaDist:
    """Return the cached distribution for ``version``, downloading it with Maven if needed.

    Raises ``DistributionError`` in one line for a malformed version (``check_version``), one
    Maven Central does not serve (naming the nearest it does), a missing ``mvn``, mvn's
    failure (a repository it cannot reach, say), or (with ``offline``) a version that is not
    cached. A failure leaves nothing in the cache.
    """
    major = check_version(version)
    libs = cache_root() / "kafka" / version / "libs"
    if (libs / f"kafka_2.13-{version}.jar").exists():
        return KafkaDist(version, libs)
    if offline:
        raise DistributionError(f"Kafka {version} is not cached in {libs}")
    try:
        listed: list[str] | None = served()
    except DistributionError:  # offline, or a mirror only Maven reaches: mvn decides
        listed = None
    if listed is not None and version not in listed:
        raise DistributionError(central.unknown(version, listed))
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DistributionError("mvn not found: Maven is needed to fetch Kafka jars "
                                "(apt-get install maven), or pass --kafka-home")
    pom = _POM.format(version=version, logging=_LOGGING_4X if major >= 4 else _LOGGING_3X)
    # staged beside the versions, not in <version>/: a failure leaves no empty folder
    libs.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{version}-", dir=libs.parent.parent) as tmp:
        (Path(tmp) / "pom.xml").write_text(pom)
        staging = Path(tmp) / "libs"
        proc = subprocess.run(
            [mvn, "-q", "-B", "-Dstyle.color=never", "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
            cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0 or not (staging / f"kafka_2.13-{version}.jar").exists():
            raise DistributionError(central.mvn_failure(version, proc.stdout + proc.stderr,
                                                        listed))
        libs.parent.mkdir(exist_ok=True)
        # rename is atomic: a concurrent or interrupted resolve never leaves half a libs/ dir
        staging.rename(libs)
    return KafkaDist(version, libs)
