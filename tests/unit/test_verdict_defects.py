"""The ways a verdict used to whitewash violations, each on a hand-made history: a wr-only G1c,
a rewind below the committed offset, two committed consumptions in exactly-once transactions,
a failed send resetting a consumer's order, a value nobody wrote, an aborted read of a
non-transactional write, and a duplicate judged by the run instead of by its writer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.queue_builder import Q


def outcomes(result: dict, name: str) -> dict[str, int]:
    return result["anomalies"][name]["outcomes"]


@pytest.mark.spark
def test_a_g1c_of_wr_edges_alone_is_a_violation_under_read_committed_transactions(run):
    x = Q(txn=True)
    x.txn(1, [("send", 0, 100), ("poll", {1: [(0, 200)]})])
    x.txn(2, [("send", 1, 200), ("poll", {0: [(0, 100)]})])
    result = run(x.read_all(30))
    g1c = result["anomalies"]["G1c"]
    assert g1c["count"] >= 1 and g1c["outcomes"]["violation"] >= 1, g1c
    assert g1c["examples"][0]["ww"] is False and g1c["examples"][0]["outcome"] == "violation"
    assert {s["type"] for s in g1c["examples"][0]["steps"]} == {"wr"}
    assert "G1c" in result["violations"] and result["valid"] is False


@pytest.mark.spark
def test_a_g1c_through_a_ww_step_stays_permitted(run):
    # op 1 writes 100 then op 2 writes 101 after it in key 0 (ww 1 -> 2); op 1 read op 2's
    # write to key 1 (wr 2 -> 1): writes are never isolated
    x = Q(txn=True)
    x.invoke(1, "txn", [["send", 0, 100], ["poll"]])
    x.txn(2, [("send", 0, 101), ("send", 1, 201)], offsets=[1, 0])
    x.complete(1, "ok", "txn", [["send", 0, [0, 100]], ["poll", {"1": [[0, 201]]}]])
    x.ack(0, 100, 0)
    result = run(x.read_all(30))
    g1c = result["anomalies"]["G1c"]
    assert g1c["count"] == 1 and g1c["permitted"] is True and g1c["rule"] == "ww-cycles", g1c
    assert g1c["examples"][0]["ww"] is True


def group_history(**config: Any) -> Q:
    x = Q(sub_via="subscribe", **config)
    x.send(0, [(0, 100), (0, 101), (0, 102)])
    x.subscribe(10, [0], "g").subscribe(11, [0], "g")
    return x


@pytest.mark.spark
def test_a_group_delivering_below_its_committed_offset_rewinds(run):
    x = group_history()
    x.poll(10, {0: [(0, 100), (1, 101), (2, 102)]}, events=[["assigned", [0]]])
    x.commit(10, {0: 2})  # 100 and 101 consumed and committed; 102 not yet
    x.poll(11, {0: [(0, 100), (1, 101), (2, 102)]}, events=[["assigned", [0]]])
    result = run(x.read_all(30))
    assert outcomes(result, "group-rewind") == {"permitted": 0, "violation": 2,
                                                "unexplained": 0}
    ex = result["anomalies"]["group-rewind"]["examples"][0]
    assert (ex["offset"], ex["committed"]) == (0, 2)
    # above the committed offset: at-least-once, permitted
    red = result["anomalies"]["group-redelivery"]
    assert red["count"] == 1 and red["permitted"] and red["examples"][0]["offset"] == 2
    assert result["valid"] is False and "group-rewind" in result["violations"]


@pytest.mark.spark
def test_two_committed_transactions_consuming_one_record_break_exactly_once(run):
    x = group_history(txn=True)
    x.txn(10, [("poll", {0: [(0, 100)]})], events=[["committed", {"0": 1}]])
    x.txn(11, [("poll", {0: [(0, 100)]})], events=[["committed", {"0": 1}]])
    # an aborted transaction's read is no consumption: its record may come again
    x.txn(10, [("poll", {0: [(1, 101)]})], type="fail", error="ABORTED")
    x.txn(11, [("poll", {0: [(1, 101)]})], events=[["committed", {"0": 2}]])
    result = run(x.read_all(30))
    eos = result["anomalies"]["eos-duplicate"]
    assert eos["count"] == 1 and eos["examples"][0]["offset"] == 0, eos
    assert eos["outcomes"]["violation"] == 1 and result["valid"] is False
    assert result["anomalies"]["group-redelivery"]["count"] == 1  # 101, read by the abort


@pytest.mark.spark
def test_a_failed_send_does_not_reset_a_consumers_poll_order(run):
    x = Q().assign(10, [0])
    x.send(0, [(0, 100), (0, 101), (0, 102)])
    x.poll(10, {0: [(0, 100)]})
    x.send(10, [(1, 300)], type="fail")  # NOT_ENOUGH_REPLICAS: nothing appended
    x.poll(10, {0: [(2, 102)]})
    result = run(x.read_all(30))
    skip = result["anomalies"]["poll-skip"]
    assert skip["count"] == 1 and skip["outcomes"]["violation"] == 1, skip
    assert skip["examples"][0]["offsets"] == [0, 2]


@pytest.mark.spark
def test_a_value_nobody_wrote_to_its_key_is_a_garbage_read(run):
    x = Q().send(0, [(0, 100)]).send(0, [(1, 500)])
    x.final(30, 0, [(0, 100), (1, 999)])
    x.final(30, 1, [(0, 500), (1, 100)])  # 100 was written to key 0 only
    result = run(x)
    garbage = result["anomalies"]["garbage-read"]
    assert garbage["count"] == 2 and garbage["outcomes"]["violation"] == 2, garbage
    assert {(e["key"], e["value"]) for e in garbage["examples"]} == {(0, 999), (1, 100)}
    assert garbage["side"] == "log" and result["valid"] is False
    # with every rule of loss in force, still a violation: no mechanism writes values
    x = Q(acks="1", idempotence=False, unclean_leader_election=True, min_insync_replicas=1)
    x.send(0, [(0, 100)]).final(30, 0, [(0, 100), (1, 999)])
    assert outcomes(run(x), "garbage-read")["violation"] == 1


@pytest.mark.spark
def test_read_uncommitted_explains_aborted_transactions_not_failed_sends(run):
    x = Q(isolation_level="read_uncommitted", txn=True)
    x.send(9, [(0, 210)], type="fail")  # a definite fail, read anyway: a wrong fail
    x.txn(1, [("send", 1, 300)], type="fail", error="ABORTED")
    x.final(30, 0, [(0, 210)]).final(30, 1, [(0, 300)])
    result = run(x)
    g1a = result["anomalies"]["G1a"]
    assert g1a["outcomes"] == {"permitted": 1, "violation": 1, "unexplained": 0}, g1a
    first = g1a["examples"][0]  # violations first
    assert (first["value"], first["outcome"]) == (210, "violation")
    assert (g1a["examples"][1]["value"], g1a["examples"][1]["rule"]) == \
        (300, "read-uncommitted-aborted")
    assert result["valid"] is False and result["violations"] == ["G1a"]


@pytest.mark.spark
def test_a_duplicate_is_permitted_by_its_own_writer_not_by_the_run(run):
    x = Q(idempotence=False, txn=True)
    x.send(0, [(0, 100)], offsets=[0])  # a plain producer's retry appended it twice
    x.txn(1, [("send", 1, 200)], offsets=[0])  # a transactional (idempotent) producer's
    x.final(30, 0, [(0, 100), (1, 100)]).final(30, 1, [(0, 200), (1, 200)])
    dup = run(x)["anomalies"]["duplicate"]
    assert dup["outcomes"] == {"permitted": 1, "violation": 1, "unexplained": 0}, dup
    assert dup["rules"] == {"retries-without-idempotence": 1}
    assert dup["examples"][0]["value"] == 200 and dup["examples"][1]["value"] == 100


@pytest.mark.parametrize("commit, outcome", [("none", "permitted"), ("before", "violation"),
                                             ("in flight", "unexplained")])
@pytest.mark.spark
def test_reset_to_latest_permits_a_skip_only_where_the_group_had_no_committed_offset(
        run, commit, outcome):
    """Issue 49, class 7: auto.offset.reset=latest permitted every group-skip of the run, even
    where the member that skipped was assigned the partition after its group had committed
    an offset of it (the reset applies only with no committed offset, or one out of range).
    Process 10 reads 100 and crashes; process 11 is assigned the key and reads on from 103,
    skipping 101 and 102: a reset to the log end, unless 10 had committed 1 before."""
    x = Q(sub_via="subscribe", auto_offset_reset="latest")
    x.send(0, [(0, 100), (0, 101), (0, 102)])
    x.subscribe(10, [0], "g").subscribe(11, [0], "g")
    x.poll(10, {0: [(0, 100)]}, events=[["assigned", [0]]])
    if commit == "before":
        x.commit(10, {0: 1})
    elif commit == "in flight":  # invoked before 11's assignment, completed after it began
        x.invoke(10, "commit", {"offsets": {"0": 1}})
    x.send(1, [(0, 103)])
    x.poll(11, {0: [(3, 103)]}, events=[["assigned", [0]]])
    if commit == "in flight":
        x.complete(10, "ok", "commit", {"offsets": {"0": 1}})
    x.commit(11, {0: 4})
    result = run(x.read_all(30))
    skip = result["anomalies"]["group-skip"]
    assert skip["count"] == 2 and skip["outcomes"][outcome] == 2, skip
    assert {e["value"] for e in skip["examples"]} == {101, 102}
    assert skip["examples"][0]["reset"] is {"none": True, "before": False,
                                             "in flight": None}[commit]
    if outcome == "permitted":
        assert skip["rules"] == {"reset-to-latest": 2} and result["valid"] is True
