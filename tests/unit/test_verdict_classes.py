"""Classes of wrong verdicts (issue 49), each on hand-built records, on both sides: the finding
permitted where the record shows its mechanism, a violation where no rule can have acted on
its partition, unexplained where the record cannot settle it (pure logic, no Spark).

1. an event permits only inside the window; one that straddles an edge is doubt, unless the
   broker log locates it inside, or shows the write acknowledged by a deposed leader;
2. a write a consumer had read was committed: acks below all cannot lose it;
3. an unseen election (a leader epoch gap) is doubt, never nothing;
4. ``acks=0`` promises nothing of a plain producer's writes;
5. a rule is a candidate only where its precondition held: on that topic, that partition, then;
6. a ``lose-unfsynced`` op of unknown outcome is doubt, and so is a power loss after a kill
   of unknown outcome;
9. a power loss that cut every replica needs no sample of the ISR before it;

and one the reference model found (``test_model_oracle.py``): a record hidden from
read_committed reads behind a transaction no marker ends, whose marker an election before
the record's window may have lost, is unexplained.

Class 7 is judged on whole histories (``test_verdict_defects.py``, ``test_owners.py``), class
8 in ``test_liveness.py``; classes 2, 3 and 4 also through the whole analysis in
``test_evidence.py``; the broker log's lines in ``test_kafka_log.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.analysis import evidence, kafka_log
from kafka_chaos.analysis.promises import (ACK_UNKNOWN, OPEN_TXN, PERMITTED, STRADDLES,
                                           UNEXPLAINED, UNSETTLED, VIOLATION, Case, facts_of,
                                           judge_case)
from kafka_chaos.config import RunConfig

NODES = {str(i): {"name": f"n{i}"} for i in (1, 2, 3)}
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)


class Rec:
    """Nemesis and monitor rows in index order (each op takes two indexes, ``unit_ns`` apart:
    1 ms unless said)."""

    def __init__(self, unit_ns: int = 1_000_000) -> None:
        self.rows: list[dict[str, Any]] = []
        self.unit_ns = unit_ns

    @property
    def at(self) -> int:
        """The next op's invoke index."""
        return 2 * len(self.rows)

    def _add(self, process: str, f: str, inv, done, type_: str = "ok") -> "Rec":
        op = self.at
        self.rows.append({"op": op, "index": None if type_ == "pending" else op + 1,
                          "process": process, "f": f, "type": type_, "inv": inv,
                          "done": done, "invoke_time": op * self.unit_ns,
                          "time": (op + 1) * self.unit_ns})
        return self

    def sample(self, **states: tuple) -> "Rec":
        """A monitor sample; ``t0=(leader, epoch, isr)`` and so on for t-0, t-1, u-0, or
        ``(leader, epoch, isr, hw, lso)``."""
        parts: dict[str, list] = {}
        for name, (leader, epoch, isr, *offsets) in states.items():
            topic, p = name[0], int(name[1:])
            parts.setdefault(topic, []).append({
                "partition": p, "leader": leader, "leader_epoch": epoch,
                "replicas": [1, 2, 3], "isr": isr, "elr": None,
                **(dict(zip(("hw", "lso"), offsets)) if offsets else {})})
        return self._add("monitor", "cluster-state", {"trigger": "period"},
                         {"partitions": parts})

    def nemesis(self, f: str, inv=None, done=None, type_: str = "ok") -> "Rec":
        return self._add("nemesis", f, inv, done, type_)

    def power_loss(self, cut: dict[str, list[str]], type_: str = "ok",
                   cut_ns: list[int] | None = None) -> "Rec":
        """A ``lose-unfsynced`` op: node name -> the partitions ("t-0") it cut; ``cut_ns``:
        the span the op says each node died in."""
        done = {"lost": {n: {"logs": {f"{p}/00000000000000000000.log": 100 for p in ps},
                             **({"cut_ns": cut_ns} if cut_ns else {})}
                         for n, ps in cut.items()}}
        return self.nemesis("lose-unfsynced", {"target": "one"},
                            done if type_ == "ok" else None, type_)

    def build(self, logged: list[kafka_log.Logged] | None = None,
              **config: Any) -> tuple[evidence.Record, dict]:
        full = RunConfig(**config).model_dump(mode="json")
        rec = evidence.build(self.rows, NODES, full)
        if logged:
            kafka_log.narrow(rec, logged, None)
        return rec, facts_of(full, rec)


