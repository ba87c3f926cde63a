"""The KRaft quorum's metadata checks (``analysis.quorum``) on hand-built monitor samples:
each anomaly found and not found, the bounds' edges, doubt after a power loss or a file
fault, histories from before the monitor recorded what they read, and a simulated correct
quorum that never gives a finding."""

from __future__ import annotations

import types

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.analysis import evidence, judge, promises, quorum
from kafka_chaos.analysis.explain import explain, explain_judged
from kafka_chaos.catalogue.anomalies import PROPERTIES
from kafka_chaos.verdict import RunVerdict

S = 1_000_000_000  # ns
NODES = {str(i): {"name": f"n{i}"} for i in range(1, 7)}
#: brokers 1-3 are the quorum's observers, controllers 4-6 its voters
BROKERS, VOTERS = (1, 2, 3), (4, 5, 6)


def ctl(leader: int, epoch: int, hw: int = -1, observers: dict | None = None,
        voters: dict | None = None) -> dict:
    """A sample's ``controller``: ``observers`` None leaves the field out (an older history);
    every voter and observer at ``hw`` unless given."""
    c = {"leader": leader, "epoch": epoch, "high_watermark": hw,
         "voters": {str(v): max(hw, 0) for v in VOTERS} if voters is None else voters}
    if observers is not None:
        c["observers"] = {str(k): v for k, v in observers.items()}
    return c


def value(controller: dict | None = None, epochs: dict | None = None,
          answering: tuple[int, ...] = (*BROKERS, *VOTERS)) -> dict:
    """A ``cluster-state`` sample's value (``nemesis.monitor``)."""
    v = {"answering": {str(n): n in answering for n in (*BROKERS, *VOTERS)},
         "partitions": {}, "controller": controller, "took_ms": 3}
    if epochs is not None:
        v["epochs"] = {str(b): {t: {str(p): e for p, e in parts.items()}
                                for t, parts in topics.items()} for b, topics in epochs.items()}
    return v


def rows(samples: list[tuple[float, dict]], nemesis=()) -> list[dict]:
    """History rows of monitor samples ``(time s, value)`` (each answered within 1 µs) and
    nemesis ops ``(f, invoke s, completion s or None[, type])``, indexes in time order."""
    lines = []  # (time ns, which row, "inv" | "done")
    out = []
    for t, v in samples:
        out.append({"process": "monitor", "f": "cluster-state", "type": "ok",
                    "inv": {"trigger": "period"}, "done": v, "invoke_time": int(t * S),
                    "time": int(t * S) + 1000})
    for f, a, b, *typ in nemesis:
        out.append({"process": "nemesis", "f": f, "type": typ[0] if typ else
                    ("ok" if b is not None else "pending"), "inv": {}, "done": {},
                    "invoke_time": int(a * S), "time": None if b is None else int(b * S)})
    for i, r in enumerate(out):
        lines.append((r["invoke_time"], i, "op"))
        if r["time"] is not None:
            lines.append((r["time"], i, "index"))
    for n, (_, i, key) in enumerate(sorted(lines)):
        out[i][key] = n
    for r in out:
        r.setdefault("index", None)
    return out


def record(samples, nemesis=(), config=None) -> evidence.Record:
    return evidence.build(rows(samples, nemesis), NODES, config or {})


def check(samples, nemesis=(), config=None) -> dict:
    return quorum.check(record(samples, nemesis, config), config or {})


def judged(found: dict, config: dict | None = None, rec=None) -> tuple[dict, list[str]]:
    """``found`` judged as the verdict judges it, and the unknown reasons."""
    rec = rec or evidence.Record()
    reasons = judge.judge(None, found, promises.facts_of(config or {}, rec), rec)
    return found, reasons


def every(t0: float, t1: float, step: float = 0.5) -> list[float]:
    return [round(t0 + i * step, 3) for i in range(int(round((t1 - t0) / step)) + 1)]


