"""Known Kafka bugs reproduced on demand, each by a built-in scenario on real brokers of the
versions it names, its precondition proven by the run's own record and its outcome judged.
(``delayed-end-txn``, KAFKA-17754, is in ``test_proxy.py``: it needs the proxy.)"""

from __future__ import annotations

import json

import pytest

from kafka_chaos.clusters import dist
from kafka_chaos.history import read_history
from tests.integration.conftest import kafka_chaos, leftovers, prepare, results_of


@pytest.mark.parametrize("version, acks", [
    ("3.9.1", "1"), (dist.DEFAULT_KAFKA_VERSION, "1"), (dist.DEFAULT_KAFKA_VERSION, "all")])
def test_acks1_writes_are_lost_in_a_planned_leader_move(request, tmp_path, version, acks):
    """``--scenario acks1-leader-move`` (KAFKA-20554, documented as expected under acks=1 by
    apache/kafka PR 22233, no fix): replication from the leader cut short of
    replica.lag.time.max.ms, then an operator's preferred election moves the leadership to
    an in-sync follower; no broker fails. With acks=1, on 3.9.1 and on 4.4.0, writes the old
    leader acknowledged alone are lost, each permitted by ``acks-below-all`` and pinned on
    that clean election (its ISR held the old leader and the new one). With acks=all those
    writes are never acknowledged (the leader waits for its ISR): valid, nothing lost."""
    _, args = prepare(request, "local", dist.resolve(version), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--scenario", "acks1-leader-move", "--acks", acks,
                       "--kafka-version", version, "--seed", "5",
                       "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["scenario"]["steps_done"] == 4 and "unmet" not in facts["scenario"], facts
    old = facts["scenario"]["marks"]["L"]
    # the precondition, from the nemesis's own record: a planned move away from the cut leader
    ops = read_history(run_dir / "history.jsonl")
    [move] = [op for op in ops if op.f == "move-leader" and op.type.value == "ok"]
    names = {int(k[1:]): k for k in ("n1", "n2", "n3")}
    assert names[move.value["leader"][0]] == old and move.value["leader"][1] != \
        move.value["leader"][0], move.value
    assert facts["heal_left"] == [] and not any(
        op.f in ("kill", "stop") for op in ops if op.process == "nemesis"), "a broker failed"
    lost = results["anomalies"]["lost-write"]
    print(f"{version} acks={acks}: {lost['count']} lost writes, "
          f"{results['stats']['acked_sends']} acknowledged, valid {results['valid']}")
    if acks == "all":
        assert lost["count"] == 0 and results["valid"] is True, proc.stdout[-3000:]
        assert results["chances"].get("acks-below-all") is None
    else:
        assert lost["count"] > 0 and lost["outcomes"]["permitted"] == lost["count"], lost
        assert lost["rule"] == "acks-below-all" and results["valid"] is True, lost
        for ex in lost["examples"]:
            e = ex["evidence"]
            assert (e["event"], e["partition"], e["from"], e["unclean"]) == (
                "leader-change", "kafka-chaos-0", old, False), e
            assert old in e["isr"] and e["to"] in e["isr"], e
            assert e["indexes"][1] > ex["index"], ex  # the election came after the ack
        assert proc.returncode == 0
    assert leftovers() == []
