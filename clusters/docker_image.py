"""A Kafka image built without any registry: a Debian rootfs made by ``debootstrap`` with a
headless JRE, plus the broker jars of the Maven cache, ``docker import``ed.

For air-gapped machines and for this project's tests (no registry is reachable here). Elsewhere
the Docker backend defaults to the official ``apache/kafka:<version>`` image. Any image works
that has ``java`` (17+) and ``sh`` on ``PATH`` and the Kafka jars in ``/opt/kafka/libs``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from kafka_chaos.clusters.dist import KafkaDist
from kafka_chaos.clusters.errors import CommandFailed, EnvironmentUnsupported

REPOSITORY = "kafka-chaos/kafka"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("openjdk-17-jre-headless",)
_RECIPE = 1  # bump when the way the rootfs is made changes


def image_tag(dist: KafkaDist) -> str:
    """``kafka-chaos/kafka:<version>-<hash>``: the hash covers the jars (names and sizes), the
    Debian suite, the packages and this recipe, so a changed input makes a new image."""
    h = hashlib.sha256(f"{_RECIPE} {SUITE} {' '.join(PACKAGES)}".encode())
    for jar in sorted(Path(dist.libs).glob("*.jar")):
        h.update(f"{jar.name} {jar.stat().st_size}\n".encode())
    return f"{REPOSITORY}:{dist.version}-{h.hexdigest()[:12]}"


def ensure_image(client, dist: KafkaDist, log=print) -> str:
    """The local image for ``dist``, built once and then found by its tag.

    ``client``: a ``docker.DockerClient``. Takes about a minute the first time (``debootstrap``
    downloads ~100 MB of Debian packages). Raises ``EnvironmentUnsupported`` without
    ``debootstrap`` and ``CommandFailed`` when it fails.
    """
    import docker.errors

    tag = image_tag(dist)
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    if shutil.which("debootstrap") is None:
        raise EnvironmentUnsupported("building a Kafka image needs debootstrap: "
                                     "apt-get install debootstrap")
    log(f"building {tag} (debootstrap {SUITE} + {', '.join(PACKAGES)} + Kafka jars)")
    with tempfile.TemporaryDirectory(prefix="kc-image-") as tmp:
        root = Path(tmp) / "root"
        proc = subprocess.run(["debootstrap", "--variant=minbase",
                               f"--include={','.join(PACKAGES)}", SUITE, str(root), MIRROR],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CommandFailed(f"debootstrap failed: {(proc.stdout + proc.stderr)[-1500:]}", proc)
        libs = root / "opt" / "kafka" / "libs"
        libs.mkdir(parents=True)
        for jar in Path(dist.libs).glob("*.jar"):
            shutil.copy(jar.resolve(), libs / jar.name)
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tar = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
        repository, version = tag.split(":")
        client.api.import_image_from_file(
            str(tar), repository=repository, tag=version,
            changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    client.images.get(tag)  # raises if the import did not produce it
    return tag
