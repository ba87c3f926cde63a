"""Share groups (KIP-932) on hand-built histories (``analysis/checkers/share.py``): each share
anomaly found exactly, what KIP-932 permits counted and permitted, a clean history valid."""

from __future__ import annotations

import pytest

from kafka_chaos.analysis.explain import explain
from kafka_chaos.catalogue.anomalies import SHARE
from tests.unit.test_evidence import P, T, q, sample

SH = {"sub_via": "share", "share_lock_ms": 5000, "share_delivery_limit": 3}


def base(**config) -> "q":
    """Values 10, 11 and 12 written to key 0 at offsets 0-2, with monitor samples."""
    x = sample(q(**{**SH, **config}))
    return x.send(0, [(0, 10), (0, 11), (0, 12)])


def end(x, *, drained: bool = True):
    """The drain's quiet op, the final reads of every key, a last sample."""
    x.share(40, [], drained=drained)
    x.read_all(41, keys=[0, 1, 2])
    return sample(x)


def counts(result: dict) -> dict[str, int]:
    return {n: result["anomalies"][n]["count"] for n in SHARE if result["anomalies"][n]["count"]}


@pytest.mark.spark
def test_a_clean_history_with_releases_and_an_archived_record_is_valid(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "release"), (0, 2, 12, 1, "reject")])
    x.share(2, [(0, 1, 11, 2, "release")]).share(1, [(0, 1, 11, 3, "release")])
    result = run(end(x))
    assert counts(result) == {"share-redelivery": 2}
    a = result["anomalies"]["share-redelivery"]
    assert a["permitted"] and a["rules"] == {"share-at-least-once": 2}
    assert result["valid"] is True and a["side"] == "consumer"
    assert explain("share-redelivery", a["examples"][0]).startswith(
        "key 0 offset 1 (value 11) delivered again (count 1 then 2) after a release")


@pytest.mark.spark
def test_a_record_never_settled_after_a_quiet_drain_is_lost(run):
    """Value 12 was never delivered: two unrecorded acquisitions (by process 1 and the drain's
    consumer, one each) could not have taken it to the limit of 3, so it is lost. Value 11,
    released at count 1, could have been: not judged."""
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "release")])
    result = run(end(x))
    assert counts(result) == {"share-lost": 1}
    a = result["anomalies"]["share-lost"]
    assert a["outcomes"]["violation"] == 1 and result["valid"] is False
    assert [(e["value"], e["deliveries"], e["consumers"]) for e in a["examples"]] == [(12, 0, 2)]
    assert any("delivery limit unseen" in r for r in result["unknown_reasons"])


@pytest.mark.spark
def test_consumers_that_crashed_count_among_those_that_may_have_taken_a_record(run):
    """Processes 2 and 3 crashed before value 10 was written, but a fetch they sent may be
    served later: with process 1 and the drain, four unrecorded acquisitions were possible,
    enough for the limit of 3: not judged."""
    x = sample(q(**SH))
    for p in (2, 3):
        x.share(p, []).crash(p)
    result = run(end(x.send(0, [(0, 10)]).share(1, [])))
    assert counts(result) == {} and result["valid"] == "unknown"
    assert any("delivery limit unseen" in r for r in result["unknown_reasons"])


@pytest.mark.spark
@pytest.mark.parametrize("count, verdict", [(3, True), (2, "unknown")])
def test_the_coordinators_log_tells_a_record_archived_at_its_limit(run, count, verdict):
    """Value 11, released at count 2, was never seen again, nor was value 12 ever delivered
    (processes 1-3 and the drain could have taken it unseen). The share coordinator's log
    (``share-state``) says offsets 1 and 2 were archived: at count 3, the limit, that clears
    them (their last acquisitions no op returned); at count 2 it does not."""
    x = base()
    for p in (2, 3):
        x.share(p, [])
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 2, "release")])
    x.share(40, [], drained=True).read_all(41, keys=[0, 1, 2])
    x.invoke("monitor", "share-state", {"group": "kc-share"})
    x.complete("monitor", "ok", "share-state",
               {"group": "kc-share", "archived": {"0": [[1, 2, count]], "1": [[0, 5, 3]]}})
    result = run(sample(x))
    assert counts(result) == {} and result["valid"] == verdict


