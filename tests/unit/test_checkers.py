"""Every anomaly type on hand-made format-2 histories: exact counts and explanations."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.analysis.checkers import ANOMALIES, CHECKERS
from kafka_chaos.analysis.explain import explain
from tests.queue_builder import Q


def found(result: dict[str, Any]) -> dict[str, int]:
    return {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}


#: What the verdict adds to a checker's example (``analysis.judge``).
JUDGED = ("outcome", "rule", "evidence", "blind")


def first(result: dict[str, Any], name: str) -> dict[str, Any]:
    """The first example of ``name`` as its checker made it (how it was judged apart)."""
    ex = result["anomalies"][name]["examples"][0]
    assert ex["outcome"] in ("permitted", "violation", "unexplained")
    return {k: v for k, v in ex.items() if k not in JUDGED}


def every_log_anomaly() -> Q:
    """One history, one anomaly per key (keys 0-12), under the strictest configuration."""
    q = Q().assign(20, [7, 8, 9, 10])
    q.send(0, [(0, 100)]).send(0, [(0, 101)]).send(0, [(0, 102)]).send(0, [(0, 103)])  # lost
    q.send(1, [(1, 110)]).send(1, [(1, 111)]).send(1, [(1, 112)])                      # unseen
    q.send(2, [(2, 120)], offsets=[0]).poll(20, {2: [(0, 120), (1, 120)]})             # duplicate
    q.send(3, [(3, 130)], offsets=[0]).poll(21, {3: [(0, 130)]})                       # rewritten
    q.send(31, [(3, 131)], offsets=[0])                                                # offset 0
    q.send(4, [(4, 140)], offsets=[1]).send(4, [(4, 141)], offsets=[0])                # send back
    q.send(5, [(5, 150), (5, 151)], offsets=[1, 0])                                    # in one op
    q.send(6, [(6, 160), (6, 161)], offsets=[0, 2]).send(7, [(6, 162)], offsets=[1])   # interleave
    q.send(8, [(7, 170), (7, 171), (7, 172)]).poll(20, {7: [(0, 170)]}).poll(20, {7: [(2, 172)]})
    q.send(8, [(8, 180), (8, 181)]).poll(20, {8: [(0, 180), (1, 181)]}).poll(20, {8: [(1, 181)]})
    q.send(8, [(9, 190), (9, 191), (9, 192)]).poll(20, {9: [(0, 190), (2, 192)]})
    q.send(8, [(10, 200), (10, 201)]).poll(20, {10: [(1, 201), (0, 200)]})
    q.send(9, [(11, 210)], type="fail")                                                # G1a
    q.send(10, [(12, 220), (12, 221)], type="info", acked=[True, False])               # partial
    q.final(30, 0, [(0, 100), (1, 101), (3, 103)], end=4).final(30, 1, [(0, 110), (1, 111)])
    q.final(30, 2, [(0, 120), (1, 120)]).final(30, 3, [(0, 131)])
    q.final(30, 4, [(0, 141), (1, 140)]).final(30, 5, [(0, 151), (1, 150)])
    q.final(30, 6, [(0, 160), (1, 162), (2, 161)])
    for key, values in ((7, (170, 171, 172)), (8, (180, 181)), (9, (190, 191, 192)),
                        (10, (200, 201))):
        q.final(30, key, list(enumerate(values)))
    return q.final(30, 11, [(0, 210)]).final(30, 12, [], end=1)


@pytest.mark.spark
def test_every_log_anomaly_is_counted_exactly_and_explained(run) -> None:
    result = run(every_log_anomaly())
    assert found(result) == {
        "lost-write": 3, "unseen": 1, "duplicate": 1, "inconsistent-offsets": 1,
        "nonmonotonic-send": 1, "int-nonmonotonic-send": 1, "int-send-skip": 1, "poll-skip": 1,
        "nonmonotonic-poll": 1, "int-poll-skip": 1, "int-nonmonotonic-poll": 1, "G1a": 1,
        # by-products of the interleavings above, permitted under every configuration
        "G0": 1, "G0-process": 1, "G0-realtime": 2}
    assert result["valid"] is False and result["unknown_reasons"] == []
    assert result["permitted"] == ["int-send-skip", "G0", "G0-process", "G0-realtime"]
    assert result["violations"] == [n for n in ANOMALIES if n in found(result)
                                    and n not in result["permitted"]]
    lost = result["anomalies"]["lost-write"]["examples"]
    assert {k: lost[0][k] for k in ("key", "value", "offset", "covered_by", "final_end")} == {
        "key": 0, "value": 102, "offset": 2, "covered_by": [0, 4], "final_end": 4}
    assert lost[0]["read_before"] is False
    # acknowledged and read at offset 0, then gone from the log: lost although once seen
    assert (lost[1]["key"], lost[1]["value"], lost[1]["read_before"]) == (3, 130, True)
    # a delivery report with an offset is an acknowledgement, whatever the op's other sends did
    assert (lost[2]["key"], lost[2]["value"], lost[2]["type"]) == (12, 220, "info")
    assert first(result, "unseen")["offset"] == 2 and first(result, "unseen")["final_end"] == 2
    # the ops behind them: the sends, the poll and the final read of each
    assert first(result, "duplicate") == {
        "key": 2, "value": 120, "offsets": [0, 1], "op_indexes": [16, 18, 64]}
    assert first(result, "inconsistent-offsets") == {
        "key": 3, "offset": 0, "values": [130, 131], "op_indexes": [20, 22, 24, 66]}
    assert first(result, "nonmonotonic-send") == {
        "process": 4, "key": 4, "values": [140, 141], "delta": -1, "op_indexes": [26, 28]}
    assert first(result, "int-nonmonotonic-send")["values"] == [150, 151]
    assert first(result, "int-send-skip")["delta"] == 2
    for name, key, offsets in (("poll-skip", 7, [0, 2]), ("nonmonotonic-poll", 8, [1, 1]),
                               ("int-poll-skip", 9, [0, 2]), ("int-nonmonotonic-poll", 10, [1, 0])):
        assert (first(result, name)["key"], first(result, name)["offsets"]) == (key, offsets)
    g1a = first(result, "G1a")
    assert (g1a["value"], g1a["writer_type"], g1a["reader_final"]) == (210, "fail", True)
    g0 = first(result, "G0")
    assert g0["text"] == "op 32 -ww-> op 34 -ww-> op 32"
    assert [(s["key"], s["value"], s["next_value"]) for s in g0["steps"]] == [
        (6, 160, 162), (6, 162, 161)]
    assert result["cycle_search"]["complete"] is True
    text = {name: explain(name, first(result, name)) for name in found(result)}
    assert text["lost-write"] == ("key 0: value 102 was acknowledged at offset 2 (op 6) and is "
                                  "missing, although offsets [0, 4) were read to the end of the log")
    assert text["unseen"].endswith("is missing; the log ends at offset 2")
    assert text["duplicate"].startswith("key 2: value 120 is at offsets 0, 1 (ops ")
    assert text["nonmonotonic-send"] == ("process 4 sent 140 then 141 to key 4; 141 landed 1 "
                                         "position(s) before it (ops 26, 28)")
    assert "skipping 1 record(s)" in text["poll-skip"]
    assert "written by op 56, which failed" in text["G1a"]
    assert text["G0"] == g0["text"]


@pytest.mark.spark
def test_clean_history_is_valid(run) -> None:
    q = (Q().assign(0, [0, 1]).assign(1, [1])
         .send(2, [(0, 1), (1, 2)]).poll(0, {0: [(0, 1)], 1: [(0, 2)]})
         .nemesis("kill", {"target": "one"}, {"killed": ["n2"]})
         .monitor({"answering": {"1": True, "2": False}, "partitions": None,
                   "controller": None, "took_ms": 3}, "after kill")
         .send(3, [(1, 3)], type="fail", error="MSG_SIZE_TOO_LARGE")
         .send(2, [(0, 4), (1, 5)]).poll(1, {1: [(1, 5)]}).poll(0, {0: [(1, 4)], 1: [(1, 5)]})
         .send(4, [(1, 6)], type="pending")
         .read_all(9))
    result = run(q)
    assert result["valid"] is True, result["violations"] or result["unknown_reasons"]
    assert found(result) == {}
    assert result["stats"] == {
        "ops": len(q.lines), "nemesis": 1, "monitor": 1, "acked_sends": 4, "records_read": 9,
        "keys": 2,
        "by_f": {"assign": {"ok": 2, "fail": 0, "info": 0, "pending": 0},
                 "poll": {"ok": 5, "fail": 0, "info": 0, "pending": 0},
                 "send": {"ok": 2, "fail": 1, "info": 0, "pending": 1}}}
    assert result["format"] == 2 and result["config_known"] is True


@pytest.mark.spark
def test_reads_of_uncommitted_data_are_permitted_only_under_read_uncommitted(run) -> None:
    q = (Q(txn=True, isolation_level="read_uncommitted").assign(0, [0, 1])
         .txn(1, [("send", 0, 10), ("send", 1, 11)], type="fail", error="ABORTED")
         .txn(0, [("poll", {0: [(0, 10)]}), ("send", 1, 12)], offsets=[1])
         .txn(2, [("send", 0, 13), ("poll", {0: [(0, 10), (1, 13)]})], offsets=[1])
         .final(9, 0, [(0, 10), (1, 13)]).final(9, 1, [(0, 11), (1, 12)]))
    result = run(q)
    assert found(result) == {"G1a": 4, "precommitted-read": 1}
    assert result["permitted"] == ["G1a", "precommitted-read"] and result["valid"] is True
    readers = sorted(e["reader"] for e in result["anomalies"]["G1a"]["examples"])
    assert readers == [4, 6, 8, 10]  # two transactions and the final reads of keys 0 and 1
    pre = first(result, "precommitted-read")
    assert (pre["value"], pre["writer"], pre["reader"]) == (13, 6, 6)
    assert result["anomalies"]["G1a"]["rule"] == "read-uncommitted-aborted"


@pytest.mark.spark
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_an_info_transaction_is_acknowledged_when_an_ok_op_read_one_of_its_values(
        run, isolation: str) -> None:
    """Jepsen's ``must-have-committed?``: a transaction that ended ``info`` committed if an
    ``ok`` op read one of its values, so its other sends are acknowledged writes and one
    never read is lost; one nobody read proves nothing. Under ``read_uncommitted`` a read
    proves nothing either."""
    q = (Q(txn=True, isolation_level=isolation).assign(20, [0, 1])
         .txn(1, [("send", 0, 10), ("send", 0, 11)], type="info")
         .txn(2, [("send", 1, 20), ("send", 1, 21)], type="info")
         .poll(20, {0: [(0, 10)]})
         .final(30, 0, [(0, 10)], end=2).final(30, 1, [], end=2))
    result = run(q)
    if isolation == "read_committed":
        assert found(result) == {"lost-write": 1}
        lost = first(result, "lost-write")
        assert (lost["key"], lost["value"], lost["type"]) == (0, 11, "info")
    else:
        assert found(result) == {}


@pytest.mark.spark
def test_rebalance_and_seek_events_reset_only_their_key(run) -> None:
    """A consumer moved back on one key by a rebalance or a seek reads it again without a
    nonmonotonic-poll; the same step back on a key no event touched is one."""
    q = (Q().assign(0, [0, 1, 2])
         .send(5, [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)])
         .poll(0, {0: [(0, 1), (1, 2)], 1: [(0, 3), (1, 4)], 2: [(0, 5), (1, 6)]})
         .poll(0, {0: [(0, 1)]}, events=[["assigned", [0]]])
         .poll(0, {1: [(0, 3)]}, events=[["seek", {"1": 0}]])
         .poll(0, {2: [(0, 5)]}, events=[["assigned", [0]], ["seek", {"1": 0}]])
         .read_all(9))
    result = run(q)
    assert found(result) == {"nonmonotonic-poll": 1}
    assert first(result, "nonmonotonic-poll")["key"] == 2


@pytest.mark.spark
def test_a_consumer_reading_on_after_an_abort_did_not_rewind(run) -> None:
    """Each process aborts a transaction that read its key from offset 1 and seeks back to
    offset 1: process 0 reads on from offset 3 (no rewind: ``no-rewind-after-abort``, which
    the poll order does not see past a seek); process 1 reads offset 1 again; process 2 was
    assigned anew in between, which moves a consumer anywhere; process 3, assigned from the
    beginning, read from offset 0 and sought to its committed offset 2, where it reads on."""
    q = Q().assign(0, [0]).assign(1, [1]).assign(2, [2])
    for k in (0, 1, 2):
        q.send(5, [(k, 10 * k + i) for i in range(5)])
    for p in (0, 1, 2):
        k = p
        q.poll(p, {k: [(0, 10 * k)]})
        q.txn(p, [("poll", {k: [(1, 10 * k + 1), (2, 10 * k + 2)]})], type="fail",
              events=[["seek", {str(k): 1}]])
    q.poll(0, {0: [(3, 3), (4, 4)]}).poll(1, {1: [(1, 11), (2, 12)]})
    q.assign(2, [2]).poll(2, {2: [(3, 23)]})
    q.assign(3, [3]).send(5, [(3, 30 + i) for i in range(4)])
    q.txn(3, [("poll", {3: [(0, 30), (1, 31), (2, 32)]})], type="fail",
          events=[["seek", {"3": 2}]])
    q.poll(3, {3: [(2, 32), (3, 33)]})
    result = run(q.read_all(9))
    assert found(result) == {"no-rewind-after-abort": 1}
    ex = first(result, "no-rewind-after-abort")
    assert {k: ex[k] for k in ("process", "key", "seek_to", "aborted_from", "offset")} == {
        "process": 0, "key": 0, "seek_to": 1, "aborted_from": 1, "offset": 3}
    assert result["anomalies"]["no-rewind-after-abort"]["side"] == "consumer"
    assert result["valid"] is False and result["violations"] == ["no-rewind-after-abort"]
    assert explain("no-rewind-after-abort", ex).startswith(
        "process 0 aborted a transaction that had read key 0 from offset 1 and sought back to "
        "offset 1, then read on from offset 3")


@pytest.mark.spark
def test_consumer_group_delivery_is_reported_apart_from_the_log(run) -> None:
    q = (Q(sub_via="subscribe", auto_commit=True)
         .subscribe(0, [0]).subscribe(1, [0])
         .send(5, [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5)])
         .poll(0, {0: [(0, 1), (1, 2)]}, events=[["assigned", [0]]])
         .crash(0)
         .poll(1, {0: [(1, 2), (2, 3)]}, events=[["assigned", [0]], ["committed", {"0": 1}]])
         .poll(1, {0: [(4, 5)]})                     # offset 3 never delivered to the group
         .commit(1, {0: 5})
         .read_all(9))
    result = run(q)
    assert found(result) == {"group-redelivery": 1, "group-skip": 1, "poll-skip": 1}
    red = first(result, "group-redelivery")
    # the group's commit came in the second delivery's own op: above it, not before it
    assert red == {"group": "kc-group", "key": 0, "offset": 1, "value": 2, "deliveries": 2,
                   "op_indexes": [6, 10], "committed": None}
    assert explain("group-redelivery", red) == ("group kc-group delivered key 0 offset 1 "
                                                "(value 2) 2 times (ops 6, 10)")
    skip = first(result, "group-skip")
    # the commit above it does not say which leader epoch it sent (a history before epochs)
    assert skip == {"group": "kc-group", "key": 0, "offset": 3, "value": 4, "committed": 5,
                    "from_offset": 0, "epochless": None, "commits_until": 15,
                    "reset": None}  # not asked: auto.offset.reset is earliest
    assert explain("group-skip", skip) == ("group kc-group committed key 0 up to offset 5 but "
                                           "never delivered offset 3 (value 4)")
    assert result["anomalies"]["group-skip"]["side"] == "consumer"
    assert result["anomalies"]["group-redelivery"]["permitted"] is True
    assert result["anomalies"]["poll-skip"]["rule"] == "consumer-group-rebalances"
    assert result["violations"] == ["group-skip"] and result["anomalies"]["lost-write"]["count"] == 0


@pytest.mark.spark
def test_windowed_polls_without_final_reads_are_not_lost_writes(run) -> None:
    """A poller that read only recent records, and a key whose final read is missing: the
    writes below what was read are not judged (unknown), never lost."""
    q = Q(auto_offset_reset="latest").assign(0, [0])
    for v in range(20):
        q.send(1, [(0, v)])
    q.poll(0, {0: [(17, 17), (18, 18), (19, 19)]})
    result = run(q)
    assert result["anomalies"]["lost-write"]["count"] == 0
    assert result["valid"] == "unknown"
    assert any("17 acknowledged write(s) were never read" in r for r in result["unknown_reasons"])
    assert any("no ok final read of key(s) 0" in r for r in result["unknown_reasons"])


@pytest.mark.spark
def test_a_consumers_skip_is_never_a_lost_write(run) -> None:
    """Without final reads: a consumer passing over an offset is a poll-skip, while a consumer
    reading another value at an acknowledged write's offset has seen that write lost."""
    q = (Q().assign(0, [0, 1])
         .send(1, [(0, 10), (0, 11), (0, 12)])
         .send(1, [(1, 20), (1, 21)]).send(2, [(1, 22)], offsets=[1])
         .poll(0, {0: [(0, 10), (2, 12)], 1: [(0, 20), (1, 22)]}))
    result = run(q)
    assert found(result) == {"int-poll-skip": 1, "inconsistent-offsets": 1, "lost-write": 1}
    assert first(result, "lost-write")["value"] == 21  # offset 1 was read holding 22
    assert first(result, "int-poll-skip")["offsets"] == [0, 2]  # 11 is not judged lost
    assert any("1 acknowledged write(s) were never read" in r for r in result["unknown_reasons"])


