"""A librdkafka process in an OS process of its own, so that a crash is a real one (SIGKILL).

Used for KIP-848 consumer groups with ``--crash-clients`` on librdkafka: confluent-kafka 2.16's
KIP-848 consumer, destroyed without close in the workload's own process after broker kills,
hung runs here (confluentinc/librdkafka#4674, docs/clients.md). Killing the process that holds
the client needs no destroy: the kernel closes its sockets, no LeaveGroup is sent, and the
coordinator fences the member when its session ends (KIP-848), which is what a crashed
application does.

``ChildClient`` has the face of ``Client`` (``invoke``, ``dead``, ``uncommitted``, ``drop``,
``end``); the child (``python -m kafka_chaos.workloads.child``) runs a ``Client`` and answers
one op at a time over its stdin and stdout (``multiprocessing.connection`` framing).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kafka_chaos.errors import ChildClientError
from kafka_chaos.workloads.client import Client, Completion, _partial
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings

#: Seconds a child may take to start and create its clients.
START_S = 60.0


class ChildClient:
    """Process ``process`` on worker ``slot``, its clients in a child OS process.

    Args:
        process, slot, bootstrap, settings, keys: as for ``Client``.
        seed: the seed of the child's ``random.Random`` (which transactions it aborts).
        offset_ns: history time minus ``time.monotonic_ns()``: the child's clock for each
            delivery report's ``ack_ns`` (CLOCK_MONOTONIC is one clock for every process on
            Linux).
        log: the file the child's stderr is appended to.
        python: the child's interpreter (default this one's): another confluent-kafka
            release's (``workloads/pyclients.py``).

    Raises ``ChildClientError`` when the child ends or stays silent for ``START_S`` before
    its clients exist (a configuration librdkafka refuses names its error there).
    """

    def __init__(self, process: int, slot: int, bootstrap: str, settings: WorkloadSettings,
                 keys: KeySpace, seed: int, offset_ns: int, log: Path,
                 python: str | None = None) -> None:
        self.process, self.slot = process, slot
        self.dead = False
        self.uncommitted: dict[str, int] = {}
        # an op waits at most as long as the slowest op of the in-process client can take
        self._op_s = (settings.delivery_timeout_ms + settings.txn_timeout_ms) / 1000 + 30
        with open(log, "ab") as err:
            self._proc = subprocess.Popen(
                [python or sys.executable, "-m", "kafka_chaos.workloads.child"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._to = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._from = Connection(os.dup(self._proc.stdout.fileno()), writable=False)
        self._proc.stdin.close()
        self._proc.stdout.close()
        try:
            self._to.send((process, slot, bootstrap, settings, keys, seed, offset_ns))
            if not self._from.poll(START_S):
                raise ChildClientError(f"process {process}: its child did not start its "
                                       f"clients in {START_S:.0f} s (log: {log})")
            answer = self._from.recv()
        except (EOFError, OSError) as exc:
            self.drop()
            raise ChildClientError(f"process {process}: its child ended before its clients "
                                   f"were made (log: {log})") from exc
        except ChildClientError:
            self.drop()
            raise
        if answer != "ready":
            self.drop()
            raise ChildClientError(f"process {process}: {answer}")

    def invoke(self, f: str, value: Any) -> Completion:
        """Run op ``f`` in the child; ``crash`` kills it (SIGKILL). A child that ends or
        does not answer within the op's longest timeout is killed, and the op is ``info``."""
        if f == "crash":
            self.drop()
            return "info", None, "CRASHED"
        try:
            self._to.send((f, value))
            if self._from.poll(self._op_s):
                typ, done, error, self.dead, self.uncommitted = self._from.recv()
                return typ, done, error
            error = f"its child did not answer in {self._op_s:.0f} s"
        except (EOFError, OSError) as exc:
            error = f"its child ended: {type(exc).__name__}"
        self.drop()
        return "info", _partial(value, None), error

    def drop(self) -> None:
        """End the process as a crash does: SIGKILL, unsent records and all."""
        self.dead = True
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
        self._proc.wait()
        for conn in (self._to, self._from):
            conn.close()

    def end(self) -> None:
        """End the process at the end of the workload: a KIP-848 member that left no other
        way (``drop``; the group's session ends it, as for the in-process ``Client``)."""
        self.drop()


def main() -> None:
    """The child: read the hello, make the clients, answer ops until stdin closes, then exit
    without destroying them (nothing to wait for; the parent kills a crash anyway)."""
    # the parent decides when this process ends (a crash, the workload's end, stdin closed),
    # not a Ctrl-C sent to the whole process group
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox = Connection(0, writable=False)
    outbox = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # stray prints go to the log, never into the answers
    process, slot, bootstrap, settings, keys, seed, offset_ns = inbox.recv()
    try:
        client = Client(process, slot, bootstrap, settings, keys, random.Random(seed),
                        clock=lambda: time.monotonic_ns() + offset_ns)
    except Exception as exc:  # named in the parent's error
        outbox.send(f"{type(exc).__name__}: {exc}"[:500])
        os._exit(1)
    outbox.send("ready")
    while True:
        try:
            f, value = inbox.recv()
        except EOFError:
            break
        typ, done, error = client.invoke(f, value)
        outbox.send((typ, done, error, client.dead, client.uncommitted))
    os._exit(0)


if __name__ == "__main__":
    main()