# --- quorum-split-brain -----------------------------------------------------------------

def test_two_leaders_in_one_epoch_are_a_split_brain_and_a_violation():
    samples = [(0.0, value(ctl(4, 2, 100))), (0.5, value(ctl(5, 2, 101))),
               (1.0, value(ctl(4, 2, 102)))]
    found = check(samples)
    brain = found[quorum.QUORUM_SPLIT_BRAIN]
    assert brain["count"] == 1 and "doubt" not in brain
    [ex] = brain["examples"]
    assert (ex["epoch"], ex["leaders"], ex["at_s"]) == (2, [4, 5], [0.0, 0.5])
    assert ex["indexes"][0] < ex["indexes"][1]
    assert explain(quorum.QUORUM_SPLIT_BRAIN, ex).startswith(
        "nodes 4 and 5 each answered as quorum leader in epoch 2 (first at 0.0 s and 0.5 s")
    out, reasons = judged(found)
    assert out[quorum.QUORUM_SPLIT_BRAIN]["outcomes"]["violation"] == 1 and reasons == []
    # a new leader in a new epoch is none; nor is one leader answering again
    samples = [(0.0, value(ctl(4, 2, 100))), (0.5, value(ctl(5, 3, -1))),
               (1.0, value(ctl(5, 3, 120))), (1.5, value(ctl(5, 3, 121)))]
    assert check(samples)[quorum.QUORUM_SPLIT_BRAIN]["count"] == 0


def test_a_split_brain_after_a_power_loss_is_unexplained_not_a_violation():
    samples = [(0.0, value(ctl(4, 2, 100))), (3.0, value(ctl(5, 2, 101)))]
    power = [("lose-unfsynced", 1.0, 1.5)]
    rec = record(samples, power)
    assert rec.power_losses
    found = quorum.check(rec, {})
    brain = found[quorum.QUORUM_SPLIT_BRAIN]
    assert brain["count"] == 1 and brain["doubtful"] == 1
    assert "a power loss (lose-unfsynced at 1.0 s)" in brain["examples"][0]["why"]
    out, reasons = judged(found, rec=rec)
    assert out[quorum.QUORUM_SPLIT_BRAIN]["outcomes"] == {"permitted": 0, "violation": 0,
                                                          "unexplained": 1}
    [reason] = reasons
    assert reason.startswith("1 quorum-split-brain finding(s) unexplained: a power loss")
    ex = out[quorum.QUORUM_SPLIT_BRAIN]["examples"][0]
    assert "; unexplained: a power loss" in explain_judged(quorum.QUORUM_SPLIT_BRAIN, ex)
    # one of unknown outcome too; one that failed took no power; one after it explains nothing
    assert quorum.check(record(samples, [("lose-unfsynced", 1.0, None)]), {})[
        quorum.QUORUM_SPLIT_BRAIN].get("doubtful") == 1
    assert "doubt" not in quorum.check(record(samples, [("lose-unfsynced", 1.0, 1.5, "fail")]),
                                       {})[quorum.QUORUM_SPLIT_BRAIN]
    assert "doubt" not in check(samples, [("lose-unfsynced", 4.0, 4.5)])[
        quorum.QUORUM_SPLIT_BRAIN]
    # a file fault damaged a broker's files: doubt as well
    filed = check(samples, [("bitflip", 1.0, 1.5), ("start", 2.0, 2.5)])
    assert "a file fault (bitflip at 1.0 s)" in filed[quorum.QUORUM_SPLIT_BRAIN]["doubt"]


