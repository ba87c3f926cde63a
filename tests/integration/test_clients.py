"""The Java client beside librdkafka, on real clusters (``--client java``,
``workloads/java_client.py``): the same ops and history format, so every checker judges both.

A comparison whose two cells differ only in the client: one seed of read-process-write
transactions with aborts in a classic consumer group under kills and pauses. The quick
start on the Java client. Then a run per client of plain sends in a KIP-848 consumer group
with manual commits under kills, processes crashed without closing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kafka_chaos.compare import core as compare
from kafka_chaos.history import read_history
from tests.integration.conftest import faults_observed, kafka_chaos, leftovers, results_of
from tests.preconditions import require

pytestmark = pytest.mark.kafka


def _ops(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
            if '"index"' in line]


def _acked_with_time(ops: list[dict]) -> int:
    """Sends whose result carries the time of their delivery report (``ack_ns``)."""
    return sum(1 for op in ops if op["type"] in ("ok", "info") and op["f"] in ("send", "txn")
               for m in op["value"] or [] if m[0] == "send" and len(m[2]) == 3)


@pytest.mark.long  # in the full suite: test_runs.py's transactions under kills (librdkafka)
def test_one_seed_on_both_clients_transactions_under_kills_and_pauses(tmp_path):
    """One seed on both clients, transactions under kills and pauses. Longer tier: after a
    kill of the broker of the transaction coordinator, librdkafka's transactions stalled for
    7-13 s, so the 20 s run of the full suite held 14-26 commits of it (2026-11-29) and the
    Java client's 9 on a loaded day (2026-11-28); 40 s here."""
    proc = kafka_chaos("compare", "--matrix", "client=librdkafka,java", "--txn",
                       "--abort-p", "0.1", "--sub-via", "subscribe",
                       "--nemesis", "kill,pause", "--nemesis-interval", "4",
                       "--time-limit", "40", "--seed", "36", "--out", str(tmp_path),
                       timeout_s=900)
    [directory] = [p.parent for p in tmp_path.glob("compare-*/compare.json")]
    done = compare.load(directory)
    assert not done.pending(), proc.stdout[-3000:]
    rows = {r["cell"]: r for r in csv.DictReader((directory / "compare.csv").open())}
    assert set(rows) == {"client=librdkafka", "client=java"}, rows
    for cell in done.cells:
        run_dir = done.run_dir(cell, 36)
        res = results_of(run_dir)
        config = json.loads((run_dir / "config.json").read_text())
        ops = _ops(run_dir)
        # both processes ran the same kinds of ops on one seed: transactions, some aborted
        # on purpose, around kills and pauses that really happened
        txns = [op for op in ops if op["f"] == "txn" and op["type"] != "invoke"]
        assert sum(op["type"] == "ok" for op in txns) >= 30, cell["label"]
        # and went on after the first fault ended: not a run that stalled at it
        healed = min((op["time"] for op in ops if op["process"] == "nemesis"
                      and op["f"] in ("start", "resume")), default=0)
        assert any(op["type"] == "ok" and op["time"] > healed for op in txns), cell["label"]
        assert any(op["error"] == "ABORTED" for op in txns), cell["label"]
        nemesis = {op["f"] for op in ops if op["process"] == "nemesis" and op["type"] == "ok"}
        assert {"kill", "pause"} <= nemesis, (cell["label"], nemesis)
        assert _acked_with_time(ops) >= 50, cell["label"]
        assert res["client"]["name"] == config["client"]
        assert res["stats"]["acked_sends"] > 0 and rows[cell["label"]]["verdicts"]
        if config["client"] == "java":
            # kafka-clients of the cluster's version; its producer is idempotent by default
            assert res["client"]["version"] == config["kafka_version"] == "4.4.0"
            assert res["client"]["default_idempotence"] is True and config["idempotence"]
            faults_observed(run_dir, proc, {"kill", "pause"})
            # read_committed readers saw no aborted write and no committed write was lost
            assert res["anomalies"]["G1a"]["count"] == 0
            assert res["anomalies"]["lost-write"]["count"] == 0
            assert res["valid"] is True, proc.stdout[-3000:]
        else:
            assert res["client"]["version"].startswith("2.")
    assert leftovers() == []


@pytest.mark.long  # the Java client under faults in the full suite: the other tests here
def test_the_quick_start_on_the_java_client(tmp_path):
    """The README's quick-start run (kill and partition faults, the test's short form) with
    ``--client java``: valid; both faults ran, healed and were seen by the monitor (a broker
    that stopped answering, an ISR that shrank); the Java producer idempotent by default
    (KIP-679), so no duplicate."""
    proc = kafka_chaos("run", "--client", "java", "--nemesis", "kill,partition",
                       "--nemesis-interval", "5", "--time-limit", "30", "--seed", "3",
                       "--out", str(tmp_path))
    run_dir = (tmp_path / "latest").resolve()
    facts = faults_observed(run_dir, proc, {"kill", "partition"})
    res = results_of(run_dir, proc)
    assert res["client"]["name"] == "java" and res["client"]["default_idempotence"] is True
    assert res["anomalies"]["duplicate"]["count"] == 0
    assert res["anomalies"]["lost-write"]["count"] == 0
    assert facts["ops"]["ok"] > 500 and facts["client"]["idempotence"] is True, facts["ops"]
    assert leftovers() == []


