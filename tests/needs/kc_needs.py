"""Tests marked by what they need, and held to it.

A test that needs more than Python carries a marker saying what (``pyproject.toml`` declares
them): ``kafka`` (real brokers), ``spark`` (a Spark session), ``jvm`` (any other JVM: the Java
client driver, javac, Maven), ``docker`` (the Docker daemon), ``browser`` (Chromium), ``root``
(namespaces, iptables, mounts). ``kafka`` implies ``jvm``, ``root`` and ``spark`` (a run's
verdict is a Spark analysis), ``spark`` implies ``jvm``. Two more set a test's tier:
``slow`` (seconds of its own with none of the above: builds a wheel, a virtualenv) and
``long`` (the longer tier, ``docs/nightly.md``: left out unless a ``-m`` expression names
it). A test with none of them is marked ``fast``:
``pytest -m fast tests`` is the fast tier.

The markers are enforced, not reviewed. Every process the test suite starts, and every
process those start when they are Python (``sitecustomize.py`` of this folder is on their
``PYTHONPATH``), reports through an audit hook (PEP 578) the programs it launches
(``subprocess.Popen``) and the Docker daemon connections it opens (``socket.connect``); an
existing Spark session reused in the suite's process counts as a Spark start. What the running
test lacks a marker for is refused (``MissingMarker`` where it starts) and written to a log;
the test then fails with a message naming the marker, whatever its own outcome.

This module is both the pytest plugin (imported by ``tests/conftest.py``) and the audit hook of
child processes; it imports nothing of kafka-chaos.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import kc_workers

#: Markers of what a test starts, in the order messages name them.
NEEDS = ("kafka", "spark", "jvm", "docker", "browser", "root")
#: A marker that grants others: a Kafka broker is a JVM run as root in a namespace, and a run
#: on real brokers ends in its analysis, on Spark.
IMPLIES = {"kafka": {"jvm", "root", "spark"}, "spark": {"jvm"}}
#: Tier markers: a fast test has none of these nor of ``NEEDS``.
TIERS = ("slow", "long")
#: Environment: the running test's markers (comma-separated), and the file violations go to.
ENV_NEEDS = "KAFKA_CHAOS_TEST_NEEDS"
ENV_LOG = "KAFKA_CHAOS_TEST_NEEDS_LOG"
HERE = Path(__file__).resolve().parent

_ROOT_TOOLS = {"mount", "umount", "iptables", "ip6tables", "iptables-save", "iptables-restore",
               "nsenter", "unshare", "fusermount", "fusermount3", "sshd", "debootstrap",
               "chroot", "sudo", "useradd"}
_IP_CHANGES = {"add", "del", "delete", "set", "exec", "flush", "replace"}
_SPARK = ("spark-submit", "spark-class", "org.apache.spark.")
_KAFKA_MAINS = {"kafka.Kafka", "kafka.tools.StorageTool"}
_WATCHED = frozenset({"subprocess.Popen", "socket.connect"})


class MissingMarker(PermissionError):
    """Raised where a test's process starts what the test has no marker for."""


def classify(argv: Sequence[Any]) -> tuple[str, str] | None:
    """``(need, what)`` for a program about to start with ``argv`` (``Popen``'s arguments),
    or None when it needs nothing but Python. Checked in order: a Kafka broker or its storage
    tool (``kafka``), Spark (``spark``), any other JVM or JVM tool (``jvm``), Docker's tools
    (``docker``), Chromium and its driver (``browser``), tools that change the host's network,
    mounts or users (``root``)."""
    words = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in argv]
    names = [os.path.basename(w) for w in words]
    shown = " ".join(words)[:160]
    if "java" in names or "spark-submit" in names:
        mains = sorted(_KAFKA_MAINS & set(words))
        if mains:
            return "kafka", f"a Kafka broker ({mains[0]}: {shown})"
        if any(s in w for w in words for s in _SPARK):
            return "spark", f"Spark ({shown})"
        return "jvm", f"a JVM ({shown})"
    if any(s in w for w in words for s in _SPARK):
        return "spark", f"Spark ({shown})"
    if {"javac", "mvn", "jar", "jshell"} & set(names):
        return "jvm", f"a JVM tool ({shown})"
    program = _program(names)
    if program in ("docker", "dockerd", "docker-compose"):
        return "docker", f"Docker ({shown})"
    if program.startswith(("chromium", "chromedriver", "google-chrome")):
        return "browser", f"a browser ({shown})"
    if _ROOT_TOOLS & set(names) or (names and names[0] == "ip" and _IP_CHANGES & set(words)):
        return "root", f"a privileged tool ({shown})"
    return None