def judged(rec_facts, tp, lo, hi, name="lost-write", writer_f="send", **case) -> dict:
    rec, facts = rec_facts
    return judge_case(name, Case(tp, lo, hi, write=(lo - 1, lo), writer_f=writer_f, **case),
                      facts, rec)


# --- 1. inside the window, or doubt -------------------------------------------------------

def _change(before_send: bool, after_read: bool, unit_ns: int = 1_000_000
            ) -> tuple[Rec, int, int, int]:
    """n1 leads t-0 at epoch 1, n2 at epoch 2; the write is sent at ``send``, acknowledged at
    ``lo``, missed by a read at ``hi``; the last sample of epoch 1 comes before the send or
    after the acknowledgement, the first of epoch 2 before or after the read."""
    r = Rec(unit_ns).sample(t0=(1, 1, [1, 2, 3]))
    send = r.at
    r.nemesis("clock-reset")  # an op of the record's: the send's invoke
    lo = r.at
    r.nemesis("clock-reset")  # its acknowledgement
    if not before_send:
        r.sample(t0=(1, 1, [1, 2, 3]))
    if not after_read:
        r.sample(t0=(2, 2, [2, 3]))
    hi = r.at
    r.nemesis("clock-reset")  # the read's invoke
    r.sample(t0=(2, 2, [2, 3]))
    return r, send, lo, hi


@pytest.mark.parametrize("before_send, after_read, outcome", [
    (False, False, PERMITTED),     # the election lies between the ack and the read
    (True, False, UNEXPLAINED),    # it may have come before the write was even sent
    (False, True, UNEXPLAINED),    # it may have come after the read began
    (True, True, UNEXPLAINED),
])
def test_an_election_permits_only_inside_the_window_and_a_straddling_one_is_doubt(
        before_send, after_read, outcome):
    r, send, lo, hi = _change(before_send, after_read)
    rec, facts = r.build(acks="1", idempotence=False)
    verdict = judge_case("lost-write", Case(T0, lo, hi, write=(send, lo), writer_f="send"),
                         facts, rec)
    assert verdict["outcome"] == outcome, verdict
    if outcome == UNEXPLAINED:
        assert verdict["why"] == STRADDLES


UNIT = 100_000_000  # 100 ms per index: the broker log's margin (20 ms) is finer


@pytest.mark.parametrize("logged_at, offset, outcome, why", [
    (5.5, 100, PERMITTED, None),        # n2 took epoch 2 after the delivery report, at 100
    (5.5, 120, PERMITTED, None),        # ... the write at 120 was above its log end
    (5.5, 99, PERMITTED, None),         # its log reached 99: maybe another record there
    (3.0, 100, UNEXPLAINED, ACK_UNKNOWN),  # between the send and its delivery report
    (0.5, 100, VIOLATION, None),        # n2 led before the write was sent: no loss by it
])
def test_the_broker_log_locates_an_election_the_samples_only_bracket(
        logged_at, offset, outcome, why):
    """The samples bracket the election from before the send to after the acknowledgement
    (doubt by themselves); n2's log says when it took epoch 2 and from which offset."""
    r, send, lo, hi = _change(before_send=True, after_read=False, unit_ns=UNIT)
    logged = [kafka_log.Logged("leader", T0, 2, 2, int(logged_at * UNIT), 100, 90, (2, 3))]
    rec, facts = r.build(logged, acks="1", idempotence=False)
    ack_ns = int((lo + 0.5) * UNIT)
    verdict = judge_case("lost-write", Case(T0, lo, hi, write=(send, lo), writer_f="send",
                                            offset=offset, ack_ns=ack_ns), facts, rec)
    assert (verdict["outcome"], verdict["why"]) == (outcome, why), verdict
    if outcome == PERMITTED:
        assert verdict["evidence"].facts["start_offset"] == 100
        assert verdict["evidence"].lo_ns > ack_ns


