"""The one place a client driver is chosen (``--client``), as ``clusters/backends.py`` is for
cluster backends: the workload names a library here and gets the ``Driver`` interface back
(``workloads/base.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafka_chaos.workloads.base import Driver
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings


def _librdkafka() -> type[Driver]:
    from kafka_chaos.workloads.librdkafka import LibrdkafkaDriver
    return LibrdkafkaDriver


def _java() -> type[Driver]:
    from kafka_chaos.workloads.java_client import JavaDriver
    return JavaDriver


#: name -> its driver class, imported when chosen: a run loads its own library's modules
#: only. Holds ``catalogue.clients.NAMES`` (``tests/unit/test_catalogues.py``).
_DRIVERS: dict[str, Callable[[], type[Driver]]] = {"librdkafka": _librdkafka, "java": _java}


def driver_class(client: str) -> type[Driver]:
    """The driver of the client library ``client`` (``--client``). Raises ``ValueError``
    naming the known ones."""
    if client not in _DRIVERS:
        raise ValueError(f"unknown client {client!r}: choose one of {', '.join(_DRIVERS)}")
    return _DRIVERS[client]()


def driver(bootstrap: str, settings: WorkloadSettings, keys: KeySpace,
           clock: Callable[[], int], logs: Path) -> Driver:
    """The driver of ``settings.client``, not yet started. Raises ``ValueError`` as
    ``driver_class`` does."""
    return driver_class(settings.client)(bootstrap, settings, keys, clock, logs)