# the full suite's: the Java client's (the longer tier runs librdkafka's, docs/nightly.md)
@pytest.mark.parametrize("client", ["java", pytest.param("librdkafka", marks=pytest.mark.long)])
def test_kip_848_groups_under_kills(tmp_path, client):
    """KIP-848 on each client, processes crashed every 5 s and brokers killed every 5 s; a
    crashed librdkafka process is an OS process killed (``workloads/child.py``).

    A crashed member keeps its partitions until its session times out on the coordinator
    (``group.consumer.session.timeout.ms``, 45 s by default), and a commit fails while the
    killed broker was the group's coordinator: crashes every 3 s over 30 s left no committed
    offset in a CI run of 2026-12-01."""
    proc = kafka_chaos("run", "--client", client, "--sub-via", "subscribe", "--group-protocol",
                       "consumer", "--crash-clients", "--crash-client-interval", "5",
                       "--nemesis", "kill", "--nemesis-interval", "5",
                       "--time-limit", "45", "--seed", "848", "--out", str(tmp_path))
    run_dir = (tmp_path / "latest").resolve()
    facts = faults_observed(run_dir, proc, {"kill"})
    # the coordinator describes the group as a KIP-848 one: the run tested that protocol
    assert facts["group"] == {"asked": "consumer", "type": "consumer"}, facts
    # ended on time: a crashed process's clients never hold up the workload's end
    assert facts["workload_s"] < 65, facts["workload_s"]
    ops = [op for op in read_history(run_dir / "history.jsonl")
           if op.type.value != "invoke" and isinstance(op.process, int)]
    crashed = [op for op in ops if op.f == "crash"]
    assert len(crashed) >= 3 and all(op.type.value == "info" for op in crashed)
    # members were assigned partitions by the coordinator and committed offsets
    events = {m[0] for op in ops if op.f == "poll" for m in op.value or []}
    assert "assigned" in events, sorted(events)
    # (crashes every 3 s over 30 s: 15 and 5 in two runs on 2026-11-29, then 1 and 0 in full
    # runs of 2026-12-01 on slow machines; with both cores kept busy beside it, every 5 s
    # over 30 s: 15, the first at 22 s; over 45 s: 30, the first at 9.4 s. The commit path is
    # what is checked)
    commits = sum(op.f == "commit" and op.type.value == "ok" for op in ops)
    require(commits >= 1, {"commits ok": commits})
    assert sum(op.f == "send" and op.type.value == "ok" for op in ops) >= 100
    res = results_of(run_dir, proc)
    assert res["client"]["name"] == client
    # group delivery checked: nothing skipped or rewound, and no partition owned by two
    # members at once unless the earlier one had been fenced
    for name in ("group-skip", "group-rewind", "lost-write"):
        assert res["anomalies"][name]["count"] == 0, name
    assert res["anomalies"]["group-overlap"]["outcomes"]["violation"] == 0
    if client == "java":
        log = run_dir / "java-client.log"
        assert log.stat().st_size < 20 * 2**20  # bounded, whatever the clients logged
    else:  # processes in OS processes of their own (each crash killed one; leftovers: none)
        assert (run_dir / "client-children.log").exists()
    assert leftovers() == []


@pytest.mark.long  # the full suite bisects the Java client (test_bisect.py)
def test_a_run_on_another_confluent_kafka_release_runs_it_in_every_process(tmp_path):
    """``--client-version 2.10.0`` with librdkafka: the release is installed from PyPI into
    a virtualenv of its own (``workloads/pyclients.py``), every process runs in a child of
    that interpreter, the record names it, and a group under kills is judged as any run."""
    proc = kafka_chaos("run", "--client-version", "2.10.0", "--sub-via", "subscribe",
                       "--nemesis", "kill", "--time-limit", "30", "--out", str(tmp_path))
    run = tmp_path / "latest"
    results = results_of(run, proc)
    assert results["client"] == {"name": "librdkafka", "version": "2.10.0",
                                 "confluent_kafka": "2.10.0"}, results["client"]
    by_f = results["stats"]["by_f"]
    assert by_f["send"]["ok"] > 300 and by_f["poll"]["ok"] > 50 and by_f["commit"]["ok"], by_f
    assert proc.returncode == 0 and results["verdict"] == "valid", results["violations"]
    assert leftovers() == []
