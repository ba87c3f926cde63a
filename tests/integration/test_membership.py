"""The KRaft quorum's membership under faults on real brokers (``nemesis.membership``, KIP-853,
issue 52): a dynamic quorum formatted by the tool, voters removed (the quorum's own leader
too) and added back while brokers are killed or a voter is cut off; each change seen in the
monitor's samples of ``DescribeQuorum``, and the safe configuration's writes all read back."""

from __future__ import annotations

import pytest

from kafka_chaos.catalogue.anomalies import METADATA
from kafka_chaos.clusters import dist
from kafka_chaos.history import read_history
from tests.integration.conftest import (backend_param, kafka_chaos, leftovers, prepare,
                                        results_of, steps_done)
from tests.preconditions import require

pytestmark = pytest.mark.kafka

LOST = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "garbage-read")


def _run(tmp_path, scenario: str, version: str, *flags: str):
    proc = kafka_chaos("run", "--scenario", scenario, "--kafka-version", version, *flags,
                       "--time-limit", "60", "--seed", "7", "--out", str(tmp_path))
    run = tmp_path / "latest"
    res = results_of(run, proc)
    ops = read_history(run / "history.jsonl")
    done = [op for op in ops if op.process == "nemesis" and op.type.value != "invoke"]
    quorum = [op.value["controller"] for op in ops if op.process == "monitor"
              and op.type.value == "ok" and op.value.get("controller")]
    return proc, res, done, quorum


def _check_writes(proc, res) -> None:
    assert proc.returncode == 0 and res["verdict"] == "valid", proc.stdout
    for name in LOST:
        assert res["anomalies"][name]["count"] == 0, (name, res["anomalies"][name])
    for name in METADATA:  # each had samples to check (not "not applicable") and held
        a = res["anomalies"][name]
        assert a["count"] == 0 and not a.get("not_applicable") and not a.get("not_judged"), \
            (name, a)
    assert res["run"]["heal_left"] == [], res["run"]
    require(res["stats"]["acked_sends"] > 300, res["stats"])
    assert leftovers() == []


def _remove_quorum_leader(tmp_path, version: str) -> None:
    proc, res, done, quorum = _run(tmp_path, "remove-quorum-leader", version)
    scenario = res["run"]["scenario"]
    steps_done(scenario, 7)
    q, r = int(scenario["marks"]["Q"][1:]), int(scenario["marks"]["R"][1:])
    removed = next(op.value for op in done if op.f == "remove-voter")
    # the leader removed itself, committed it, and another voter took over in a new epoch
    assert removed["removed"] == q == removed["leader"][0] != removed["leader"][1], removed
    assert removed["voters"] == [[1, 2, 3], sorted({1, 2, 3} - {q})], removed
    assert removed["epoch"][1] > removed["epoch"][0], removed
    added = next(op.value for op in done if op.f == "add-voter")
    assert added["added"] == {str(q): removed["directory_id"]} and added["voters"] == [1, 2, 3]
    # the monitor saw the quorum without Q, then with Q again, and R's kill elect another
    without = [i for i, c in enumerate(quorum) if str(q) not in c["voters"]]
    assert without and any(str(q) in c["voters"] for c in quorum[without[-1]:]), quorum[-1]
    assert any(c["leader"] not in (r, -1) for c in quorum[without[-1]:]), quorum[-1]
    assert any(str(q) in c["observers"] for c in quorum[without[0]:without[-1] + 1]), \
        "the removed voter fetched on as an observer"
    epochs = [c["epoch"] for c in quorum]
    assert epochs == sorted(epochs), epochs
    _check_writes(proc, res)


def test_the_quorum_leader_removed_and_added_back_under_kills(tmp_path):
    """Kafka 4.4.0: the quorum's leader Q removes itself (KAFKA-17608's path), is killed and
    restarted as an observer, added back; the new leader R is killed: a third leader is
    elected, and nothing acknowledged (acks=all, min.insync.replicas=2) is lost."""
    _remove_quorum_leader(tmp_path, "4.4.0")


@pytest.mark.long
def test_the_quorum_leader_removed_and_added_back_under_kills_on_3_9(tmp_path):
    _remove_quorum_leader(tmp_path, "3.9.1")


@pytest.mark.long
@pytest.mark.parametrize("version", ["4.4.0", "3.9.1"])
def test_a_voter_removed_while_another_is_cut_off(tmp_path, version):
    """V cut off, then the leader Q removed: the new voter set's majority needs V, so the
    removal cannot commit while V is cut (the op ends ``info``, or ``ok`` once the cut
    heals); after the heal it commits, another voter leads, and Q is added back."""
    proc, res, done, quorum = _run(tmp_path, "remove-voter-while-cut", version)
    scenario = res["run"]["scenario"]
    steps_done(scenario, 5)
    q = int(scenario["marks"]["Q"][1:])
    heal = next(i for i, op in enumerate(done) if op.f == "heal")
    remove = next(op for op in done if op.f == "remove-voter")
    print(f"{version}: remove-voter while cut: {remove.type.value} {remove.value}")
    assert done.index(remove) < heal
    assert any(str(q) not in c["voters"] and c["leader"] != q for c in quorum), quorum
    assert next(op.value for op in done if op.f == "add-voter")["voters"] == [1, 2, 3]
    _check_writes(proc, res)


#: A voter replaced as Kafka's operations docs replace a controller whose disk died: stopped,
#: removed, its metadata log directory wiped and formatted anew, started, added back.
REPLACE = """
name: replace-a-voter
settings: {acks: all, min_insync_replicas: 2, idempotence: true}
steps:
  - name: replace V, the lowest voter that does not lead
    after: 5
    mark_voter: V
    do: replace-voter
    target: V
    until: {voting: {V: false}}
    timeout: 60
  - name: add V back once it has caught up as an observer
    after: 3
    do: add-voter
    until: {voting: {V: true}}
    timeout: 90
  - name: kill the quorum's leader Q; another leads
    mark_controller: Q
    do: kill
    target: Q
    until: {quorum_leader: not Q}
    timeout: 30
  - after: 3
    do: start
  - after: 5
"""


@pytest.mark.long
@pytest.mark.parametrize("backend", [backend_param("ssh"), backend_param("docker")])
def test_a_voter_replaced_on_the_ssh_hosts_and_in_containers(request, tmp_path, backend):
    """The ssh and docker backends format a dynamic quorum (Kafka 4.4.0) and replace a voter
    there: stopped, removed, its metadata directory wiped and formatted anew (over SSH; in a
    container of its own) under a new directory id, started, added back under that id; then
    the quorum's leader is killed and another elected. The metadata checks hold and nothing
    acknowledged is lost."""
    _, args = prepare(request, backend, dist.resolve("4.4.0"), [["broker", "controller"]] * 3,
                      tmp_path / "inventory.yaml")
    plan = tmp_path / "replace-a-voter.yaml"
    plan.write_text(REPLACE)
    proc, res, done, quorum = _run(tmp_path / "runs", str(plan), "4.4.0", *args)
    scenario = res["run"]["scenario"]
    steps_done(scenario, 5, proc.stdout)
    v = int(scenario["marks"]["V"][1:])
    replaced = next(op.value for op in done if op.f == "replace-voter")
    assert replaced["removed"] == v and replaced["new_directory_id"] not in (
        None, replaced["directory_id"]), replaced
    added = next(op.value for op in done if op.f == "add-voter")
    assert added["added"] == {str(v): replaced["new_directory_id"]}, added
    assert added["voters"] == [1, 2, 3], added
    _check_writes(proc, res)
