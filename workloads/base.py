"""The client-driver protocol: what the workload needs of a client library (as
``clusters/base.py`` says what a cluster backend must do; ``workloads/drivers.py`` chooses one).

A ``Driver`` runs the clients of a run's processes on one library: it starts (a JVM, a
check), opens one ``ProcessClient`` per Jepsen process, says what it resolved (``info``:
name, version, and what the producer made of the settings it left to the library), and
closes. A ``ProcessClient`` is one process's producer and consumers, running one op at a
time: ``invoke`` never raises (Jepsen: an exception in ``invoke!`` makes the op
indeterminate), ``dead`` retires the process, ``uncommitted`` feeds the generator's commits,
``drop`` crashes it, ``end`` ends it at the end of the workload.

Adding a client library means a module with its ``Driver`` and ``ProcessClient``, one entry
in ``drivers._DRIVERS``, and its record in ``catalogue/clients.py``; the queue workload names
none.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings

#: A completion: ``(type, value, error)``, ``type`` one of ``ok``, ``fail``, ``info``.
Completion = tuple[str, Any, "str | None"]


class ProcessClient(Protocol):
    """The clients of one Jepsen process (``workloads.client.Client`` is the reference)."""

    #: True once the process must be retired (after an ``info`` op, a fatal producer error,
    #: a crash): a new process takes its worker.
    dead: bool
    #: key -> next offset polled and not yet committed (the generator's commits).
    uncommitted: dict[str, int]

    def invoke(self, f: str, value: Any) -> Completion:
        """Run op ``f`` (``docs/history-format.md``) with invoke ``value``; never raises."""

    def drop(self) -> None:
        """Crash the process: its clients are dropped without a clean close."""

    def end(self) -> None:
        """End the process at the end of the workload (share consumers close)."""


class Driver(abc.ABC):
    """The clients of a run on one library.

    Args (every driver's constructor):
        bootstrap: the brokers' (or the proxy's) ``host:port,...``.
        settings: the workload's settings (``client_version`` for a versioned library).
        keys: the key -> partition map.
        clock: ns on the history's clock (``HistoryWriter.now_ns``), for each delivery
            report's ``ack_ns``.
        logs: the folder the clients' own logs go to (the run directory).
    """

    #: Why the driver failed while the workload ran (its JVM ended, a process's clients
    #: could not be made): the run's verdict cannot be valid then (``judge_run``).
    failed: str | None = None

    def __init__(self, bootstrap: str, settings: WorkloadSettings, keys: KeySpace,
                 clock: Callable[[], int], logs: Path) -> None:
        self.bootstrap, self.s, self.keys, self.clock, self.logs = (
            bootstrap, settings, keys, clock, logs)

    @classmethod
    def connection(cls, security: ClientSecurity) -> dict[str, Any]:
        """``WorkloadSettings`` fields that carry ``security`` (an attached cluster's client
        properties: TLS, SASL) to this library's clients: ``connection``, librdkafka's, which
        the tool's own librdkafka clients (final reads, fencing) use whatever the run's
        library."""
        return {"connection": security.librdkafka()}

    @classmethod
    def prepare(cls, version: str | None) -> None:
        """Fetch or build what a run of the library's release ``version`` (``--client-version``;
        None: the default) needs, before any cluster starts (nothing by default). Raises
        ``ClientError`` naming the version when it cannot be had."""

    def start(self) -> None:
        """Make the library ready before the first process opens (nothing by default).
        Raises ``ClientError`` when it cannot be."""

    @abc.abstractmethod
    def open(self, process: int, slot: int, rng: random.Random) -> ProcessClient:
        """The clients of ``process`` on worker ``slot``; ``rng`` decides which of its
        transactions are aborted on purpose. Raises ``ClientError`` when they cannot be
        made (the worker then stops, and the driver's ``failed`` says why)."""

    def close(self) -> None:
        """End what ``start`` began, after every process ended (nothing by default)."""

    @abc.abstractmethod
    def info(self) -> dict[str, Any]:
        """``{"name", "version", ...}`` of the library as it runs (``run.json``'s
        ``client``), with ``failed`` when it failed."""