def test_only_the_findings_in_doubt_are_unexplained():
    """Two split brains, one before a power loss and one after: a violation and an
    unexplained finding, the violation's example first."""
    samples = [(0.0, value(ctl(4, 2, 100))), (0.5, value(ctl(5, 2, 100))),
               (4.0, value(ctl(6, 3, 200))), (4.5, value(ctl(4, 3, 200)))]
    rec = record(samples, [("lose-unfsynced", 1.0, 1.5)])
    found = quorum.check(rec, {})
    out, reasons = judged(found, rec=rec)
    brain = out[quorum.QUORUM_SPLIT_BRAIN]
    assert brain["outcomes"] == {"permitted": 0, "violation": 1, "unexplained": 1}
    assert [ex["outcome"] for ex in brain["examples"]] == ["violation", "unexplained"]
    assert [ex["epoch"] for ex in brain["examples"]] == [2, 3]
    assert reasons[0].startswith("1 quorum-split-brain finding(s) unexplained")


# --- quorum-hw-regress ------------------------------------------------------------------

def test_a_high_watermark_below_an_earlier_one_of_an_epoch_not_above_is_a_regress():
    samples = [(0.0, value(ctl(4, 2, 812))), (0.5, value(ctl(5, 3, -1))),
               (1.0, value(ctl(5, 3, 700))), (1.5, value(ctl(5, 3, 690))),
               (2.0, value(ctl(5, 3, 900)))]
    regress = check(samples)[quorum.QUORUM_HW_REGRESS]
    assert regress["count"] == 1
    [ex] = regress["examples"]
    assert (ex["node"], ex["epoch"], ex["high_watermark"], ex["at_s"]) == (5, 3, 690,
                                                                            [1.0, 1.5])
    assert ex["earlier"] == {"node": 4, "epoch": 2, "index": ex["earlier"]["index"],
                             "at_s": 0.0, "high_watermark": 812}
    assert explain(quorum.QUORUM_HW_REGRESS, ex).startswith(
        "quorum leader 5 in epoch 3 reported high watermark 690 from 1.0 s to 1.5 s")
    # one leader's own high watermark going back is one too
    same = [(0.0, value(ctl(4, 2, 812))), (0.5, value(ctl(4, 2, 811)))]
    assert check(same)[quorum.QUORUM_HW_REGRESS]["count"] == 1


def test_an_unknown_high_watermark_and_a_stale_leaders_lower_one_are_no_regress():
    # -1 after an election is unknown, not 0; then it is at least the old one
    samples = [(0.0, value(ctl(4, 2, 812))), (0.5, value(ctl(5, 3, -1))),
               (1.0, value(ctl(5, 3, 812))), (1.5, value(ctl(5, 3, 830)))]
    assert check(samples)[quorum.QUORUM_HW_REGRESS]["count"] == 0
    # a deposed leader of an older epoch reporting its own lower watermark: the epoch check's
    samples = [(0.0, value(ctl(4, 2, 812))), (0.5, value(ctl(5, 3, 900))),
               (1.0, value(ctl(4, 2, 812)))]
    assert check(samples)[quorum.QUORUM_HW_REGRESS]["count"] == 0


# --- quorum-epoch-regress ---------------------------------------------------------------

def _stale(at: float) -> list[tuple[float, dict]]:
    """Leader 4 in epoch 2, leader 5 in epoch 3 first seen at 1.0 s, then leader 4 answering
    in epoch 2 again at ``at`` s."""
    return [(0.0, value(ctl(4, 2, 100))), (1.0, value(ctl(5, 3, -1))),
            (at, value(ctl(4, 2, 100)))]


