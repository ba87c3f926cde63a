"""The table of what each configuration promises, and the per-finding judgement against the
run's record (pure logic, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.analysis import evidence
from kafka_chaos.analysis.checkers import ANOMALIES
from kafka_chaos.analysis.promises import (PERMITTED, RULES, TRUNCATION, UNEXPLAINED,
                                           VIOLATION, Case, candidates, facts_of, judge,
                                           judge_case)
from kafka_chaos.config import RunConfig


def facts(record=None, **overrides):
    return facts_of(RunConfig(**overrides).model_dump(mode="json"), record)


def rule(name, **overrides) -> str | None:
    return judge(name, facts(**overrides))["rule"]


def test_every_rule_names_real_anomalies_and_quotes_its_source():
    for r in RULES:
        assert set(r.anomalies) <= set(ANOMALIES), r.name
        assert r.source and r.because and len(r.quote) > 40, r.name
    # truncation may explain consumer-side rewinds too (auto.offset.reset after an unclean
    # election), never a value nobody wrote
    assert "group-rewind" in TRUNCATION and "garbage-read" not in TRUNCATION
    assert candidates("garbage-read", facts(acks="1", unclean_leader_election=True)) == []


def test_every_rule_judges_each_finding_or_says_why_its_configuration_is_enough():
    """Issue 49, class 7: a rule with no condition on the finding permits every finding of
    its anomalies in the run; each such rule must say why that is right."""
    for r in RULES:
        assert r.per_case or len(r.alone) > 40, r.name
        assert not (r.per_case and r.alone), r.name
    assert {r.name for r in RULES if not r.per_case} == {
        "interleaved-writes", "read-uncommitted-cycles", "read-uncommitted",
        "consumer-group-rebalances", "at-least-once-groups", "share-at-least-once"}


def test_the_default_quick_start_permits_duplicates_per_writer_and_no_loss_at_all():
    verdict = judge("duplicate", facts())
    assert verdict["per_case"] and verdict["rule"] == "retries-without-idempotence"
    verdict = judge("lost-write", facts())
    assert verdict["permitted"] is False and verdict["rule"] is None
    assert not verdict["per_case"]


@pytest.mark.parametrize("overrides", [{"idempotence": True}, {"retries": 0}])
def test_idempotence_or_no_retries_forbids_duplicates_and_reordering(overrides):
    assert rule("duplicate", **overrides) is None
    assert rule("nonmonotonic-send", **overrides) is None


def test_librdkafka_may_reorder_retries_even_with_max_in_flight_1():
    """librdkafka's CONFIGURATION.md: "retrying may cause reordering unless
    enable.idempotence is set to true" (the Java client promises order at 1)."""
    assert rule("nonmonotonic-send", max_in_flight=1) == "reordering-retries"
    assert rule("duplicate", max_in_flight=1) == "retries-without-idempotence"


def test_the_java_client_reorders_retries_only_with_more_than_one_request_in_flight():
    """Kafka's producer configs, `retries`: reordering needs idempotence off and
    max.in.flight.requests.per.connection > 1; unset, idempotence is the Java client's
    default, on (KIP-679)."""
    java = {"client": "java", "idempotence": False}
    assert rule("nonmonotonic-send", **java, max_in_flight=1) is None
    assert rule("nonmonotonic-send", **java, max_in_flight=2) == "reordering-retries-java"
    assert rule("duplicate", **java, max_in_flight=1) == "retries-without-idempotence"
    assert rule("nonmonotonic-send", client="java") is None
    assert rule("duplicate", client="java") is None


def test_duplicates_are_judged_per_writer():
    f = facts()
    plain = Case(None, 0, 10, writer_f="send")
    txn = Case(None, 0, 10, writer_f="txn")  # a transactional producer is idempotent
    assert judge_case("duplicate", plain, f, evidence.Record())["outcome"] == PERMITTED
    assert judge_case("duplicate", txn, f, evidence.Record())["outcome"] == VIOLATION


