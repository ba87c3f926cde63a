"""``hanging-transaction`` from the monitor's samples of the HW and LSO: only a stuck LSO
longer than the transaction timeout and the coordinator's abort check, counted in time with
no fault active and in stretches the monitor saw, is one."""

from __future__ import annotations

import math

from kafka_chaos.analysis import evidence, judge, liveness, promises

S = 1_000_000_000  # ns


def _rows(samples: list[tuple[float, int, int] | None], nemesis=()) -> list[dict]:
    """Monitor rows, one per ``(time s, hw, lso)`` every 0.5 s (None: no sample then), of
    partition t-0 led by node 1, and nemesis rows ``(f, invoke s, completion s or None)``."""
    rows, op = [], 0
    for s in samples:
        op += 2
        if s is None:
            continue
        t, hw, lso = s
        part = {"partition": 0, "leader": 1, "leader_epoch": 1, "isr": [1, 2, 3],
                "hw": hw, "lso": lso}
        rows.append({"op": op, "index": op + 1, "process": "monitor", "f": "cluster-state",
                     "type": "ok", "inv": {"trigger": "period"},
                     "done": {"answering": {"1": True}, "partitions": {"t": [part]}},
                     "invoke_time": int(t * S), "time": int(t * S) + 1000})
    for f, a, b in nemesis:
        op += 2
        rows.append({"op": op, "index": None if b is None else op + 1, "process": "nemesis",
                     "f": f, "type": "ok" if b is not None else "pending", "inv": {},
                     "done": {}, "invoke_time": int(a * S),
                     "time": None if b is None else int(b * S)})
    return rows


def _stuck(seconds: float, start: float = 0.0, lso: int = 40) -> list[tuple[float, int, int]]:
    """Samples every 0.5 s for ``seconds`` with the LSO held at ``lso`` and the HW rising."""
    return [(start + i / 2, lso + 10 + i, lso) for i in range(int(seconds * 2) + 1)]


def _hanging(samples, nemesis=(), config=None) -> dict:
    rec = evidence.build(_rows(samples, nemesis), {"1": {"name": "n1"}}, config or {})
    return liveness.hanging(rec, config or {})


def test_the_bound_is_the_transaction_timeout_plus_the_abort_check_and_slack():
    assert liveness.bound_s({}) == 30.0
    assert liveness.bound_s({"txn_timeout_ms": 60000, "broker_properties": {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}}) == 71.0