@pytest.mark.spark
def test_the_coordinators_log_does_not_clear_what_unseen_acquisitions_cannot_explain(run):
    """Value 12 was never delivered, and only two consumers could have acquired it unseen:
    archived at count 3 by the coordinator's account, it is lost all the same."""
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept")])
    x.share(40, [], drained=True).read_all(41, keys=[0, 1, 2])
    x.invoke("monitor", "share-state", {"group": "kc-share"})
    x.complete("monitor", "ok", "share-state",
               {"group": "kc-share", "archived": {"0": [[2, 2, 3]]}})
    assert counts(run(sample(x))) == {"share-lost": 1}


@pytest.mark.spark
def test_without_a_quiet_drain_unsettled_records_are_not_judged(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept")])
    result = run(end(x, drained=False))
    assert counts(result) == {} and result["valid"] == "unknown"
    assert any("share group" in r and "not judged" in r for r in result["unknown_reasons"])


@pytest.mark.spark
def test_an_acknowledgement_of_unknown_outcome_may_have_settled_the_record(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "reject")],
            type="info")
    assert counts(run(end(x))) == {}


@pytest.mark.spark
def test_a_record_accepted_twice_and_delivered_after_its_accept(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "reject")])
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 2, 12, 2, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-accepted-twice": 1, "share-after-ack": 2}
    after = result["anomalies"]["share-after-ack"]
    assert after["outcomes"]["violation"] == 2
    assert {e["settled_by"] for e in after["examples"]} == {"accept", "reject"}
    ex = result["anomalies"]["share-accepted-twice"]["examples"][0]
    assert ex["processes"] == [1, 2] and ex["value"] == 10
    assert explain("share-accepted-twice", ex).startswith(
        "key 0 offset 0 (value 10) was accepted twice, by processes 1 and 2")


@pytest.mark.spark
def test_a_leader_change_does_not_explain_a_settled_record_delivered_again(run):
    """The leader answers an acknowledgement ok only once the share coordinator persisted
    it, and a new leader loads that state: a record accepted or rejected ok and delivered
    again across a leader change is still a violation."""
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "reject")])
    sample(x, {(T, 0): P(2, 2, [2, 3])})
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 2, 12, 2, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-accepted-twice": 1, "share-after-ack": 2}
    for name in ("share-accepted-twice", "share-after-ack"):
        a = result["anomalies"][name]
        assert a["outcomes"]["violation"] == a["count"] and not a["rules"], (name, a)
    assert result["valid"] is False