def test_read_uncommitted_permits_g1a_of_aborted_transactions_only():
    """Defect 6: a non-transactional send that failed and is read anyway was a wrong fail."""
    f = facts(txn=True, isolation_level="read_uncommitted")
    assert judge_case("G1a", Case(None, 0, 9, writer_f="txn"), f,
                      evidence.Record())["outcome"] == PERMITTED
    assert judge_case("G1a", Case(None, 0, 9, writer_f="send"), f,
                      evidence.Record())["outcome"] == VIOLATION
    assert rule("precommitted-read", txn=True, isolation_level="read_uncommitted") == \
        "read-uncommitted"
    assert rule("G1a", txn=True) is None and rule("precommitted-read", txn=True) is None


def test_g1c_is_permitted_only_with_a_ww_step():
    """Defect 1: Jepsen permits G1c "when we include ww edges"; a wr-only cycle under
    read_committed transactions is a violation."""
    f = facts(txn=True, idempotence=True)
    for name in ("G1c", "G1c-process", "G1c-realtime"):
        assert judge_case(name, Case(None, 0, 9, ww=True), f,
                          evidence.Record())["outcome"] == PERMITTED
        assert judge_case(name, Case(None, 0, 9, ww=False), f,
                          evidence.Record())["outcome"] == VIOLATION
    for name in ("int-send-skip", "G0", "G0-process", "G0-realtime"):
        assert judge(name, f)["permitted"] is True
    # Jepsen: "g1c is normal with wr-only edges at read-uncommitted"
    ru = facts(txn=True, idempotence=True, isolation_level="read_uncommitted")
    assert judge("G1c", ru) == {**judge("G1c", ru), "per_case": False, "permitted": True,
                                "rule": "read-uncommitted-cycles"}


def test_consumer_side_rules():
    assert rule("poll-skip", sub_via="subscribe") == "consumer-group-rebalances"
    assert rule("poll-skip") is None and rule("int-poll-skip", sub_via="subscribe") is None
    assert rule("group-redelivery") == "at-least-once-groups"
    assert rule("group-rewind") is None and rule("eos-duplicate") is None
    assert rule("group-skip") is None
    assert rule("group-skip", auto_offset_reset="latest") == "reset-to-latest"


def test_an_unknown_configuration_permits_nothing():
    for name in ANOMALIES:
        verdict = judge(name, None)
        assert verdict["permitted"] is False and "unknown" in verdict["because"]


def test_truncating_rules_need_a_configuration_or_a_record_that_allows_them():
    for overrides, expected in (({"acks": "1"}, "acks-below-all"),
                                ({"unclean_leader_election": True}, "unclean-leader-election"),
                                ({"min_insync_replicas": 1}, "min-insync-replicas-1")):
        assert [r.name for r in candidates("lost-write", facts(**overrides))] == [expected]
    assert candidates("lost-write", facts()) == []
    toggled = evidence.Record(unclean={"t": [(5, evidence.END)]})
    assert [r.name for r in candidates("lost-write", facts(toggled))] == \
        ["unclean-leader-election"]


# --- the judgement against the record, on generated records ------------------------------

def _sample(op: int, tp, leader: int, epoch: int) -> dict:
    return {"op": op, "index": op + 1, "process": "monitor", "f": "cluster-state", "type": "ok",
            "inv": None, "invoke_time": op * 1_000_000, "time": (op + 1) * 1_000_000,
            "done": {"partitions": {tp[0]: [{"partition": tp[1], "leader": leader,
                                             "leader_epoch": epoch, "isr": [1, 2, 3],
                                             "elr": None}]}}}