def test_a_deposed_leader_answering_past_the_check_quorum_bound_is_an_epoch_regress():
    assert quorum.bound_s({}) == 4.0  # 1.5 x 2000 ms + 1 s
    assert quorum.bound_s({"broker_properties": {quorum.FETCH_TIMEOUT: "4000"}}) == 7.0
    # the stretch runs from the higher epoch's sample's completion to the stale one's invoke
    assert check(_stale(4.9))[quorum.QUORUM_EPOCH_REGRESS]["count"] == 0
    assert check(_stale(5.0))[quorum.QUORUM_EPOCH_REGRESS]["count"] == 0  # 3.999999 s
    found = check(_stale(5.1))[quorum.QUORUM_EPOCH_REGRESS]
    assert found["count"] == 1 and "doubt" not in found
    [ex] = found["examples"]
    assert (ex["node"], ex["epoch"], ex["higher"]["epoch"], ex["higher"]["node"],
            ex["higher"]["at_s"], ex["bound_s"]) == (4, 2, 3, 5, 1.0, 4.0)
    assert ex["after_s"] == 4.1  # 5.1 s - 1.000001 s, rounded to ms
    assert explain(quorum.QUORUM_EPOCH_REGRESS, ex).startswith(
        "node 4 answered as quorum leader in epoch 2 at 5.1 s")
    # the run's own fetch timeout sets the bound
    config = {"broker_properties": {quorum.FETCH_TIMEOUT: "4000"}}
    assert check(_stale(5.1), config=config)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 0
    assert check(_stale(8.1), config=config)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 1
    # samples of one stale leader and epoch are one finding
    more = _stale(5.1) + [(5.6, value(ctl(4, 2, 100))), (6.1, value(ctl(4, 2, 100)))]
    [ex] = check(more)[quorum.QUORUM_EPOCH_REGRESS]["examples"]
    assert ex["at_s"] == [5.1, 6.1]


def test_time_paused_or_under_a_clock_fault_does_not_count_toward_the_bound():
    # a pause from 0.5 s to its resume at 4.1 s: 1 s of quiet before the stale answer
    pause = [("pause", 0.5, 0.6), ("resume", 4.0, 4.1)]
    assert check(_stale(5.1), pause)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 0
    assert check(_stale(8.2), pause)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 1
    clock = [("clock-bump", 0.5, 0.6), ("clock-reset", 4.0, 4.1)]
    assert check(_stale(5.1), clock)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 0
    # a kill needs nothing: a restarted leader starts resigned
    kill = [("kill", 0.5, 0.6), ("start", 4.0, 4.1)]
    assert check(_stale(5.1), kill)[quorum.QUORUM_EPOCH_REGRESS]["count"] == 1


def test_an_epoch_regress_is_in_doubt_before_kafka_3_7_and_on_an_attached_cluster():
    old = check(_stale(6.0), config={"kafka_version": "3.6.2"})[quorum.QUORUM_EPOCH_REGRESS]
    assert old["doubtful"] == 1 and "KAFKA-15489" in old["doubt"]
    new = check(_stale(6.0), config={"kafka_version": "3.9.1"})[quorum.QUORUM_EPOCH_REGRESS]
    assert "doubt" not in new
    attached = check(_stale(6.0), config={"backend": "external"})[quorum.QUORUM_EPOCH_REGRESS]
    assert "is unknown" in attached["doubt"]
    told = {"backend": "external", "broker_properties": {quorum.FETCH_TIMEOUT: "2000"}}
    assert "doubt" not in check(_stale(6.0), config=told)[quorum.QUORUM_EPOCH_REGRESS]


# --- metadata-lag -----------------------------------------------------------------------

#: A kill at 2 s healed by the final heal-all completing at 10.2 s.
HEALED = [("kill", 2.0, 2.1), ("heal-all", 10.0, 10.2)]


def lagging(end: float = 45.0, caught_at: float | None = None, absent: bool = False,
            answering_after: float | None = None) -> list[tuple[float, dict]]:
    """Samples every 0.5 s to ``end`` s, leader 4 in epoch 2 with high watermark 800 + i at
    sample i; brokers 1 and 3 at it, broker 2 at 700 until ``caught_at`` s (absent from the
    observers after 10 s instead with ``absent``); broker 2 stops answering the monitor from
    ``answering_after`` s."""
    out = []
    for i, t in enumerate(every(0.0, end)):
        hw = 800 + i
        two = hw if caught_at is not None and t >= caught_at else 700
        gone = absent and two == 700 and t > 10.0  # an observer before the heal only
        observers = {1: hw, 3: hw} if gone else {1: hw, 2: two, 3: hw}
        silent = answering_after is not None and t >= answering_after
        out.append((t, value(ctl(4, 2, hw, observers), answering=tuple(
            n for n in (*BROKERS, *VOTERS) if not (silent and n == 2)))))
    return out