def test_a_log_line_of_another_leader_epoch_or_partition_locates_nothing():
    r, send, lo, hi = _change(before_send=True, after_read=False, unit_ns=UNIT)
    for logged in ([kafka_log.Logged("leader", T0, 2, 3, int(5.5 * UNIT), 100)],
                   [kafka_log.Logged("leader", T0, 3, 2, int(5.5 * UNIT), 100)],
                   [kafka_log.Logged("leader", T1, 2, 2, int(5.5 * UNIT), 100)]):
        rec, facts = r.build(logged, acks="1", idempotence=False)
        verdict = judge_case("lost-write", Case(T0, lo, hi, write=(send, lo), writer_f="send",
                                                offset=100, ack_ns=int((lo + .5) * UNIT)),
                             facts, rec)
        assert (verdict["outcome"], verdict["why"]) == (UNEXPLAINED, STRADDLES), logged


@pytest.mark.parametrize("deposed_at, deposed_offset, restarted, start, cut, outcome", [
    (7.0, 130, False, 100, None, PERMITTED),  # n1 still led when it acknowledged 120
    (7.0, 115, False, 100, None, VIOLATION),  # its log ended below 120 when it stepped down
    (6.0, 130, False, 100, None, VIOLATION),  # it had stepped down before the delivery report
    (7.0, 130, True, 100, None, VIOLATION),   # it restarted meanwhile: it acknowledged nothing
    # n2 began from its own longer tail (it never truncated, acks1-leader-move on 3.9.2): it
    # held another record at 120 only if n1's log, once deposed, diverged from it below 120
    (7.0, 130, False, 200, None, VIOLATION),
    (7.0, 130, False, 200, 110, PERMITTED),
    (7.0, 130, False, 200, 125, VIOLATION),
])
def test_a_deposed_leader_acknowledges_alone_until_its_log_says_it_learned(
        deposed_at, deposed_offset, restarted, start, cut, outcome):
    """n2 took epoch 2 at 0.15 s from offset ``start``; the write at offset 120, sent at
    0.4 s, was acknowledged by 0.65 s: by n2, or by n1 still leading in its own view
    (acks=1). ``cut``: the offset n1's log says it truncated to after it began to follow."""
    r = Rec(UNIT).sample(t0=(1, 1, [1, 2, 3])).sample(t0=(2, 2, [2, 3]))
    send = r.at
    r.nemesis("clock-reset")
    lo = r.at
    r.nemesis("clock-reset").sample(t0=(2, 2, [2, 3]))
    hi = r.at
    r.nemesis("clock-reset").sample(t0=(2, 2, [2, 3]))
    logged = [kafka_log.Logged("leader", T0, 1, 1, 0, 0, 0, (1, 2, 3)),
              kafka_log.Logged("leader", T0, 2, 2, int(1.5 * UNIT), start, 90, (2, 3)),
              kafka_log.Logged("follower", T0, 2, 1, int(deposed_at * UNIT), deposed_offset, 90)]
    if cut is not None:
        logged.append(kafka_log.Logged("truncated", T0, -1, -1, int(7.5 * UNIT), cut,
                                       node="n1"))
    if restarted:
        logged.insert(2, kafka_log.Logged("start", None, -1, -1, int(5.2 * UNIT), node="n1"))
    rec, facts = r.build(logged, acks="1", idempotence=False)
    verdict = judge_case("lost-write", Case(T0, lo, hi, write=(send, lo), writer_f="send",
                                            offset=120, ack_ns=int(6.5 * UNIT)), facts, rec)
    assert verdict["outcome"] == outcome, verdict