@given(change_at=st.integers(0, 40), on=st.sampled_from([("t", 0), ("t", 1), ("u", 0)]),
       ack=st.integers(1, 20), read=st.integers(0, 20))
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_an_acks_1_loss_is_permitted_exactly_when_its_partition_changed_leader_in_its_window(
        change_at, on, ack, read):
    """Samples of three partitions in 23 slots, one leader change on ``on`` between the slot
    of ``change_at`` and the next; a lost write of ("t", 0) acknowledged in slot ``ack`` and
    missed by a read invoked ``read`` slots later (never past the last sample). Issue 49,
    class 1: a change whose samples bracket more than the window (the last of the old epoch
    before the write, the first of the new after the read began) permitted the loss; it is
    doubt now."""
    tps = [("t", 0), ("t", 1), ("u", 0)]
    rows = []
    for i, op in enumerate(range(0, 45, 2)):
        for j, tp in enumerate(tps):
            moved = tp == on and op > change_at
            rows.append(_sample(op * 3 + j, tp, 2 if moved else 1, 2 if moved else 1))
    rows.sort(key=lambda r: r["op"])
    # renumber so every sample is its own pair of indexes, in order
    for n, r in enumerate(rows):
        r["op"], r["index"] = 2 * n, 2 * n + 1
        r["invoke_time"], r["time"] = r["op"] * 1_000_000, r["index"] * 1_000_000
    rec = evidence.build(rows, None, {"acks": "1"})
    lo, hi = 2 * (3 * ack), 2 * (3 * min(ack + read, 21))  # within the samples' span
    case = Case(("t", 0), lo, hi, write=(lo - 1, lo))
    verdict = judge_case("lost-write", case, facts(rec, acks="1"), rec)
    changes = rec.of(("t", 0), evidence.LEADER_CHANGE, 0, evidence.END)
    if on != ("t", 0):
        assert verdict["outcome"] == VIOLATION and not changes
        return
    [change] = changes
    slot = change_at // 2  # the last sample of the old epoch, then the first of the new
    assert (change.lo, change.hi) == (2 * 3 * slot, 2 * 3 * (slot + 1) + 1)
    # the change happened after the last sample of the old epoch began and before the first
    # of the new one completed: it explains the loss when that span lies inside the window,
    # and is doubt when it meets the window, or the send's flight, without lying inside
    expected = (PERMITTED if change.inside(lo, hi) else
                UNEXPLAINED if change.meets(lo - 1, hi) else VIOLATION)
    assert verdict["outcome"] == expected, (change, lo, hi)
    if expected == PERMITTED:
        assert verdict["evidence"] is change


def test_a_window_past_the_last_sample_is_unexplained_not_permitted():
    rows = [_sample(0, ("t", 0), 1, 1), _sample(2, ("t", 0), 1, 1)]
    rec = evidence.build(rows, None, {"acks": "1"})
    verdict = judge_case("lost-write", Case(("t", 0), 1, 10), facts(rec, acks="1"), rec)
    assert verdict["outcome"] == UNEXPLAINED and verdict["blind"][0] == 3
    verdict = judge_case("lost-write", Case(("t", 0), 1, 2), facts(rec, acks="1"), rec)
    assert verdict["outcome"] == VIOLATION


def test_the_light_name_list_matches_the_checkers():
    from kafka_chaos.analysis import elle
    from kafka_chaos.catalogue import anomalies as names

    assert names.CYCLE_ANOMALIES == elle.CYCLE_ANOMALIES
    assert set(names.ANOMALIES) == set(ANOMALIES) and len(ANOMALIES) == len(set(ANOMALIES))


# --- a duplicate pinned on the proxy's own record of the Produce it sent twice --------------

def _nemesis(op: int, f: str, inv, done, type_: str = "ok") -> dict:
    return {"op": op, "index": op + 1, "process": "nemesis", "f": f, "type": type_,
            "inv": inv, "done": done, "invoke_time": op * 1_000_000,
            "time": (op + 1) * 1_000_000}


def _proxy_record(tp: str = "t-0", at_ms: int = 11, heal: str = "ok", values=(100, 101)):
    """Samples of t-0 and t-1 every 4 ms over 40 ms; a duplicate fault from 8 ms to 30 ms
    whose report (``heal`` ok) has the proxy send a Produce of ``tp`` holding ``values``
    (None: unread) twice at ``at_ms``."""
    rows = [_sample(op, p, 1, 1) for op in range(0, 41, 4) for p in (("t", 0), ("t", 1))]
    for n, r in enumerate(rows):  # two samples per slot: t-0 at op, t-1 at op + 2
        r["op"] = r["op"] + 2 * (n % 2)
        r["index"] = r["op"] + 1
        r["invoke_time"], r["time"] = r["op"] * 1_000_000, r["index"] * 1_000_000
    start = {"target": "duplicate"}
    report = {"id": 1, "fault": "duplicate", "applied": 1, "undecoded": 0,
              "partitions": {tp: [at_ms * 1_000_000, at_ms * 1_000_000, 1]},
              "values": {tp: values}}
    rows += [_nemesis(9, "request-fault", start, {"id": 1, "fault": "duplicate"}),
             _nemesis(31, "request-heal", None, {"ended": [report]} if heal == "ok" else
                      "NemesisError: timed out", heal)]
    return evidence.build(rows, None, {})