def _program(names: list[str]) -> str:
    """The program ``names`` (argv's basenames) runs, past ``sudo``/``env``/``nohup`` and
    their options: ``pgrep -x dockerd`` runs pgrep, not Docker."""
    rest = list(names)
    while rest and (rest[0] in ("sudo", "env", "nohup") or rest[0].startswith("-")
                    or "=" in rest[0]):
        rest.pop(0)
    return rest[0] if rest else ""


def granted(markers: Iterable[str]) -> set[str]:
    """The needs ``markers`` (a test's marker names) allow, implications included."""
    out = set(markers)
    for marker in list(out):
        out |= IMPLIES.get(marker, set())
    return out


def _record(need: str, what: str) -> None:
    allowed = os.environ.get(ENV_NEEDS)
    log = os.environ.get(ENV_LOG)
    if allowed is None or log is None or need in granted(allowed.split(",")):
        return
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"need": need, "what": what, "pid": os.getpid()}) + "\n")
    # refused, not only noted: a test without the marker neither waits minutes for what it
    # starts nor reads as a missing program on a machine without it
    raise MissingMarker(f"{what} needs the `{need}` marker (tests/needs/kc_needs.py)")


def _hook(event: str, args: tuple) -> None:
    if event not in _WATCHED:
        return
    if event == "subprocess.Popen":
        _, argv, _, _ = args
        found = classify([argv] if isinstance(argv, (str, bytes, os.PathLike)) else argv or [])
        if found:
            _record(*found)
    else:
        address = args[1]
        if isinstance(address, (str, bytes)) and os.fsdecode(address).endswith("docker.sock"):
            _record("docker", "the Docker daemon (its socket)")


_installed = False


def install() -> None:
    """Add the audit hook to this process (once; a hook cannot be removed, so it only acts
    while ``ENV_NEEDS`` and ``ENV_LOG`` are set)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


@contextlib.contextmanager
def housekeeping() -> Iterator[None]:
    """The suite's own work, outside any test's needs: cleaning up what earlier runs left and
    checking that nothing was left (``tests/integration/conftest.py``)."""
    before = os.environ.get(ENV_NEEDS)
    os.environ[ENV_NEEDS] = ",".join(NEEDS)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_NEEDS, None)
        else:
            os.environ[ENV_NEEDS] = before


# --- the pytest plugin --------------------------------------------------------------------

_log_offset = 0


def _patch_spark_reuse() -> None:
    """A Spark session created in an earlier test is returned by ``getOrCreate`` without a new
    JVM, so no process start shows the later test's use: count each call as a Spark start."""
    session = sys.modules.get("pyspark.sql.session")
    builder = getattr(getattr(session, "SparkSession", None), "Builder", None)
    if builder is None or getattr(builder.getOrCreate, "_kc_needs", False):
        return
    original = builder.getOrCreate

    def getOrCreate(self):  # noqa: N802 (pyspark's name)
        _record("spark", "a Spark session (SparkSession.builder.getOrCreate)")
        return original(self)

    getOrCreate._kc_needs = True
    builder.getOrCreate = getOrCreate


def pytest_configure(config) -> None:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"kc-needs-{os.getpid()}.jsonl"
    path.write_text("")
    os.environ[ENV_LOG] = str(path)
    # child Pythons load sitecustomize.py of this folder, which installs the same hook
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    install()
    kc_workers.configure(config)