@pytest.mark.spark
def test_a_failed_final_read_leaves_its_writes_unjudged(run) -> None:
    q = (Q().send(0, [(0, 1), (0, 2), (0, 3)])
         .final(1, 0, [(0, 1)], end=1, eof=False).final(1, 0, [], type="info"))
    result = run(q)
    assert found(result) == {} and result["valid"] == "unknown"
    assert any("2 acknowledged write(s)" in r for r in result["unknown_reasons"])


@pytest.mark.spark
def test_a_raising_checker_makes_its_anomalies_unknown_and_hides_nothing(run, monkeypatch) -> None:
    def broken(h, v):
        raise RuntimeError("boom\njava stack trace")
    monkeypatch.setitem(CHECKERS, "duplicate", broken)
    monkeypatch.delitem(CHECKERS, "inconsistent-offsets")
    q = Q().send(0, [(0, 1)]).send(0, [(0, 2)]).final(1, 0, [(1, 2)], end=2)
    result = run(q)
    assert result["valid"] is False and result["violations"] == ["lost-write"]
    assert result["anomalies"]["duplicate"] == {
        "count": None, "examples": [], "error": "RuntimeError: boom", "permitted": False,
        "rule": None, "because": "no rule permits it under this configuration", "source": None,
        "side": "log", "outcomes": {"permitted": 0, "violation": 0, "unexplained": 0},
        "rules": {}}
    assert result["unknown_reasons"] == ["checker duplicate raised: RuntimeError: boom",
                                         "no checker reported inconsistent-offsets"]