@pytest.mark.parametrize("sent, tp, values, idempotence, outcome", [
    ((10, 13), "t-0", [100, 101], False, PERMITTED),  # the copy carried the value
    ((10, 13), "t-0", None, False, PERMITTED),        # unread values: its partition and time
    ((10, 13), "t-0", [102], False, VIOLATION),       # a copy of other values only
    ((10, 13), "t-1", [101], False, VIOLATION),       # the proxy sent another partition's twice
    ((10, 13), "t-0", [101], True, VIOLATION),        # idempotence: the broker drops the copy
    ((20, 23), "t-0", None, False, VIOLATION),        # the send came after the copy
])
def test_a_duplicate_is_permitted_by_the_proxys_copy_of_its_own_partitions_produce(
        sent, tp, values, idempotence, outcome):
    rec = _proxy_record(tp, values=values)
    case = Case(("t", 0), sent[0], 40, sent=sent, writer_f="send", value=101)
    verdict = judge_case("duplicate", case, facts(rec, idempotence=idempotence, retries=0,
                                                  proxy=True), rec)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["rule"] == "proxy-duplicated-produce"
        assert verdict["evidence"].kind == evidence.DUPLICATED
    # a transactional producer is idempotent whatever enable.idempotence says (KIP-98)
    txn = Case(("t", 0), sent[0], 40, sent=sent, writer_f="txn", value=101)
    assert judge_case("duplicate", txn, facts(rec, idempotence=False, retries=0, proxy=True),
                      rec)["outcome"] == VIOLATION


def test_a_duplicate_fault_whose_report_is_missing_leaves_duplicates_unexplained():
    rec = _proxy_record(heal="info")
    case = Case(("t", 0), 10, 40, sent=(10, 13), writer_f="send", value=101)
    f = facts(rec, idempotence=False, retries=0, proxy=True)
    verdict = judge_case("duplicate", case, f, rec)
    assert verdict["outcome"] == UNEXPLAINED and verdict["why"]
    early = Case(("t", 0), 2, 40, sent=(2, 5), writer_f="send")  # before the fault began
    assert judge_case("duplicate", early, f, rec)["outcome"] == VIOLATION
    # a report whose Produce requests the proxy could not read: their partitions unknown
    rows = [_nemesis(1, "request-fault", {"target": "duplicate"}, {"id": 1}),
            _nemesis(3, "request-heal", None, {"ended": [{
                "id": 1, "fault": "duplicate", "undecoded": 1, "partitions": {}}]})]
    rows += [_sample(op, ("t", 0), 1, 1) for op in range(4, 40, 4)]
    rec = evidence.build(rows, None, {})
    assert judge_case("duplicate", case, f, rec)["outcome"] == UNEXPLAINED


def test_what_the_configuration_alone_permits_is_told_from_what_an_event_permits():
    """A file fault (``verdict.judge_run``) leaves undecided the findings an event explains
    (an election, a power loss: the damage may be the cause instead) and the violations, not
    those the configuration and the finding alone permit."""
    from kafka_chaos.analysis.promises import by_configuration

    for rule in ("interleaved-writes", "ww-cycles", "retries-without-idempotence",
                 "plan-allows"):
        assert by_configuration(rule), rule
    for rule in ("acks-below-all", "unclean-leader-election", "min-insync-replicas-1",
                 "last-in-sync-replica-lost-power", "no such rule"):
        assert not by_configuration(rule), rule
    assert {r.name for r in RULES if r.evidence is None} >= {
        "interleaved-writes", "ww-cycles", "retries-without-idempotence"}