def test_a_broker_behind_the_quorum_30_s_after_the_final_heal_is_metadata_lag():
    found = check(lagging(), HEALED)[quorum.METADATA_LAG]
    assert found["count"] == 1 and "doubt" not in found and "not_judged" not in found
    [ex] = found["examples"]
    # the reference: the first sample after the heal (10.5 s, sample 21: hw 821)
    assert (ex["node"], ex["high_watermark"], ex["reference"]["at_s"], ex["healed_s"],
            ex["bound_s"], ex["end_offset"], ex["caught_up_s"]) == (2, 821, 10.5, 10.2, 30.0,
                                                                     700, None)
    assert ex["at_s"] == [10.5, 40.5]  # the first sample past 40.2 s judged it
    assert explain(quorum.METADATA_LAG, ex) == (
        "observer 2's metadata log did not reach offset 821, the quorum's high watermark at "
        f"10.5 s (sample {ex['reference']['index']}), within 30 s of the final heal at 10.2 s: "
        f"at 40.5 s (sample {ex['indexes'][1]}) it had reached offset 700")
    out, reasons = judged(check(lagging(), HEALED))
    assert out[quorum.METADATA_LAG]["outcomes"]["violation"] == 1 and reasons == []


def test_metadata_lag_bound_edges():
    # caught up at the last sample within the bound (invoked at 40.0 s <= 40.2 s): none
    assert check(lagging(caught_at=40.0), HEALED)[quorum.METADATA_LAG]["count"] == 0
    # only at the first past it: a finding that says when it caught up
    [ex] = check(lagging(caught_at=40.5), HEALED)[quorum.METADATA_LAG]["examples"]
    assert ex["caught_up_s"] == 40.5 and ex["end_offset"] > ex["high_watermark"]
    # absent from the observers counts as not caught up
    [ex] = check(lagging(absent=True), HEALED)[quorum.METADATA_LAG]["examples"]
    assert ex["end_offset"] is None and "absent from the quorum's voters and obs" in explain(
        quorum.METADATA_LAG, ex)
    # a fault that ends later moves the heal: healed at 20.1 s, judged at 50.5 s
    later = HEALED + [("partition", 15.0, 15.1), ("heal", 20.0, 20.1)]
    assert check(lagging(end=45.0), later)[quorum.METADATA_LAG]["count"] == 0
    [ex] = check(lagging(end=55.0), later)[quorum.METADATA_LAG]["examples"]
    assert ex["healed_s"] == 20.1 and ex["at_s"][1] == 50.5


def test_in_combined_mode_a_voter_behind_after_the_heal_is_metadata_lag():
    """Every broker a voter (no dedicated controllers, the tool's default): the observers
    are none, and each broker's metadata log is its node's voter's."""
    def combined(behind: int) -> list[tuple[float, dict]]:
        return [(t, value(ctl(1, 2, 800 + i, {}, voters={"1": 800 + i, "2": 800 + i,
                                                       "3": 800 + i - behind})))
                for i, t in enumerate(every(0.0, 45.0))]

    [ex] = check(combined(200), HEALED)[quorum.METADATA_LAG]["examples"]
    assert (ex["node"], ex["role"], ex["end_offset"], ex["high_watermark"]) == (
        3, "voter", 681, 821)
    assert explain(quorum.METADATA_LAG, ex).startswith("voter 3's metadata log did not reach")
    # a voter a sample behind is caught up long before the bound
    assert check(combined(1), HEALED)[quorum.METADATA_LAG] == {"count": 0, "examples": []}