@pytest.mark.spark
def test_a_cycle_search_cut_short_is_unknown(run) -> None:
    q = (Q().send(0, [(0, 1), (1, 2)], offsets=[0, 1]).send(1, [(0, 3), (1, 4)], offsets=[1, 0])
         .read_all(9))
    complete = run(q)
    # p1's op began after p0's completed, yet wrote before it to key 1: realtime too
    assert found(complete) == {"G0": 1, "G0-realtime": 1} and complete["valid"] is True
    cut = run(q, cycle_time_limit_s=1e-9)
    assert cut["cycle_search"]["complete"] is False and cut["valid"] == "unknown"
    assert any("cycle search stopped" in r for r in cut["unknown_reasons"])


@pytest.mark.spark
def test_a_forced_unclean_election_permits_loss_only_when_it_elected(run) -> None:
    """The nemesis' ElectLeaders(UNCLEAN) (KIP-460) counts as an unclean election when its
    result shows a leader elected; one that found nothing offline proves nothing."""
    def lost_after(result: dict) -> dict[str, Any]:
        q = (Q(min_insync_replicas=2).send(0, [(0, 1), (0, 2), (0, 3)])
             .nemesis("elect-unclean", {"topic": "t"}, result)
             .final(1, 0, [(0, 1), (2, 3)]))  # offset 1 (value 2) is gone
        return run(q)["anomalies"]["lost-write"]

    elected = lost_after({"offline": [0], "elected": {"0": "OK"}})
    assert elected["count"] == 1 and elected["permitted"] is True
    assert elected["rule"] == "unclean-leader-election"
    nothing = lost_after({"offline": [], "elected": {}})
    assert nothing["count"] == 1 and nothing["permitted"] is False


@pytest.mark.spark
@pytest.mark.parametrize("sent_after_read", [True, False])
def test_a_skip_over_an_offset_written_only_after_the_read_is_no_poll_skip(
        run, sent_after_read: bool) -> None:
    """A consumer reads offsets 0 and 2 of a key in one poll (offset 1 held what no
    consumer returns: a transaction marker); an unclean election then truncates the log to
    offset 1 and a new write takes offset 1. Sent after the read op completed, that record
    cannot have been passed over: no int-poll-skip. Sent before, the consumer may have
    passed over it: an int-poll-skip."""
    q = Q().assign(20, [0]).send(1, [(0, 10)], offsets=[0])
    if not sent_after_read:
        q = q.send(2, [(0, 12)], offsets=[1])
    q = q.send(1, [(0, 11)], offsets=[2]).poll(20, {0: [(0, 10), (2, 11)]})
    if sent_after_read:
        q = q.send(2, [(0, 12)], offsets=[1])
    result = run(q.final(9, 0, [(0, 10), (1, 12)]))
    assert ("int-poll-skip" in found(result)) is not sent_after_read, found(result)
