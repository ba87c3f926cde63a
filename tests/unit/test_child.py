"""The child-process client (``workloads/child.py``): its answers come back as the in-process
client's would, a crash is a SIGKILL of its process, a child that died makes its op ``info``
with every send unknown, and a configuration librdkafka refuses is named. No broker: nothing
here needs one to answer."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from kafka_chaos.waiting import wait_until
from kafka_chaos.workloads.child import ChildClient, ChildClientError
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings
from tests import procs

KEYS = KeySpace("t", keys=4)


def _child(tmp_path, settings=None) -> ChildClient:
    return ChildClient(7, 1, "127.0.0.1:1", settings or WorkloadSettings(), KEYS, 5, 0,
                       tmp_path / "children.log")


def test_ops_are_answered_by_the_child_and_a_crash_kills_it(tmp_path) -> None:
    client = _child(tmp_path)
    [pid] = procs.children("kafka_chaos.workloads.child")
    # the in-process client's own answer to an op it does not know, and its verdict on it
    typ, value, error = client.invoke("nope", 3)
    assert (typ, value, client.dead) == ("info", 3, True)
    assert error.startswith("ValueError: unknown client op")
    client.dead = False
    assert client.invoke("crash", None) == ("info", None, "CRASHED")
    assert client.dead and procs.state(pid) is None  # killed and reaped
    client.drop()  # a second drop (the worker's, after the crash op) does nothing


def test_a_child_that_died_leaves_its_op_info_with_every_send_unknown(tmp_path) -> None:
    client = _child(tmp_path)
    [pid] = procs.children("kafka_chaos.workloads.child")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: procs.state(pid) in ("Z", None), 10.0, 0.01, "the child's end")
    typ, value, error = client.invoke("send", [["send", 0, 11], ["send", 3, 12]])
    assert (typ, value) == ("info", [["send", 0, [None, 11]], ["send", 3, [None, 12]]])
    assert "its child ended" in error and client.dead


def test_a_configuration_librdkafka_refuses_is_named(tmp_path) -> None:
    settings = WorkloadSettings(connection={"no.such.property": "1"})
    with pytest.raises(ChildClientError, match="no.such.property"):
        _child(tmp_path, settings)


def test_a_child_that_cannot_start_fails_the_workload_not_the_verdict(tmp_path) -> None:
    """A KIP-848 run with crashes runs its processes in children; one that cannot make its
    clients stops its worker and names why in ``client_info()["failed"]`` (the run is then
    unknown, ``judge_run``), instead of ending the worker thread with a traceback."""
    from kafka_chaos.history import HistoryWriter
    from kafka_chaos.workloads.queue import QueueWorkload

    settings = WorkloadSettings(sub_via="subscribe", group_protocol="consumer",
                                crash_interval_s=3.0, clients=2,
                                connection={"no.such.property": "1"})
    with HistoryWriter(tmp_path / "history.jsonl", header={"config": {}}) as history:
        workload = QueueWorkload("127.0.0.1:1", history, settings, KEYS)
        before = set(threading.enumerate())
        workload.start()
        workers = [t for t in threading.enumerate()  # those still running by now
                   if t not in before and t.name.startswith("client-")]
        wait_until(lambda: workload.client_info().get("failed"), 30.0, 0.05,
                   "the worker's failure")
        # each worker stopped itself: none of its threads is left running
        wait_until(lambda: not any(t.is_alive() for t in workers), 30.0, 0.05,
                   "the workers' end")
        workload.stop(timeout_s=1)
    assert "no.such.property" in workload.client_info()["failed"]