def test_samples_that_end_within_the_bound_leave_metadata_lag_not_judged():
    short = check(lagging(end=35.0), HEALED)[quorum.METADATA_LAG]
    assert short["count"] == 0 and "within the 30 s bound, so not judged" in short["not_judged"]
    assert "node(s) [2]" in short["not_judged"]
    # every broker caught up before the samples end: judged, nothing found
    done = check(lagging(end=35.0, caught_at=20.0), HEALED)[quorum.METADATA_LAG]
    assert done == {"count": 0, "examples": []}
    # no sample after the final heal; a fault never healed
    none = check(lagging(end=9.5), HEALED)[quorum.METADATA_LAG]
    assert "no sample after the final heal at 10.2 s" in none["not_judged"]
    open_ = check(lagging(), [("kill", 2.0, 2.1), ("start", 5.0, None)])[quorum.METADATA_LAG]
    assert open_["count"] == 0 and "never ended" in open_["not_judged"]


def test_metadata_lag_of_a_silent_broker_or_after_a_power_loss_is_in_doubt():
    silent = check(lagging(answering_after=41.0), HEALED)[quorum.METADATA_LAG]
    assert silent["count"] == 1 and silent["doubtful"] == 1
    assert "node 2 did not answer the monitor at 41.0 s" in silent["doubt"]
    power = HEALED + [("lose-unfsynced", 5.0, 5.5)]
    lost = check(lagging(), power)[quorum.METADATA_LAG]
    assert lost["doubtful"] == 1 and "a power loss" in lost["doubt"]


# --- leader-epoch-regress ---------------------------------------------------------------

def test_a_brokers_own_leader_epoch_going_back_is_a_leader_epoch_regress():
    views = [{1: {"t": {0: 5, 1: 2}}, 2: {"t": {0: 4}}}, {1: {"t": {0: 3, 1: 2}}, 2: {"t": {0: 5}}},
             {1: {"t": {0: 3, 1: 3}}, 2: {"t": {0: 5}}}, {1: {"t": {0: 6, 1: 3}}}]
    samples = [(i / 2, value(ctl(4, 2, 10), epochs=v)) for i, v in enumerate(views)]
    found = check(samples)[quorum.LEADER_EPOCH_REGRESS]
    assert found["count"] == 1
    [ex] = found["examples"]
    assert (ex["node"], ex["partition"], ex["epoch"], ex["earlier"]["epoch"], ex["at_s"]) == (
        1, "t-0", 3, 5, [0.5, 1.0])
    assert explain(quorum.LEADER_EPOCH_REGRESS, ex).startswith(
        "broker 1's own view of t-0's leader epoch went back from 5 at 0.0 s")
    # brokers disagreeing (2 behind 1) and epochs that only grow are none
    grow = [{1: {"t": {0: 5}}, 2: {"t": {0: 3}}}, {1: {"t": {0: 5}}, 2: {"t": {0: 4}}},
            {1: {"t": {0: 7}}, 2: {"t": {0: 7}}}]
    samples = [(i / 2, value(ctl(4, 2, 10), epochs=v)) for i, v in enumerate(grow)]
    assert check(samples)[quorum.LEADER_EPOCH_REGRESS]["count"] == 0
    # after a power loss: in doubt
    views_ = [{1: {"t": {0: 5}}}, {1: {"t": {0: 3}}}]
    samples = [(i * 2.0, value(ctl(4, 2, 10), epochs=v)) for i, v in enumerate(views_)]
    assert check(samples, [("lose-unfsynced", 0.5, 1.0)])[
        quorum.LEADER_EPOCH_REGRESS]["doubtful"] == 1


# --- older histories, and nothing to check ----------------------------------------------