@pytest.mark.spark
def test_a_refused_accept_settles_nothing(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept")], acks={0: "INVALID_RECORD_STATE"})
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-redelivery": 1}
    assert result["anomalies"]["share-redelivery"]["examples"][0]["after"] == "ack-refused"


@pytest.mark.spark
@pytest.mark.parametrize("failover, outcome", [(False, "violation"), (True, "permitted")])
def test_a_delivery_count_that_goes_back(run, failover, outcome):
    x = base()
    x.share(1, [(0, 0, 10, 2, "release")])
    if failover:  # a sample after the first delivery: the change lies inside the window
        sample(sample(x), {(T, 0): P(2, 2, [2, 3])})
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    a = result["anomalies"]["share-count-regress"]
    assert a["count"] == 1 and a["outcomes"][outcome] == 1
    if failover:
        assert a["rules"] == {"share-failover-count": 1}
    assert explain("share-count-regress", a["examples"][0]).startswith(
        "key 0 offset 0 (value 10): delivery count 2 then 2")


@pytest.mark.spark
def test_a_delivery_count_above_the_limit(run):
    x = base()
    x.share(1, [(0, 0, 10, 4, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-over-limit": 1}
    assert result["anomalies"]["share-over-limit"]["examples"][0]["limit"] == 3


@pytest.mark.spark
@pytest.mark.parametrize("crash, outcome", [(False, "violation"), (True, "permitted")])
def test_a_record_delivered_to_another_process_while_its_lock_held(run, crash, outcome):
    x = base()
    x.share(1, [(0, 0, 10, 1, None)], hold=True)
    if crash:
        x.crash(1)
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    a = result["anomalies"]["share-lock-overlap"]
    assert a["count"] == 1 and a["outcomes"][outcome] == 1
    assert a["examples"][0]["ended_by"] == ("gone" if crash else "held")
    if crash:
        assert a["rules"] == {"share-member-gone": 1}
    assert result["anomalies"]["share-redelivery"]["examples"][0]["after"] == "no-ack"


@pytest.mark.spark
def test_a_delivery_after_the_lock_expired_is_a_redelivery_only(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, None)], hold=True).pause(6)
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-redelivery": 1} and result["valid"] is True


@pytest.mark.spark
def test_an_acknowledgement_lost_with_its_connection_may_have_settled_the_record(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")],
            acks={0: "_TRANSPORT"})
    assert counts(run(end(x))) == {}


@pytest.mark.spark
def test_a_value_written_twice_is_two_records_of_the_share_partition(run):
    x = sample(q(**SH)).send(0, [(0, 10), (0, 10)])
    x.share(1, [(0, 0, 10, 1, "accept")]).share(1, [(0, 1, 10, 1, "accept")])
    assert counts(run(end(x))) == {}


@pytest.mark.spark
def test_a_failed_acknowledgement_of_the_share_partition_permits_a_count_that_goes_back(run):
    x = base()
    x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept")],
            acks={0: "REQUEST_TIMED_OUT"})
    x.share(1, [(0, 2, 12, 1, None)], hold=True).crash(1)
    x.share(2, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    result = run(end(x))
    a = result["anomalies"]["share-count-regress"]
    assert a["count"] == 3 and a["permitted"]
    assert a["rules"] == {"share-state-write-failed": 3}
    assert all(e["state_write_failed"] for e in a["examples"])


@pytest.mark.spark
def test_a_consumer_older_than_the_lock_may_have_acquired_before_its_op(run):
    x = base()
    x.share(1, []).pause(6)
    x.share(1, [(0, 0, 10, 1, None)], hold=True)
    x.share(2, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    assert counts(run(end(x))) == {"share-redelivery": 1}


@pytest.mark.spark
def test_a_record_an_older_consumer_had_buffered_is_not_ordered_after_anothers_accept(run):
    """Seen on a real cluster: process 3's consumer acquired records, held them in its buffer
    past their lock, and returned them after process 5 had got and accepted them. Which
    acquisition came first, the record cannot say; both accepts answered ok is the finding."""
    x = base()
    x.share(3, [])
    x.share(5, [(0, 0, 10, 2, "accept"), (0, 1, 11, 1, "accept"), (0, 2, 12, 1, "accept")])
    x.share(3, [(0, 0, 10, 1, "accept")])
    result = run(end(x))
    assert counts(result) == {"share-accepted-twice": 1}
    assert result["anomalies"]["share-accepted-twice"]["outcomes"]["violation"] == 1


@pytest.mark.spark
def test_one_delivery_count_for_two_acquisitions_whatever_their_order(run):
    """Seen on a real cluster after a timed-out acknowledgement: two consumers got the same
    records with delivery count 1. In whatever order they were acquired, one acquisition was
    not counted: permitted by the failed acknowledgement in the window, else a violation."""
    for ack_error, outcome in ((None, "violation"), ("REQUEST_TIMED_OUT", "permitted")):
        x = base()
        x.share(4, [])
        acks = {0: ack_error} if ack_error else None
        x.share(1, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept")], acks=acks)
        x.share(4, [(0, 0, 10, 1, "accept"), (0, 1, 11, 1, "accept"),
                    (0, 2, 12, 1, "accept")])
        a = run(end(x))["anomalies"]["share-count-regress"]
        assert a["count"] == 2 and a["outcomes"][outcome] == 2, (ack_error, a)
