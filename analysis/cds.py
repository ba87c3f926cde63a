"""A class data sharing (CDS) archive of the analysis JVM's classes: the driver JVM starts in
half the time.

Before its first job a driver JVM loads, parses and verifies the classes of Spark, Scala and
their libraries, which took most of the 4.9-5.1 s a session took to start on the 2-core
machine. ``build`` checks the made-up history of ``analysis.warm`` in a child process whose
JVM writes every class it loaded to an archive when it exits (HotSpot's dynamic CDS archive,
JEP 350: ``-XX:ArchiveClassesAtExit``); each driver JVM ``analysis.spark.session`` starts
afterwards maps them from it (``-XX:SharedArchiveFile``): a session then started in 2.3 s,
and a 10 M-op check took about 3 s less (``docs/performance.md``). ``setup.sh`` builds it
(``kafka-chaos spark-archive``).

An archive holds for the JVM build and the class path it was made with. Its name is a hash of
both (the ``java`` that Spark launches, the pyspark jars), so an upgrade of either needs a new
one, and HotSpot itself maps it only when they match (otherwise it starts without it, as
without an archive; its CDS log lines are turned off, since the CLI owns the terminal). JDK
17 archives no class path that holds a folder with files in it, so the analysis's driver JVMs
get an empty ``SPARK_CONF_DIR`` (``conf_dir``) and their log configuration as
``-Dlog4j2.configurationFile``; a ``SPARK_CONF_DIR`` of the user's own is kept, and the JVM
then starts without the archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyspark

from kafka_chaos.errors import CdsError
from kafka_chaos.history.columnar import cache_root

#: ``KAFKA_CHAOS_CDS=off`` starts every driver JVM without the archive (and ``build`` refuses).
ENV = "KAFKA_CHAOS_CDS"
#: Set by ``build`` for its child: where that child's JVM writes the archive.
_DUMP_ENV = "KAFKA_CHAOS_CDS_DUMP"
#: Longest ``build`` waits for its child, seconds (it took 25-30 s on the 2-core machine).
BUILD_TIMEOUT_S = 600.0
#: The option that maps an archive (``java_options``; ``spark.session`` starts a JVM again
#: without it when it cannot start with it).
MAP_OPTION = "-XX:SharedArchiveFile="
#: HotSpot's CDS log lines (mismatched or missing archives, classes it cannot archive) would
#: interleave with the CLI's output.
_QUIET = "-Xlog:cds*=off"


def enabled() -> bool:
    """Archives are neither used nor built when ``KAFKA_CHAOS_CDS`` is ``off``."""
    return os.environ.get(ENV, "").strip().lower() != "off"


def folder() -> Path:
    """``<cache_root()>/cds``: the archive and the empty ``conf_dir``."""
    return cache_root() / "cds"


def conf_dir() -> Path:
    """An empty folder for the driver JVM's ``SPARK_CONF_DIR`` (Spark puts it on the class
    path), created if missing."""
    path = folder() / "spark-conf"
    path.mkdir(parents=True, exist_ok=True)
    return path


def java() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on ``PATH``;
    its real path, or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def archive() -> Path | None:
    """Where the archive for this ``java`` and these pyspark jars is (or would be):
    ``folder()/<16 hex digits>.jsa``, from the SHA-256 of the java binary's and its
    ``libjvm.so``'s path, size and modification time, pyspark's version, and each jar's name,
    size and modification time (HotSpot checks the jars the same way). None without a
    ``java``."""
    runner = java()
    if runner is None:
        return None
    digest = hashlib.sha256(pyspark.__version__.encode())
    jars = sorted(_jars().glob("*.jar"))
    for path in [runner, runner.parent.parent / "lib" / "server" / "libjvm.so", *jars]:
        st = path.stat() if path.exists() else None
        digest.update(f"{path}\0{st and st.st_size}\0{st and st.st_mtime_ns}\n".encode())
    return folder() / f"{digest.hexdigest()[:16]}.jsa"


def java_options() -> str:
    """The JVM options a driver JVM starts with for the archive: ``-XX:SharedArchiveFile``
    when it exists; in ``build``'s child ``-XX:ArchiveClassesAtExit``; else none (``""``)."""
    if not enabled():
        return ""
    dump = os.environ.get(_DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {_QUIET}"
    path = archive()
    if path is None or not path.is_file():
        return ""
    # HotSpot stops on a damaged archive (``spark.session`` then starts without it): its crash
    # report goes beside the archive, not into the working folder
    return (f"{MAP_OPTION}{path} {_QUIET} "
            f"-XX:ErrorFile={path.parent / 'hs_err_pid%p.log'}")


def discard() -> None:
    """Delete this installation's archive (a JVM could not start with it)."""
    path = archive()
    if path is not None:
        path.unlink(missing_ok=True)
        path.with_suffix(".json").unlink(missing_ok=True)


def build(master: str = "local[2]", timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Make the archive for this ``java`` and these jars: a child process checks the made-up
    history of ``analysis.warm`` on ``master`` and waits for its JVM to exit, which writes the
    archive to a temporary file, renamed into place only once complete (a JVM that has an
    older one mapped keeps reading it). Beside it, ``<name>.json`` names the java binary and
    the jars folder; the archives it replaces (the same two) and those whose java or jars
    are gone are deleted, those of other installations kept (another checkout's
    ``.venv``). Returns the archive's path.

    Raises ``CdsError`` when archives are off, there is no ``java``, or the child fails, times
    out or writes no archive (with the end of its output). On any error, Ctrl-C included, the
    child and its JVM are killed (a JVM that exited normally would still write the archive)
    and the temporary file removed."""
    if not enabled():
        raise CdsError("class data sharing is off (KAFKA_CHAOS_CDS=off)")
    path = archive()
    if path is None:
        raise CdsError("no java found (JAVA_HOME, PATH)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    child = subprocess.Popen(
        # the child's own process imports warm (which imports the analysis, which imports
        # this module through spark): a string here, no import cycle
        [sys.executable, "-c", "from kafka_chaos.analysis.warm import archive_child; "
         f"archive_child({master!r})"],
        env={**os.environ, _DUMP_ENV: str(tmp)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        try:
            out, _ = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise CdsError(f"building the class archive took over {timeout_s:.0f} s") from exc
        if child.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tail = "\n".join(out.strip().splitlines()[-15:])
            raise CdsError(f"no class archive was written (exit {child.returncode}): {tail}")
        os.replace(tmp, path)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # the child, its JVM: no archive written
            child.wait()
        tmp.unlink(missing_ok=True)
    made = {"java": str(java()), "jars": str(_jars())}
    for other in path.parent.glob("*.jsa"):
        try:
            owner = json.loads(other.with_suffix(".json").read_text())
        except (OSError, ValueError):
            owner = {}  # made before owners were recorded: its installation is unknown
        if other != path and (owner in ({}, made) or not all(
                Path(p).exists() for p in owner.values())):
            other.unlink(missing_ok=True)
            other.with_suffix(".json").unlink(missing_ok=True)
    path.with_suffix(".json").write_text(json.dumps(made))
    return path