def test_an_older_history_crashes_nothing_and_says_what_it_could_not_check():
    # the controller as the monitor recorded it before observers and epochs
    old = [(t, value(ctl(4, 2, 100 + int(t)))) for t in every(0.0, 40.0)]
    found = check(old, HEALED)
    assert all(found[n]["count"] == 0 for n in quorum.NAMES)
    assert found[quorum.METADATA_LAG]["not_applicable"] == quorum.NO_OBSERVERS
    assert found[quorum.LEADER_EPOCH_REGRESS]["not_applicable"] == quorum.NO_EPOCHS
    assert "not_applicable" not in found[quorum.QUORUM_SPLIT_BRAIN]
    # no controller at all (null, or absent): nothing of the quorum to check
    for v in ({"answering": {}, "partitions": {}, "controller": None},
              {"answering": {}, "partitions": {}}):
        found = check([(t, v) for t in every(0.0, 5.0)], HEALED)
        assert all(found[n]["count"] == 0 and found[n]["not_applicable"] for n in quorum.NAMES)
        assert found[quorum.QUORUM_EPOCH_REGRESS]["not_applicable"] == quorum.NO_QUORUM
    # malformed values are skipped, not raised on
    odd = [(0.0, value({"leader": "x", "epoch": None})),
           (0.5, value({"leader": 4, "epoch": 2, "high_watermark": None, "voters": [1],
                        "observers": {"b": 3, "1": "x"}}, epochs={1: {"t": {"p": 1}}}))]
    found = check(odd)
    assert all(found[n]["count"] == 0 for n in quorum.NAMES)


