"""The Kafka protocol proxy (``nemesis/proxy``) on a real cluster: the workload's clients
reach the brokers only through it, and a fault-free run through it is valid."""

from __future__ import annotations

import json

import pytest

from kafka_chaos.clusters import dist
from kafka_chaos.history import read_history
from kafka_chaos.nemesis.proxy import codec
from tests.integration.conftest import kafka_chaos, leftovers, prepare, results_of


@pytest.mark.parametrize("backend", ["local"])
def test_a_fault_free_run_through_the_proxy_is_valid_with_every_client_behind_it(
        request, tmp_path, backend):
    """The quick start's run with ``--proxy`` and no faults (the embedded backend; the docker
    one is for the next increment, CI time): valid; each broker was reached through its own
    listener; the Metadata and FindCoordinator replies were rewritten and none that named a
    broker was left undecoded; every process that sent did so as a client the proxy saw
    (``client.id`` ``kc-p<process>``); nothing is left on the host."""
    _, args = prepare(request, backend, dist.resolve(), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--proxy", "--nemesis", "none", "--sub-via", "subscribe",
                       "--time-limit", "15", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
    counts = json.loads((run_dir / "run.json").read_text())["proxy"]
    assert set(counts["listeners"]) == set(counts["connections"]) == {"1", "2", "3"}, counts
    assert all(v.startswith("127.0.0.1:") for v in counts["listeners"].values())
    assert counts["rewritten"]["3"] > 0 and counts["rewritten"]["10"] > 0, counts
    assert counts["unparsed"] == {} and counts["upstream_failures"] == 0, counts
    assert counts["errors"] == {}, counts
    assert set(counts["capped"]) <= {str(k) for k in codec.REWRITTEN}, counts
    assert counts["requests"]["0"] > 0 and counts["requests"]["1"] > 0, counts  # Produce, Fetch
    senders = {op.process for op in read_history(run_dir / "history.jsonl")
               if isinstance(op.process, int) and op.f == "send" and op.type.value == "ok"}
    assert senders and {f"kc-p{p}" for p in senders} <= set(counts["client_ids"]), counts
    assert leftovers() == []