def test_an_lso_stuck_past_the_bound_with_no_fault_is_a_hanging_transaction():
    found = _hanging([(0.0, 30, 30), *_stuck(35, start=0.5)])
    assert found["count"] == 1
    [ex] = found["examples"]
    assert (ex["partition"], ex["lso"], ex["hw"], ex["at_s"], ex["bound_s"]) == (
        "t-0", 40, 120, [0.5, 35.5], 30.0)
    assert ex["quiet_s"] == 35.0
    # an LSO that moves on within the bound, or reaches the HW, is no case
    moving = [(i / 2, 100 + i, 50 + i // 40) for i in range(80)]
    assert _hanging(moving)["count"] == 0
    assert _hanging([(i / 2, 100, 100) for i in range(100)])["count"] == 0
    assert _hanging(_stuck(29))["count"] == 0


def test_time_with_a_fault_active_does_not_count_and_the_heal_restarts_the_clock():
    # stuck 50 s, a partition from 5 s to 30 s: 25 s quiet, below the bound
    samples = _stuck(50)
    assert _hanging(samples, [("partition", 5, 5.1), ("heal", 30, 30.1)])["count"] == 0
    # healed at 10 s: 39.9 s quiet in one stretch (the 5 s before the fault is another)
    [ex] = _hanging(samples, [("partition", 5, 5.1), ("heal", 10, 10.1)])["examples"]
    assert math.isclose(ex["quiet_s"], 50 - 10.1, abs_tol=0.01)
    # a kill is ended by a start, not by a heal; heal-all ends anything; one never ended
    # keeps the rest of the run disturbed
    kill = [("kill", 5, 5.1), ("heal", 6, 6.1), ("start", 40, 40.2)]
    assert _hanging(samples, kill)["count"] == 0
    assert _hanging(samples, [("kill", 5, 5.1), ("heal-all", 6, 6.1)])["count"] == 1
    assert _hanging(samples, [("pause", 10, 10.1)])["count"] == 0
    assert liveness.disturbed([(2, "pause", 10 * S, None)]) == [(10 * S, math.inf)]


def test_a_gap_in_the_samples_splits_a_stretch_only_where_the_lso_may_have_gone_back():
    """Issue 49, class 8: a 56 s hang with one 6 s monitor gap, the same LSO on both sides,
    was two stretches judged apart and never found. An LSO only moves forward until a
    truncation: without a leader change (or an unseen election, a power loss) in the gap,
    it stayed where it was."""
    samples: list = list(_stuck(56))
    for i in range(40, 52):  # 6 s without a sample in the middle
        samples[i] = None
    [ex] = _hanging(samples)["examples"]
    assert ex["at_s"] == [0.0, 56.0] and ex["quiet_s"] == 56.0
    # the other side of the gap under a new leader: the log may have been truncated there
    rows = _rows(samples)
    for r in rows[40:]:
        r["done"]["partitions"]["t"][0].update(leader=2, leader_epoch=2)
    rec = evidence.build(rows, {"1": {"name": "n1"}, "2": {"name": "n2"}}, {})
    assert liveness.hanging(rec, {})["count"] == 0
    # so with the same leader two epochs on (elections the monitor never saw)
    for r in rows[40:]:
        r["done"]["partitions"]["t"][0].update(leader=1, leader_epoch=3)
    rec = evidence.build(rows, {"1": {"name": "n1"}, "2": {"name": "n2"}}, {})
    assert liveness.hanging(rec, {})["count"] == 0
    # a sample without the offsets (its leader did not answer) is no sample of them
    rows = _rows(_stuck(50))
    for r in rows[40:60]:
        del r["done"]["partitions"]["t"][0]["lso"]
    rec = evidence.build(rows, {"1": {"name": "n1"}}, {})
    assert len(rec.offsets[("t", 0)]) == len(rows) - 20
    assert liveness.hanging(rec, {})["count"] == 1


def test_the_bound_asks_for_one_stretch_with_no_fault_active_longer_than_itself():
    """Issue 49, class 8: a 40 s hang interrupted by a kill from 20 s to 23 s summed 37 s of
    quiet time against the 30 s bound; each stretch alone (20 s, 17 s) is within it."""
    kill = [("kill", 20, 20.05), ("start", 23, 23.05)]
    assert _hanging(_stuck(40), kill)["count"] == 0
    [ex] = _hanging(_stuck(60), kill)["examples"]
    assert math.isclose(ex["quiet_s"], 60 - 23.05, abs_tol=0.01)


def test_a_runtime_setting_is_no_fault_and_excuses_no_hang():
    """Issue 49, class 8: unclean-on ... unclean-off counted as a fault, so a 35 s hang
    across it was never found."""
    toggle = [("unclean-on", 5, 5.05), ("unclean-off", 30, 30.05)]
    assert _hanging(_stuck(35), toggle)["count"] == 1
    assert liveness.disturbed([(1, "unclean-on", 10, 11), (2, "unclean-off", 50, 60)]) == []


def test_the_faults_it_knows_end_as_the_nemesis_packages_say():
    """For every package of the fault catalogue, a start is active until its package's stop
    completes, not only while its own op runs, or a new fault would count as quiet time
    while it is active."""
    from kafka_chaos.catalogue.faults import PACKAGES

    for name, pkg in PACKAGES.items():
        for f in pkg.start:
            # (index, f, invoked ns, completed ns): the start, then its stop much later
            ops = [(1, f, 10, 11), (2, pkg.stop, 50, 60)]
            # a runtime setting stops nothing: no fault
            expected = [] if name == "unclean" else [(10, 60)]
            assert liveness.disturbed(ops) == expected, (name, f)


def test_an_attached_clusters_unknown_abort_check_leaves_a_finding_unexplained():
    """A cluster the run attached to keeps its own abort check interval: a finding against
    Kafka's default bound is unknown, not a violation, unless the run says what it is."""
    assert liveness.doubt({"backend": "local"}) is None
    assert "unknown" in liveness.doubt({"backend": "docker-attach"})
    assert liveness.doubt({"backend": "ssh-attach", "broker_properties": {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000"}}) is None
    found = _hanging(_stuck(35), config={"backend": "external"})
    assert found["count"] == 1 and "assumed Kafka's default 10000 ms" in found["doubt"]
    config = {"backend": "external"}
    rec = evidence.build(_rows(_stuck(35), ()), {"1": {"name": "n1"}}, config)
    found = {liveness.NAME: liveness.hanging(rec, config)}
    reasons = judge.judge(None, found, promises.facts_of(config, rec), rec)
    a = found[liveness.NAME]
    assert a["outcomes"] == {"permitted": 0, "violation": 0, "unexplained": 1}, a
    assert reasons == [f"1 hanging-transaction finding(s) unexplained: {a['doubt']}"]
    found = {liveness.NAME: liveness.hanging(rec, {"backend": "local"})}
    judge.judge(None, found, promises.facts_of({"backend": "local"}, rec), rec)
    assert found[liveness.NAME]["outcomes"]["violation"] == 1


def _late_rows(overtaken_by: dict, by_api: int = 1, behind: bool = False,
               answer: str | None = "none") -> list[dict]:
    """A partition whose LSO stops at 40 from 0.5 s for 35 s, after a proxy ``hold`` fault
    (invoked at 0.1 s) whose heal (0.28 s to 0.32 s) forwarded one Produce of t-0 at 0.3 s;
    ``by_api`` Produce requests held in all (only the first is listed). ``behind``: the
    sample at 0.5 s already has offset 40 below its HW but an older transaction open at 35,
    so the LSO stops at 40 only from 1 s. ``answer``: the leader's to the Produce (None:
    not recorded)."""
    rows = [{"op": 0, "index": 1, "process": "monitor", "f": "cluster-state", "type": "ok",
             "inv": {}, "invoke_time": 0, "time": 1000, "done": {
                 "answering": {"1": True}, "partitions": {"t": [
                     {"partition": 0, "leader": 1, "leader_epoch": 1, "isr": [1],
                      "hw": 30, "lso": 30}]}}}]
    fault = {"id": 1, "fault": "hold", "apis": ["Produce"]}
    request = {"api": "Produce", "client": "kc-p0", "broker": 1, "received_ns": S // 10,
               "forwarded_ns": 3 * S // 10, "partitions": ["t-0"], "overtaken_by": overtaken_by,
               **({} if answer is None else {"errors": {"t-0": answer}})}
    rows.append({"op": 2, "index": 3, "process": "nemesis", "f": "request-fault", "type": "ok",
                 "inv": {"request": {"fault": "hold"}}, "done": fault,
                 "invoke_time": S // 10, "time": S // 10 + 1000})
    rows.append({"op": 4, "index": 5, "process": "nemesis", "f": "request-heal", "type": "ok",
                 "inv": None, "done": {"ended": [{**fault, "applied": by_api,
                                                   "by_api": {"Produce": by_api},
                                                   "requests": [request]}]},
                 "invoke_time": 28 * S // 100, "time": 32 * S // 100})
    for i, (t, hw, lso) in enumerate(_stuck(35, start=0.5)):
        lso = 35 if behind and i == 0 else lso
        part = {"partition": 0, "leader": 1, "leader_epoch": 1, "isr": [1], "hw": hw, "lso": lso}
        rows.append({"op": 10 * (i + 1), "index": 10 * (i + 1) + 1, "process": "monitor",
                     "f": "cluster-state", "type": "ok", "inv": {}, "invoke_time": int(t * S),
                     "time": int(t * S) + 1000,
                     "done": {"answering": {"1": True}, "partitions": {"t": [part]}}})
    return rows


OFF = {"backend": "local", "broker_properties": {promises.VERIFICATION: "false"}}


def _judged(rows: list[dict], config: dict) -> tuple[dict, evidence.Record, list[str]]:
    rec = evidence.build(rows, {"1": {"name": "n1"}}, config)
    found = {liveness.NAME: liveness.hanging(rec, config)}
    reasons = judge.judge(None, found, promises.facts_of(config, rec), rec)
    return found[liveness.NAME], rec, reasons


def test_a_hanging_transaction_is_permitted_only_by_a_late_produce_without_verification():
    """KIP-890: with transaction.partition.verification.enable=false, a stuck LSO is
    permitted when the proxy forwarded a Produce of the partition after its client's
    EndTxn or InitProducerId, between the last sample before the stuck LSO and the first
    showing it. A Produce not overtaken by either, verification on, or a fault that kept
    more Produce requests than it lists decides otherwise."""
    a, rec, reasons = _judged(_late_rows({"EndTxn": 2 * S // 10}), OFF)
    assert a["outcomes"] == {"permitted": 1, "violation": 0, "unexplained": 0}, a
    [ex] = a["examples"]
    assert ex["rule"] == "no-partition-verification" and reasons == []
    assert (ex["evidence"]["event"], ex["evidence"]["client"], ex["evidence"]["after"],
            ex["evidence"]["at_s"]) == ("late-produce", "kc-p0", ["EndTxn"], [0.3, 0.3])
    [stuck] = rec.of(("t", 0), evidence.LSO_STUCK, 0, evidence.END)
    assert (stuck.lo, stuck.hi, stuck.facts["lso"]) == (11, evidence.END, 40)
    # the final reads ended at the stuck LSO: a record above it is unseen, and permitted
    facts = promises.facts_of(OFF, rec)
    unseen = promises.Case(("t", 0), 100, 600, offset=45, read_to=40)
    verdict = promises.judge_case("unseen", unseen, facts, rec)
    assert verdict["rule"] == "read-committed-behind-hanging-transaction", verdict
    for other in (dict(read_to=41), dict(offset=39, read_to=40), dict(offset=None)):
        verdict = promises.judge_case("unseen", promises.Case(("t", 0), 100, 600, **{
            "offset": 45, "read_to": 40, **other}), facts, rec)
        assert verdict["outcome"] == promises.VIOLATION, (other, verdict)

    # an older open transaction hid the stuck offset at first: it was written all the same
    # between the last sample whose HW was at or below it and the next
    a, _, _ = _judged(_late_rows({"InitProducerId": 2 * S // 10}, behind=True), OFF)
    assert a["outcomes"]["permitted"] == 1 and a["examples"][0]["at_s"][0] == 1.0, a
    a, _, _ = _judged(_late_rows({"Fetch": 2 * S // 10}), OFF)
    assert a["outcomes"]["violation"] == 1, a
    a, _, _ = _judged(_late_rows({"EndTxn": 2 * S // 10}), {"backend": "local"})
    assert a["outcomes"]["violation"] == 1, a
    a, _, reasons = _judged(_late_rows({"Fetch": 2 * S // 10}, by_api=3), OFF)
    assert a["outcomes"]["unexplained"] == 1 and "no-partition-verification" in reasons[0], a
    # the leader refused it (verification): no mechanism; its answer unknown: unexplained
    a, _, _ = _judged(_late_rows({"EndTxn": 2 * S // 10}, answer="invalid_txn_state"), OFF)
    assert a["outcomes"]["violation"] == 1, a
    a, _, _ = _judged(_late_rows({"EndTxn": 2 * S // 10}, answer=None), OFF)
    assert a["outcomes"]["unexplained"] == 1, a


def _marker_rows(hw_past_at: float = 2.0) -> list[dict]:
    """Partition t-0: node 1 leads in epoch 1 (its HW passes offset 40 at ``hw_past_at`` s),
    its ISR shrinks to itself, and from 6 s node 2, outside that ISR, leads in epoch 2 with
    its LSO held at 40 for 40 s while its HW rises."""
    rows = []
    for i in range(92):
        t = i / 2
        if t < 6:
            hw = 25 + (15 if t >= hw_past_at else 0) + i
            part = {"leader": 1, "leader_epoch": 1, "isr": [1] if t >= 4.5 else [1, 2, 3],
                    "hw": hw, "lso": hw}
        else:
            part = {"leader": 2, "leader_epoch": 2, "isr": [2], "hw": 45 + i, "lso": 40}
        rows.append({"op": 10 * (i + 1), "index": 10 * (i + 1) + 1, "process": "monitor",
                     "f": "cluster-state", "type": "ok", "inv": {}, "invoke_time": int(t * S),
                     "time": int(t * S) + 1000,
                     "done": {"answering": {"1": True, "2": True},
                              "partitions": {"t": [{"partition": 0, **part}]}}})
    return rows


UNCLEAN = {"backend": "local", "txn": True, "unclean_leader_election": True}


def _marker_judged(start_offset: int | None, hw_past_at: float = 2.0, logged_s: float = 5.75
                   ) -> tuple[dict, evidence.Record]:
    from kafka_chaos.analysis import kafka_log

    rec = evidence.build(_marker_rows(hw_past_at), {"1": {"name": "n1"}, "2": {"name": "n2"}},
                         UNCLEAN)
    if start_offset is not None:  # node 2's broker log: it took epoch 2 at ``logged_s``
        at = int(logged_s * S)
        kafka_log.narrow(rec, [
            kafka_log.Logged("unclean", ("t", 0), 2, 2, at - 50_000_000),
            kafka_log.Logged("leader", ("t", 0), 2, 2, at, start_offset, 45)], None)
    found = {liveness.NAME: liveness.hanging(rec, UNCLEAN)}
    judge.judge(None, found, promises.facts_of(UNCLEAN, rec), rec)
    return found[liveness.NAME], rec


def test_a_hanging_transaction_after_an_unclean_election_is_permitted_as_a_lost_marker():
    """KAFKA-20716: an unclean election can elect a replica holding a transaction's records
    without its COMMIT or ABORT marker, which the coordinator never writes again. Permitted
    only when the record shows it on that partition: the HW had passed the stuck offset
    before the election (the transaction's first record was written), and the new leader's
    broker log says its log already held that offset when it took the epoch. Without the
    broker log the election's reach is doubt (unexplained); a new leader whose log ended at
    or below the stuck offset, or an offset not yet written at the election, is a
    violation."""
    a, rec = _marker_judged(start_offset=46)
    assert a["outcomes"] == {"permitted": 1, "violation": 0, "unexplained": 0}, a
    [ex] = a["examples"]
    assert ex["rule"] == "unclean-election-lost-marker" and ex["lso"] == 40, ex
    e = ex["evidence"]
    assert (e["event"], e["from"], e["to"], e["start_offset"]) == ("leader-change", "n1", "n2", 46)
    # a record above the stuck LSO, unseen by the final reads that ended there: permitted
    facts = promises.facts_of(UNCLEAN, rec)
    verdict = promises.judge_case("unseen", promises.Case(("t", 0), 500, 900, offset=60,
                                                          read_to=40), facts, rec)
    assert verdict["rule"] == "read-committed-behind-lost-marker", verdict

    # the first stuck sample (6 s) named node 2 leader in epoch 2 before its own log did
    # (the monitor reads another broker's metadata): the election is that sample's
    a, _ = _marker_judged(start_offset=46, logged_s=6.03)
    assert a["outcomes"]["permitted"] == 1, a
    for start, past, outcome in ((40, 2.0, "violation"), (None, 2.0, "unexplained"),
                                 (46, 7.0, "violation")):
        a, _ = _marker_judged(start_offset=start, hw_past_at=past)
        assert a["outcomes"][outcome] == 1, (start, past, a)