def test_a_check_with_nothing_to_check_is_not_applicable_in_the_verdict_and_junit(tmp_path):
    from junitparser import JUnitXml

    from kafka_chaos.report import junit

    found = check([(t, value(None)) for t in every(0.0, 5.0)])
    anomalies = {n: {"count": 0, "examples": []} for n in PROPERTIES["lost writes"]}
    anomalies.update(found)
    result = RunVerdict.model_validate({"valid": True, "anomalies": anomalies})
    assert result.not_applicable == {n: [found[n]["not_applicable"]] for n in quorum.NAMES}
    # with the op counts too, the client-op reasons come first
    result = RunVerdict.model_validate({"valid": True, "anomalies": anomalies, "stats": {
        "by_f": {"send": {"ok": 1}, "poll": {"ok": 1}}}})
    assert result.not_applicable[quorum.QUORUM_SPLIT_BRAIN] == [quorum.NO_QUORUM]
    assert result.not_applicable["hanging-transaction"] == ["no transaction ran (--txn)"]
    junit.write(tmp_path, result, None)
    [suite] = list(JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    [case] = [c for c in suite if c.name == "metadata"]
    assert case.is_skipped and case.result[0].message.startswith("not applicable: the monitor")
    # one found is never not applicable
    anomalies[quorum.METADATA_LAG] = {"count": 1, "examples": [], "not_applicable": "x"}
    result = RunVerdict.model_validate({"valid": True, "anomalies": anomalies})
    assert quorum.METADATA_LAG not in result.not_applicable


# --- the verdict's wiring ---------------------------------------------------------------

def test_the_verdict_runs_the_quorum_checks_and_a_raise_marks_only_theirs(monkeypatch):
    from kafka_chaos.analysis import verdict

    rec = record(lagging(end=35.0), HEALED)
    monkeypatch.setattr(verdict.judge, "record", lambda h: rec)
    monkeypatch.setattr(verdict, "CHECKERS", {})
    monkeypatch.setattr(verdict, "EXAMPLES", {})
    monkeypatch.setattr(verdict, "summarize", lambda *a: {})
    h = types.SimpleNamespace(config={})
    reasons: list[str] = []
    anomalies = verdict._run_checkers(h, None, reasons, {})
    assert set(quorum.NAMES) <= set(anomalies) and "hanging-transaction" in anomalies
    assert [r for r in reasons if r.startswith("metadata-lag not judged: node(s) [2]")]

    def broken(rec, config):
        raise ValueError("bad sample")

    monkeypatch.setattr(verdict.quorum, "check", broken)
    reasons = []
    anomalies = verdict._run_checkers(h, None, reasons, {})
    assert all(anomalies[n]["count"] is None for n in quorum.NAMES)
    assert anomalies["hanging-transaction"]["count"] == 0
    assert reasons == [f"checker {'+'.join(quorum.NAMES)} raised: ValueError: bad sample"]


def test_the_example_cap_is_the_checkers():
    from kafka_chaos.analysis.checkers.common import MAX_EXAMPLES

    assert quorum.MAX_EXAMPLES == MAX_EXAMPLES
    samples = [(float(e), value(ctl(4 + e % 2, e, 10))) for e in range(1, 9)]
    samples += [(float(e) + 0.5, value(ctl(4 + (e + 1) % 2, e, 10))) for e in range(1, 9)]
    found = check(sorted(samples, key=lambda s: s[0]))[quorum.QUORUM_SPLIT_BRAIN]
    assert found["count"] == 8 and len(found["examples"]) == MAX_EXAMPLES


# --- a correct quorum never gives a finding ---------------------------------------------

@st.composite
def correct_runs(draw) -> list[tuple[float, dict]]:
    """Samples of a correct quorum and correct brokers, every 0.5 s: epochs that only grow,
    one leader per epoch, a high watermark unknown (-1) for a while after an election and
    never below the last known one after; a deposed leader answering once more within the
    bound; observers at most one sample behind; each broker's leader epochs only growing,
    each at most the cluster's."""
    n = draw(st.integers(1, 150))  # up to 75 s: past the metadata-lag bound
    steps = draw(st.lists(st.sampled_from(["write", "write", "elect", "stale", "quiet",
                                           "none"]), min_size=n, max_size=n))
    leader, epoch, hw, known = 4, 1, 0, 0
    views = {b: {("t", p): 1 for p in range(2)} for b in BROKERS}
    cluster = {("t", p): 1 for p in range(2)}
    observers = {b: 0 for b in BROKERS}
    last: tuple[int, int, int] | None = None  # the deposed leader, its epoch and HW
    elected = 0.0  # when the last election's first sample was
    out = []
    for i, step in enumerate(steps):
        t = i / 2
        if step == "write":
            known = max(known, 0) + draw(st.integers(0, 50))
            hw = known
        elif step == "elect":
            last, elected = (leader, epoch, hw), t
            leader = draw(st.sampled_from([v for v in VOTERS if v != leader]))
            epoch += 1
            hw = -1
            tp = ("t", draw(st.integers(0, 1)))
            cluster[tp] += draw(st.integers(1, 2))
        elif step == "quiet" and hw < 0:
            hw = known  # the new leader committed its first entry of the epoch
        # brokers apply the metadata in order, some later than others: one catches up
        caught = draw(st.sampled_from((*BROKERS, None)))
        if caught is not None:
            views[caught] = dict(cluster)
        if step == "none":
            out.append((t, value(None)))
            continue
        voters = {str(v): known for v in VOTERS}  # each voter's log holds what was known
        c = ctl(leader, epoch, hw, observers, voters)
        if step == "stale" and last is not None and t - elected <= 2.0:
            c = ctl(last[0], last[1], last[2], observers, voters)
            last = None
        out.append((t, value(c, epochs={b: {"t": {p: e for (_, p), e in v.items()}}
                                         for b, v in views.items()})))
        observers = {b: known for b in BROKERS}
    return out


@settings(max_examples=60, deadline=None)
@given(correct_runs())
def test_a_correct_quorum_never_gives_a_finding(samples):
    found = check(samples, [("kill", 0.1, 0.2), ("heal-all", 0.3, 0.4)])
    assert {n: found[n]["count"] for n in quorum.NAMES} == dict.fromkeys(quorum.NAMES, 0), found
    assert not any(found[n].get("doubt") for n in quorum.NAMES)