def pytest_unconfigure(config) -> None:
    kc_workers.unconfigure()
    log = os.environ.pop(ENV_LOG, None)
    os.environ.pop(ENV_NEEDS, None)
    if log:
        Path(log).unlink(missing_ok=True)


#: The order tiers run in: quick feedback first, the real clusters last.
ORDER = ("fast", "slow", "jvm", "browser", "root", "spark", "docker", "kafka", "long")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark ``fast`` what needs nothing; leave out ``long`` tests unless ``-m`` names them;
    run the tiers in ``ORDER`` (a stable sort: a module's tests of one tier stay together, and
    so do the module-scoped clusters they share)."""
    wants_long = "long" in (config.option.markexpr or "")
    kept, left = [], []
    for item in items:
        names = {m.name for m in item.iter_markers()}
        if not names & set(NEEDS + TIERS):
            item.add_marker("fast")
        (left if "long" in names and not wants_long else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
    kept.sort(key=lambda item: ORDER.index(tier(m.name for m in item.iter_markers())))
    items[:] = kept
    kc_workers.collected(config, items)


def pytest_runtest_setup(item) -> None:
    """Before the test's fixtures start anything: what it may start."""
    _patch_spark_reuse()
    os.environ[ENV_NEEDS] = ",".join(sorted(granted(m.name for m in item.iter_markers())))


def _drain() -> list[dict]:
    global _log_offset
    log = os.environ.get(ENV_LOG)
    if not log:
        return []
    with open(log, encoding="utf-8") as f:
        f.seek(_log_offset)
        text = f.read()
        _log_offset = f.tell()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _message(found: list[dict]) -> str:
    needs = [n for n in NEEDS if any(v["need"] == n for v in found)]
    lines = [f"this test started {v['what']} without the `{v['need']}` marker"
             for v in {v["what"]: v for v in found}.values()][:5]
    return ("\n".join(lines) + "\nmark it: " +
            " ".join(f"@pytest.mark.{n}" for n in needs) + " (tests/needs/kc_needs.py)")


_tier_of: dict[str, str] = {}
_time_of: dict[str, float] = {}


def tier(markers: Iterable[str]) -> str:
    """The tier a test with ``markers`` is in, as the summary names it: ``long``, ``fast``, or
    the first of ``NEEDS`` it has (``slow`` when none)."""
    names = set(markers)
    if "long" in names:
        return "long"
    return next((n for n in NEEDS if n in names), "slow" if "slow" in names else "fast")


def pytest_runtest_logreport(report) -> None:
    _time_of[report.nodeid] = _time_of.get(report.nodeid, 0.0) + report.duration
    if report.nodeid not in _tier_of:  # collected by an xdist worker: its markers came along
        _tier_of[report.nodeid] = tier(report.keywords)


def pytest_itemcollected(item) -> None:
    _tier_of[item.nodeid] = tier(m.name for m in item.iter_markers())


def pytest_terminal_summary(terminalreporter) -> None:
    """Seconds spent in each tier's tests (setup, call and teardown), for ``.ci/run``."""
    totals: dict[str, list[float]] = {}
    for nodeid, seconds in _time_of.items():
        entry = totals.setdefault(_tier_of.get(nodeid, "fast"), [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
    if totals:
        terminalreporter.section("time by tier")
        for name in ("fast", "slow", *NEEDS, "long"):
            if name in totals:
                n, seconds = totals[name]
                terminalreporter.write_line(f"{name:8} {n:4} tests {seconds:8.1f} s")


def pytest_runtest_makereport(item, call):
    """Fail the phase in which the test started what it has no marker for."""
    found = _drain()
    if not found:
        return None
    from _pytest.reports import TestReport

    report = TestReport.from_item_and_call(item, call)
    message = _message(found)
    if report.failed:
        report.sections.append(("needs", message))
    else:
        report.outcome = "failed"
        report.longrepr = message
    return report
