"""The librdkafka client driver (``workloads.drivers``): confluent-kafka's clients, in this OS
process or, where a crash must end an OS process, in a child of its own."""

from __future__ import annotations

import random
import time
from typing import Any

import confluent_kafka

from kafka_chaos.workloads import pyclients
from kafka_chaos.workloads.child import ChildClient
from kafka_chaos.workloads.client import Client
from kafka_chaos.workloads.base import Driver


class LibrdkafkaDriver(Driver):
    """The client driver of librdkafka (confluent-kafka, ``workloads.drivers``): each process's
    clients in this OS process (``Client``), or in a child OS process of its own
    (``workloads/child.py``) in a run that crashes KIP-848 consumers (librdkafka's KIP-848
    consumer, destroyed without a close, can hang its process's exit, so a crash there ends
    the OS process instead) and in a run of another confluent-kafka release than the
    installed one (``settings.client_version``: the child is that release's interpreter,
    ``workloads/pyclients.py``). Its logs: ``client-children.log`` of the children's
    stderr."""

    python: str | None = None
    versions: dict[str, str] | None = None

    @classmethod
    def prepare(cls, version: str | None) -> None:
        """The virtualenv of confluent-kafka ``version`` (``pyclients.python``); raises
        ``ChildClientError`` when PyPI has no such release for this Python."""
        if version:
            pyclients.python(version)

    def start(self) -> None:
        """Make the virtualenv of ``settings.client_version`` when one is asked for. Raises
        ``ChildClientError`` when PyPI has no such release for this Python."""
        if self.s.client_version:
            python, self.versions = pyclients.python(self.s.client_version)
            self.python = str(python)

    def open(self, process: int, slot: int, rng: random.Random) -> Client | ChildClient:
        if self.python or (self.s.group_protocol == "consumer" and self.s.crash_interval_s > 0):
            # the child's clock: this monotonic clock plus the offset to the history's; read
            # before the history's clock, so that an ack_ns errs late (an upper bound)
            offset_ns = -time.monotonic_ns() + self.clock()
            return ChildClient(process, slot, self.bootstrap, self.s, self.keys,
                               rng.randrange(2**32), offset_ns,
                               self.logs / "client-children.log", python=self.python)
        return Client(process, slot, self.bootstrap, self.s, self.keys, rng, clock=self.clock)

    def info(self) -> dict[str, Any]:
        """``{"name": "librdkafka", "version"}`` of the librdkafka the processes ran, with
        ``"confluent_kafka"`` (the release) when it is not the installed one."""
        ran = ({"version": self.versions["librdkafka"],
                "confluent_kafka": self.versions["confluent_kafka"]} if self.versions
               else {"version": confluent_kafka.libversion()[0]})
        return {"name": "librdkafka", **ran, **({"failed": self.failed} if self.failed else {})}
