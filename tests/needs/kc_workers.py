"""The suite on two pytest-xdist workers: ``pytest -n 2 --dist loadgroup tests``.

Tests marked ``root``, ``docker`` or ``kafka`` change this machine (namespaces, iptables,
containers, brokers). They are one group, run one after the other by one worker: never two
Kafka clusters at once, and a test's check that it left nothing behind (``leftovers()``) sees
only its own. The other worker runs the rest, module by module, and the ``root`` tests whose
mount namespace or bind mount is their own (group ``beside``). The group is most of the
suite's time and is mostly waiting (time limits, timeouts): 4 scenario runs took 243 s beside
62 Spark tests and 230 s alone, and the Spark tests were no slower (2 cores, 2026-11-29).

xdist's own ``loadgroup`` finds a group in a suffix it appends to ``item._nodeid``; pytest 9
builds node ids from ``item._id``, so the suffix never shows and the tests of a group are
spread. Here the scheduler is xdist's ``LoadScopeScheduling`` with one scope for the group:
each worker writes the group's node ids to a file at collection (workers collect, the
controller only gets node ids), and the scheduler reads it when it splits the collection.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Markers of the tests that run on one worker, one after the other.
SYSTEM = ("root", "docker", "kafka")
#: Environment: where the workers write the group's node ids (set by the controller).
ENV_SYSTEM = "KAFKA_CHAOS_TEST_SYSTEM_IDS"
#: The group's scope name in the scheduler.
SCOPE = "system"
#: The group of a test that needs root for something only it sees (a mount namespace of its
#: own): it runs beside the ``SYSTEM`` tests (``@pytest.mark.xdist_group("beside")``).
BESIDE = "beside"


def is_system(item) -> bool:
    """The test changes the machine: it has one of the ``SYSTEM`` markers and is not in the
    ``BESIDE`` group, or it says so with ``@pytest.mark.xdist_group("system")``."""
    group = item.get_closest_marker("xdist_group")
    groups = group.args if group is not None else ()
    return SCOPE in groups or (BESIDE not in groups
                               and any(item.get_closest_marker(name) for name in SYSTEM))


def configure(config) -> None:
    """On the controller of an ``-n`` run: name the file the workers write. On a worker: no
    ``COLUMNS``/``LINES`` (a worker starts with 80 and 24 in its environment; Rich reads them
    once, when the CLI's console is made, and a table or a long path of a test that asks
    for a wider terminal was then cut at 80 columns)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
        return
    if not getattr(config.option, "numprocesses", None):
        return
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"kc-system-ids-{os.getpid()}"
    os.environ[ENV_SYSTEM] = str(path)


def unconfigure() -> None:
    path = os.environ.get(ENV_SYSTEM)
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop(ENV_SYSTEM, None)
        for written in Path(path).parent.glob(Path(path).name + ".*"):
            written.unlink(missing_ok=True)


def collected(config, items: list) -> None:
    """On a worker, once the items are in their final order: put the group first (the other
    worker's modules then go beside it, not after it) and write its node ids."""
    worker, path = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(ENV_SYSTEM)
    if not (worker and path and getattr(config.option, "loadgroup", False)):
        return
    items.sort(key=lambda item: not is_system(item))  # stable: the tiers' order stays
    tmp = Path(f"{path}.{worker}.tmp")
    tmp.write_text("".join(item.nodeid + "\n" for item in items if is_system(item)))
    tmp.replace(f"{path}.{worker}")


def make_scheduler(config, log):
    """``pytest_xdist_make_scheduler``: for ``--dist loadgroup``, xdist's scope scheduler
    with the ``SYSTEM`` tests as one scope; None (xdist's own) otherwise."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneSystemWorker(LoadScopeScheduling):
        _system: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._system is None:
                path = Path(os.environ[ENV_SYSTEM])
                # every worker collected the same tests (xdist checks it): any file will do
                files = sorted(path.parent.glob(path.name + ".gw*"))
                self._system = frozenset(files[0].read_text().splitlines()) if files \
                    else frozenset()
            return SCOPE if nodeid in self._system else super()._split_scope(nodeid)

    return OneSystemWorker(config, log)