@pytest.mark.parametrize("toggled, logged, outcome", [
    ("before", False, PERMITTED),      # on for the whole stretch the election lies in
    ("inside", False, UNEXPLAINED),    # turned on while the election may already have happened
    ("inside", True, PERMITTED),       # ... but the controller logged it unclean
    ("after", False, VIOLATION),       # turned on after the election was seen
])
def test_an_unclean_election_straddling_its_toggle_is_doubt_unless_kafka_logged_it(
        toggled, logged, outcome):
    r = Rec(UNIT).sample(t0=(1, 1, [1]))
    on = lambda: r.nemesis("unclean-on", {"target": "topic", "topic": "t"},  # noqa: E731
                           {"topic": "t"})
    if toggled == "before":
        on()
    lo = r.at
    r.sample(t0=(1, 1, [1]))
    if toggled == "inside":
        on()
    at = r.at
    r.sample(t0=(2, 2, [2]))  # n2 was out of the ISR [n1]
    if toggled == "after":
        on()
    hi = r.at
    r.sample(t0=(2, 2, [2]))
    lines = [kafka_log.Logged("unclean", T0, 2, 2, int((at - 0.8) * UNIT)),
             kafka_log.Logged("leader", T0, 2, 2, int((at - 0.6) * UNIT), 50, 40, (2,))]
    verdict = judged(r.build(lines if logged else None), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict


@pytest.mark.parametrize("cut_at, outcome", [
    (None, UNEXPLAINED),     # the op's whole span: n1 may have died before the ack
    (0.45, PERMITTED),       # n1 died after the delivery report, within the op
    (0.41, UNEXPLAINED),     # ... or before it: someone else may have acknowledged it
])
def test_a_power_loss_is_located_where_the_op_says_its_node_died(cut_at, outcome):
    """The lone in-sync replica n1 loses power in an op from 0.4 s to 0.5 s; the write was
    acknowledged at 0.42 s, within the op."""
    r = Rec(UNIT).sample(t0=(1, 1, [1]))
    send = r.at
    r.nemesis("clock-reset")  # the send's invoke
    r.power_loss({"n1": ["t-0"]}, cut_ns=None if cut_at is None else
                 [int(cut_at * 1e9), int((cut_at + 0.01) * 1e9)])
    lo = r.at - 1  # the op's completion: the first of the record's ops after the ack
    r.sample(t0=(2, 2, [2]))
    hi = r.at
    r.sample(t0=(2, 2, [2]))
    rec, facts = r.build(replication_factor=3)
    verdict = judge_case("lost-write", Case(T0, lo, hi, write=(send, lo), writer_f="send",
                                            offset=5, ack_ns=420_000_000), facts, rec)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["rule"] == "last-in-sync-replica-lost-power"


# --- 2. a write a consumer had read ---------------------------------------------------------

@pytest.mark.parametrize("config, change, read_before, outcome, rule", [
    ({"acks": "1"}, (2, 2, [2, 3]), False, PERMITTED, "acks-below-all"),
    ({"acks": "1"}, (2, 2, [2, 3]), True, VIOLATION, None),  # clean: n2 had it
    ({"acks": "1", "unclean_leader_election": True}, (3, 2, [3]), True, PERMITTED,
     "unclean-leader-election"),  # n3 was out of the ISR [n1]: it never had it
    ({"acks": "1", "unclean_leader_election": True}, (2, 2, [2, 3]), True, VIOLATION, None),
])
def test_a_write_a_consumer_read_is_lost_only_by_an_unclean_election_or_a_power_loss(
        config, change, read_before, outcome, rule):
    """Issue 49, class 2: a record a consumer read was below the high watermark, so on every
    in-sync replica; a clean election keeps it, whatever acks said."""
    isr = [1] if change[0] == 3 else [1, 2, 3]
    r = Rec().sample(t0=(1, 1, isr))
    lo = r.at
    r.sample(t0=(1, 1, isr)).sample(t0=change)
    hi = r.at
    r.sample(t0=change)
    verdict = judged(r.build(idempotence=False, **config), T0, lo, hi, read_before=read_before)
    assert (verdict["outcome"], verdict["rule"]) == (outcome, rule), verdict
    # unseen too; other truncation anomalies are not about one write
    verdict = judged(r.build(idempotence=False, **config), T0, lo, hi, "unseen",
                     read_before=read_before)
    assert verdict["outcome"] == outcome


def test_a_power_loss_still_explains_a_write_a_consumer_had_read():
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.power_loss({n: ["t-0"] for n in ("n1", "n2", "n3")})
    hi = r.at
    r.sample(t0=(1, 2, [1, 2, 3]))
    verdict = judged(r.build(acks="1", idempotence=False), T0, lo, hi, read_before=True)
    assert verdict["rule"] == "last-in-sync-replica-lost-power", verdict


@pytest.mark.parametrize("cut, acks, read_before, stale, outcome", [
    ("n1", "1", False, False, PERMITTED),  # the leader failed before a follower had it
    ("n1", "1", True, False, VIOLATION),   # a consumer read it: n2 had it, and did not fail
    ("n2", "1", False, False, VIOLATION),  # a follower's power loss fails no leader
    ("n1", "all", False, False, VIOLATION),
    # the ISR was read only before the write: it may have shrunk to n1, whose power loss
    # then lost what the consumer read (acks=1) or what n1 acknowledged alone (acks=all
    # with min.insync.replicas=1)
    ("n1", "1", True, True, UNEXPLAINED),
    ("n1", "all", False, True, UNEXPLAINED),
    ("n2", "1", True, True, VIOLATION),    # an ISR holds its leader: n1 ran on
])
def test_an_acks_1_write_is_lost_with_its_leader_s_power(cut, acks, read_before, stale,
                                                         outcome):
    """``bench/model_oracle.py --seed 16``'s disagreement (2026-11-29): the leader n1 lost
    power with an acks=1 write no follower had fetched, and came back leading without it; no
    leader change, and the ISR the last sample named (n1, n2) did not all lose power. The
    producer docs for acks=1: "should the leader fail immediately after acknowledging the
    record but before the followers have replicated it then the record will be lost"."""
    r = Rec().sample(t0=(1, 1, [1, 2]))
    lo = r.at
    if not stale:
        r.sample(t0=(1, 1, [1, 2]))  # the sample right before the op, after the write
    r.power_loss({cut: ["t-0"]})
    r.sample(t0=(1, 2, [1]))
    hi = r.at
    r.sample(t0=(1, 2, [1]))
    verdict = judged(r.build(acks=acks, min_insync_replicas=1, idempotence=False), T0, lo,
                     hi, read_before=read_before)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert (verdict["rule"], verdict["evidence"].kind) == ("acks-below-all", "power-loss")


# --- 3. an unseen election ------------------------------------------------------------------

@pytest.mark.parametrize("after, outcome", [
    ((1, 1, [1, 2, 3]), VIOLATION),   # the same epoch: no election
    ((2, 2, [2, 3]), PERMITTED),      # a leader change the monitor saw
    ((1, 3, [1, 2, 3]), UNEXPLAINED),  # the same leader two epochs on: away and back unseen
    ((3, 4, [1, 2, 3]), PERMITTED),   # a leader change, some elections unseen: still seen
])
def test_an_epoch_gap_is_an_election_the_monitor_missed(after, outcome):
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.sample(t0=(1, 1, [1, 2, 3])).sample(t0=after)
    hi = r.at  # the read that misses the write, before the last sample
    r.sample(t0=after)
    verdict = judged(r.build(acks="1", idempotence=False), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict
    if outcome == UNEXPLAINED:
        assert verdict["why"] == UNSETTLED and verdict["blind"][:2] == (2, 5)


def test_an_unseen_election_is_doubt_for_unclean_election_only_where_it_was_on():
    def record(topic):
        r = Rec().sample(t0=(1, 1, [1]))
        if topic:
            r.nemesis("unclean-on", {"target": "topic", "topic": topic}, {"topic": topic})
        lo = r.at
        r.sample(t0=(1, 1, [1])).sample(t0=(1, 3, [1])).sample(t0=(1, 3, [1]))
        return r, lo
    for topic, outcome in (("t", UNEXPLAINED), ("u", VIOLATION), (None, VIOLATION)):
        r, lo = record(topic)
        verdict = judged(r.build(), T0, lo, r.at)
        assert verdict["outcome"] == outcome, (topic, verdict)
    r, lo = record("t")
    events = r.build()[0].of(T0, evidence.UNSEEN, 0, evidence.END)
    assert [e.facts for e in events] == [{"epochs": [1, 3], "leaders": [1, 1]}]
    assert events[0].as_json({1: "n1"})["leaders"] == ["n1", "n1"]


# --- 4. acks=0 ------------------------------------------------------------------------------

@pytest.mark.parametrize("acks, writer_f, outcome", [
    ("0", "send", PERMITTED),   # the producer never learnt whether the leader had it
    ("1", "send", VIOLATION),   # the leader had it; nothing in the record lost it
    ("0", "txn", VIOLATION),    # a transaction's writes are acks=all whatever the setting
])
@pytest.mark.parametrize("name", ["lost-write", "unseen"])
def test_acks_0_promises_nothing_of_a_plain_producers_writes(acks, writer_f, outcome, name):
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.sample(t0=(1, 1, [1, 2, 3]))
    hi = r.at
    r.sample(t0=(1, 1, [1, 2, 3]))
    verdict = judged(r.build(acks=acks, idempotence=False), T0, lo, hi, name, writer_f)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["rule"] == "acks-0" and verdict["evidence"] is None


# --- 5. candidacy per topic, partition and time ---------------------------------------------

def _blind_on_both(r: Rec) -> tuple[int, int]:
    """t-0 and u-0 seen, then unseen for 6 s, then seen: returns the window around it."""
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.rows[-1]["time"] = r.rows[-1]["invoke_time"] + 1_000_000
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    for row in r.rows[-1:]:
        row["invoke_time"] += 6_000_000_000
        row["time"] += 6_000_000_000
    return lo, r.at


def test_unclean_election_on_for_one_topic_leaves_the_others_blind_stretches_alone():
    """Before: once topic u had unclean election on, a loss on t in a monitor gap was
    unexplained, as though t's election could have been unclean."""
    r = Rec().nemesis("unclean-on", {"target": "topic", "topic": "u"}, {"topic": "u"})
    lo, _ = _blind_on_both(r)
    hi = r.at
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    built = r.build()
    assert judged(built, T0, lo, hi)["outcome"] == VIOLATION
    blind = judged(built, U0, lo, hi)
    assert blind["outcome"] == UNEXPLAINED and blind["blind"] is not None


def test_unclean_election_turned_on_after_the_read_is_no_candidate():
    r = Rec()
    lo, hi = _blind_on_both(r)
    r.nemesis("unclean-on", {"target": "topic", "topic": "t"}, {"topic": "t"})
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    assert judged(r.build(), T0, lo, hi - 2)["outcome"] == VIOLATION
    assert judged(r.build(), T0, lo, r.at)["outcome"] == UNEXPLAINED  # the read came after


def test_a_power_loss_of_one_partition_says_nothing_of_another_the_monitor_never_saw():
    """Before: a power loss that cut t-0 made a loss on t-1 unexplained when the monitor had
    never seen t-1, though nemesis ops are never blind."""
    r = Rec()
    lo = r.at
    r.power_loss({"n1": ["t-0"]})
    hi = r.at
    built = r.build(min_insync_replicas=2)
    assert judged(built, T1, lo, hi)["outcome"] == VIOLATION
    # t-0 was cut on n1, and no sample says whether n1 was the whole ISR
    assert judged(built, T0, lo, hi)["outcome"] == UNEXPLAINED


# --- 6. a nemesis op of unknown outcome ----------------------------------------------------

@pytest.mark.parametrize("type_, where, outcome", [
    ("info", "in the window", UNEXPLAINED),   # it raised: the power may have gone
    ("pending", "in the window", UNEXPLAINED),  # it never returned
    ("info", "after the window", VIOLATION),
    ("ok", "in the window", VIOLATION),       # it cut nothing of t-0 (only u-0)
])
def test_a_power_loss_of_unknown_outcome_is_doubt_on_every_partition(type_, where, outcome):
    r = Rec().sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    lo = r.at
    if where == "in the window":
        r.power_loss({"n1": ["u-0"]}, type_)
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    hi = r.at
    r.sample(t0=(1, 1, [1, 2, 3]), u0=(1, 1, [1, 2, 3]))
    if where == "after the window":
        r.power_loss({"n1": ["u-0"]}, type_)
    verdict = judged(r.build(), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict
    if outcome == UNEXPLAINED:
        assert verdict["why"] == UNSETTLED


# --- 9. a power loss of every replica -------------------------------------------------------

@pytest.mark.parametrize("cut, seen, outcome", [
    (["n1", "n2", "n3"], True, PERMITTED),     # every replica the samples name
    (["n1", "n2", "n3"], False, PERMITTED),    # as many as the replication factor
    (["n1", "n2"], True, UNEXPLAINED),         # n3 may have been in sync: no sample says
    (["n1", "n2"], False, UNEXPLAINED),
])
def test_a_power_loss_of_every_replica_needs_no_sample_of_the_isr(cut, seen, outcome):
    r = Rec()
    if seen:  # long before the op: too old to say who was in sync then
        r.sample(t0=(1, 1, [1, 2, 3]))
        r.rows[-1]["time"] = r.rows[-1]["invoke_time"] = -10_000_000_000
    lo = r.at
    r.power_loss({n: ["t-0"] for n in cut})
    hi = r.at
    rec, facts = r.build(replication_factor=3)
    [event] = rec.of(T0, evidence.POWER_LOSS, 0, evidence.END)
    assert event.facts["needed"] is None and event.facts["every_replica"] is (len(cut) == 3)
    verdict = judged((rec, facts), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["rule"] == "last-in-sync-replica-lost-power"


KILL_N2 = ("kill", {"target": [2]}, {"killed": ["n2"]}, "ok")


@pytest.mark.parametrize("ops, outcome", [
    ([KILL_N2], PERMITTED),  # n2 killed, n1 lost power: every in-sync replica died
    ([], VIOLATION),         # n2 ran on: it had the write, so no guarantee was dropped
    ([KILL_N2, ("start", None, {"started": ["n2"]}, "ok")], VIOLATION),  # n2 started again
    # class 6: a kill that raised may have taken n2 down, or not: doubt
    ([("kill", {"target": [2]}, None, "info")], UNEXPLAINED),
    ([("kill", {"target": "one"}, None, "pending")], UNEXPLAINED),  # any node may have died
    ([("kill", {"target": [2]}, None, "fail")], VIOLATION),  # it failed: n2 ran on
    ([("kill", {"target": [3]}, None, "info")], VIOLATION),  # n3 was not in sync
])
def test_a_power_loss_after_the_other_in_sync_replica_was_killed_drops_the_guarantee(
        ops, outcome):
    """The reference model's disagreement (issue 49, property test, 2026-11-29): Kafka's
    design doc drops its guarantee once all the nodes replicating a partition die, by a kill
    as much as by a power loss; the verdict called such a loss a violation. A kill of
    unknown outcome (``info``, never ended) may or may not have taken the other in-sync
    replica down: doubt, as for the power loss of unknown outcome (class 6)."""
    r = Rec().sample(t0=(1, 1, [1, 2]))
    lo = r.at
    for op in ops:
        r.nemesis(*op)
    r.sample(t0=(1, 1, [1, 2]))
    r.power_loss({"n1": ["t-0"]})
    r.sample(t0=(3, 2, [3]))
    hi = r.at
    r.sample(t0=(3, 2, [3]))
    verdict = judged(r.build(replication_factor=3), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["evidence"].facts["killed"] == [2]


@pytest.mark.parametrize("between, outcome", [
    (None, PERMITTED),       # n3 lost power first and stayed down: it holds nothing since
    (("start", {"started": ["n3"]}, "ok"), VIOLATION),  # n3 ran again: it may have the write
    (("start", {"started": ["n2"]}, "ok"), PERMITTED),  # another node started
    (("roll", {"rolled": ["n1", "n2", "n3"]}, "ok"), VIOLATION),
    (("start", None, "info"), VIOLATION),  # it does not say whom it started: any
    (("pause", {"paused": ["n2"]}, "ok"), PERMITTED),
])
def test_power_losses_one_after_another_add_up_while_the_first_node_stays_down(
        between, outcome):
    """Found by the reference model (seed 2, a partition of history 2): n3 lost power, then
    the leader n1, the ISR then [n1] and the ELR [n3]: every replica that had the write lost
    it, though no single op cut them both."""
    r = Rec().sample(t0=(1, 1, [1, 3]))
    lo = r.at
    r.power_loss({"n3": ["t-0"]})
    if between:
        r.nemesis(between[0], None, between[1], between[2])
    r.rows.append({**r.rows[0], "op": r.at, "index": r.at + 1, "invoke_time": r.at * 10**6,
                   "time": (r.at + 1) * 10**6, "done": {"partitions": {"t": [{
                       "partition": 0, "leader": 1, "leader_epoch": 1, "replicas": [1, 2, 3],
                       "isr": [1], "elr": [3]}]}}})
    r.power_loss({"n1": ["t-0"]})
    hi = r.at
    r.sample(t0=(-1, 2, []))  # offline: both in-sync replicas are down
    rec, facts = r.build()
    event = rec.of(T0, evidence.POWER_LOSS, lo, hi)[-1]
    assert event.facts["needed"] == [1, 3]
    assert event.facts["down"] == ([3] if outcome == PERMITTED else [])
    verdict = judged((rec, facts), T0, lo, hi)
    assert verdict["outcome"] == outcome, verdict


# --- found by the reference model: behind a transaction no marker ends -----------------------

@pytest.mark.parametrize("unclean, lso, isolation, outcome", [
    ("before", 0, "read_committed", UNEXPLAINED),  # may have lost the marker, before the write
    ("inside", 0, "read_committed", PERMITTED),    # inside the window: it explains the record
    ("none", 0, "read_committed", VIOLATION),      # nothing that could lose a marker
    ("before", 9, "read_committed", VIOLATION),    # the reads ended at the HW: nothing open
    ("before", 0, "read_uncommitted", VIOLATION),  # reads that stop at no transaction
])
def test_a_record_behind_a_transaction_no_marker_ends(unclean, lso, isolation, outcome):
    """An unseen record at offset 7, the final reads of its partition ended at offset 0,
    where the last sample before them shows the LSO below the HW (9): an open transaction
    hides it. n3, out of the ISR, elected before the write was sent, may have lacked the
    marker that ended it (KIP-98: the coordinator never writes it again)."""
    r = Rec().sample(t0=(1, 1, [1, 2], 9, 9))
    if unclean == "before":
        r.sample(t0=(3, 2, [3], 9, lso))
    send = r.at
    r.nemesis("clock-reset")  # the send's invoke
    lo = r.at
    r.nemesis("clock-reset")  # its acknowledgement
    if unclean == "inside":  # the old leader sampled after the acknowledgement
        r.sample(t0=(1, 1, [1, 2], 9, 9))
    r.sample(t0=(1, 1, [1, 2], 9, lso) if unclean == "none" else (3, 2, [3], 9, lso))
    hi = r.at
    r.nemesis("clock-reset")  # the final read's invoke
    r.sample(t0=(1, 1, [1, 2], 9, lso) if unclean == "none" else (3, 2, [3], 9, lso))
    rec, facts = r.build(acks="all", idempotence=True, unclean_leader_election=True,
                         isolation_level=isolation)
    verdict = judge_case("unseen", Case(T0, lo, hi, write=(send, lo), writer_f="send",
                                        offset=7, read_to=0), facts, rec)
    assert verdict["outcome"] == outcome, verdict
    if outcome == UNEXPLAINED:
        assert verdict["why"] == OPEN_TXN
