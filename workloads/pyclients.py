"""confluent-kafka releases other than the installed one, each in a virtualenv of its own, for
``--client librdkafka --client-version V`` (``kafka-chaos bisect --axis client``).

A release's wheel bundles its librdkafka, so a version is one ``pip install
confluent-kafka==V`` from PyPI into ``cache_root()/confluent-kafka/<V>-py<X.Y>-<env>/``. The
virtualenv sees this environment's packages too (a ``.pth`` file adds its site-packages with
``site.addsitedir``, so their own ``.pth`` files, an editable install of kafka-chaos among
them, are read), after its own: its ``confluent_kafka`` is the one imported. The workload's
processes then run in children of that interpreter (``workloads/child.py``); the final reads
and the monitor stay on the installed release, which is the checker's reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from kafka_chaos.clusters import dist
from kafka_chaos.errors import ChildClientError

#: Seconds ``pip install`` may take (a wheel of a few MB from PyPI).
INSTALL_S = 300
_RELEASE = re.compile(r"\d+\.\d+\.\d+")
# version() and libversion() are (text, int) pairs in some releases and the text alone in
# others
_PROBE = ("import json, confluent_kafka as c; "
          "first = lambda v: v[0] if isinstance(v, tuple) else v; "
          "print(json.dumps({'confluent_kafka': first(c.version()), 'librdkafka': "
          "first(c.libversion())}))")


def _host_sites() -> list[str]:
    """This environment's site-packages, which the virtualenv adds after its own."""
    return sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})


def venv_dir(version: str) -> Path:
    """Where release ``version``'s virtualenv is kept for this environment (it may not exist
    yet): one per environment, since its ``.pth`` names this one's site-packages (a
    virtualenv made from an environment since deleted would import no kafka-chaos)."""
    host = hashlib.sha256("\0".join(_host_sites()).encode()).hexdigest()[:8]
    return (dist.cache_root() / "confluent-kafka"
            / f"{version}-py{sys.version_info.major}.{sys.version_info.minor}-{host}")


def python(version: str) -> tuple[Path, dict[str, str]]:
    """The interpreter of confluent-kafka ``version``'s virtualenv, made at the first call
    (seconds: one wheel), and what it imports: ``(python, {"confluent_kafka": "2.6.0",
    "librdkafka": "2.6.0"})``. Raises ``ChildClientError`` naming the version and pip's
    last words when PyPI has no such release for this Python, or the virtualenv cannot be
    made."""
    home = venv_dir(version)
    found = home / "versions.json"
    if found.is_file():
        return home / "bin" / "python", json.loads(found.read_text())
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=".making-") as tmp:
        made = Path(tmp) / "venv"
        _run([sys.executable, "-m", "venv", "--without-pip", str(made)], version, 120)
        site = Path(sysconfig.get_path("purelib", vars={"base": str(made),
                                                        "platbase": str(made)}))
        (site / "kafka-chaos-host.pth").write_text(
            "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in _host_sites())
            + "\n")
        # this environment's pip installs into the new one: no pip of its own is needed
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
              "--disable-pip-version-check", "--target", str(site),
              f"confluent-kafka=={version}"], version, INSTALL_S)
        probe = _run([str(made / "bin" / "python"), "-c", _PROBE], version, 60)
        versions = json.loads(probe.stdout.strip().splitlines()[-1])
        if versions["confluent_kafka"] != version:
            raise ChildClientError(f"confluent-kafka {version}: its virtualenv imports "
                                   f"{versions['confluent_kafka']} instead")
        (made / "versions.json").write_text(json.dumps(versions))
        try:
            os.rename(made, home)
        except OSError:  # a concurrent run made it first
            if not found.is_file():
                raise
    return home / "bin" / "python", json.loads(found.read_text())


#: PyPI's JSON description of the package (its releases and their files).
PYPI = "https://pypi.org/pypi/confluent-kafka/json"


def releases(timeout_s: float = 10.0) -> list[str]:
    """The confluent-kafka releases (``MAJOR.MINOR.PATCH``) PyPI serves a wheel of for this
    Python and machine, oldest first. Raises ``ChildClientError`` naming the URL when PyPI
    cannot be read."""
    import platform
    import urllib.request

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    try:
        with urllib.request.urlopen(PYPI, timeout=timeout_s) as response:
            listed = json.loads(response.read())["releases"]
    except (OSError, ValueError, KeyError) as exc:
        raise ChildClientError(f"{PYPI} could not be read: {exc}") from None
    return sorted((v for v, files in listed.items() if _RELEASE.fullmatch(v) and any(
        tag in f["filename"] and "manylinux" in f["filename"]
        and platform.machine() in f["filename"] for f in files)),
        key=lambda v: tuple(map(int, v.split("."))))


def _run(argv: list[str], version: str, timeout_s: float) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ChildClientError(f"confluent-kafka {version}: {Path(argv[0]).name} "
                               f"{' '.join(argv[1:3])} took over {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise ChildClientError(f"confluent-kafka {version} could not be installed: "
                               f"{' / '.join(said[-3:])}")
    return proc

