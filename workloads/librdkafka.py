"""The librdkafka client driver (``workloads.drivers``): confluent-kafka's clients, in this OS
process or, where a crash must end an OS process, in a child of its own."""

from __future__ import annotations

import random
import time
from typing import Any

import confluent_kafka

from kafka_chaos.workloads.child import ChildClient
from kafka_chaos.workloads.client import Client
from kafka_chaos.workloads.base import Driver


class LibrdkafkaDriver(Driver):
    """The client driver of librdkafka (confluent-kafka, ``workloads.drivers``): each process's
    clients in this OS process (``Client``), or, in a run that crashes KIP-848 consumers, in
    a child OS process of its own (``workloads/child.py``): librdkafka's KIP-848 consumer,
    destroyed without a close, can hang its process's exit, so a crash there ends the OS
    process instead. Its logs: ``client-children.log`` of the children's stderr."""

    def open(self, process: int, slot: int, rng: random.Random) -> Client | ChildClient:
        if self.s.group_protocol == "consumer" and self.s.crash_interval_s > 0:
            # the child's clock: this monotonic clock plus the offset to the history's; read
            # before the history's clock, so that an ack_ns errs late (an upper bound)
            offset_ns = -time.monotonic_ns() + self.clock()
            return ChildClient(process, slot, self.bootstrap, self.s, self.keys,
                               rng.randrange(2**32), offset_ns,
                               self.logs / "client-children.log")
        return Client(process, slot, self.bootstrap, self.s, self.keys, rng, clock=self.clock)

    def info(self) -> dict[str, Any]:
        return {"name": "librdkafka", "version": confluent_kafka.libversion()[0],
                **({"failed": self.failed} if self.failed else {})}
