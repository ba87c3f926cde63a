"""The verdict on findings at an offset whose batch a file fault damaged (rule
``damage-served-unchecked``, ``mechanisms.damaged_unchecked``; ``docs/file-faults.md``).

A damage explains a finding only on its own partition, inside the finding's window, where a
batch it touched holds the finding's offset and nothing checked the change: the broker was
left running on the file, or only the bytes in front of the CRC changed. A killed broker's
recovery checks the CRC of its active segment and cuts the damaged batch, so such a damage
explains no read of changed bytes. What the record cannot settle is unexplained."""

from __future__ import annotations

import pytest

from kafka_chaos.analysis.mechanisms import Case
from kafka_chaos.analysis.promises import PERMITTED, UNEXPLAINED, VIOLATION, judge_case
from tests.unit.test_verdict_classes import T0, T1, Rec

_FILE = "data/t-0/00000000000000000000.log"


def _damage(r: Rec, *, running: bool = True, offsets=([4, 6],), unchecked=(),
            file: str = _FILE, type_: str = "ok", past: bool = False,
            kind: str = "segment", recovered: bool | None = None) -> Rec:
    record = {"file": file, "kind": kind, "bits": [80], "size": [900, 900],
              "sha256": ["a", "b"], "batches": [o[0] for o in offsets or ()],
              "offsets": None if offsets is None else [list(o) for o in offsets],
              "unchecked": list(unchecked), "past_batches": past}
    if recovered is not None:  # a segment damaged after a kill: what the op read (R2)
        record.update(recovery_point=100 if recovered else 20, next_base=50,
                      recovered=recovered)
    done = {"damaged": {"n1": record}, ("running" if running else "killed"): ["n1"]}
    return r.nemesis("bitflip", {"target": "one", "topic": "t", "partition": 0},
                     done if type_ == "ok" else None, type_)


def _judge(r: Rec, name: str, offset: int, lo: int, hi: int, tp=T0) -> dict:
    r.sample(t0=(1, 1, [1, 2, 3]), t1=(1, 1, [1, 2, 3]))
    rec, facts = r.build(replication_factor=3)
    write = (lo - 1, lo) if name == "lost-write" else None
    return judge_case(name, Case(tp, lo, hi, write=write, writer_f="send", offset=offset),
                      facts, rec)


def _window(**damage) -> tuple[Rec, int, int]:
    r = Rec().sample(t0=(1, 1, [1, 2, 3]), t1=(1, 1, [1, 2, 3]))
    lo = r.at
    _damage(r, **damage)
    hi = r.at
    return r, lo, hi


@pytest.mark.parametrize("name", ["lost-write", "garbage-read", "corrupt-read",
                                  "inconsistent-offsets", "unseen"])
def test_a_damage_under_a_running_broker_explains_what_its_batch_held(name):
    r, lo, hi = _window()
    verdict = _judge(r, name, 5, lo, hi)
    assert verdict["outcome"] == PERMITTED, verdict
    assert verdict["rule"] == "damage-served-unchecked"
    assert verdict["evidence"].facts["node"] == 1 and verdict["evidence"].facts["running"]


@pytest.mark.parametrize("damage, offset, tp, outcome", [
    ({}, 7, T0, VIOLATION),                               # past the damaged batch
    ({}, 5, T1, VIOLATION),                               # another partition
    ({"running": False}, 5, T0, VIOLATION),               # recovery cut the batch (CRC)
    ({"running": False, "unchecked": [4]}, 5, T0, PERMITTED),  # only bytes no CRC covers
    ({"offsets": None}, 5, T0, UNEXPLAINED),              # batches not recorded
    ({"past": True}, 9, T0, UNEXPLAINED),                 # a torn tail, offsets unknown
    ({"past": True, "running": False}, 9, T0, UNEXPLAINED),
    ({"type_": "info"}, 5, T0, UNEXPLAINED),              # may have damaged anything
    ({"type_": "info"}, 5, T1, UNEXPLAINED),
    ({"kind": "old-segment"}, 5, T0, PERMITTED),          # a rolled one, under a running broker
    ({"kind": "old-segment", "running": False}, 5, T0, UNEXPLAINED),  # recovery may skip it
])
def test_only_a_damage_that_reached_the_record_unchecked_explains_it(damage, offset, tp,
                                                                     outcome):
    r, lo, hi = _window(**damage)
    verdict = _judge(r, "garbage-read", offset, lo, hi, tp)
    assert verdict["outcome"] == outcome, verdict


def test_a_damage_before_the_write_or_across_the_read_explains_nothing_for_sure():
    """A lost write acknowledged after the damage was not in the file it damaged: nothing;
    a damage op still running when the read began may have come after it: doubt."""
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    _damage(r).sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at  # the send's invoke is the sample's completion, after the damage
    r.sample(t0=(1, 1, [1, 2, 3]))
    assert _judge(r, "lost-write", 5, lo, r.at)["outcome"] == VIOLATION
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    began = r.at
    _damage(r)  # the read completed at the damage's invoke: it may have come first
    assert _judge(r, "corrupt-read", 5, 0, began)["outcome"] == UNEXPLAINED


def test_a_damaged_index_or_checkpoint_is_no_segment_damage():
    r, lo, hi = _window(file="data/t-0/00000000000000000000.index")
    assert _judge(r, "garbage-read", 5, lo, hi)["outcome"] == VIOLATION


def _cut(isr: list[int], *, started: bool = True, unchecked=()) -> tuple[Rec, int, int]:
    """n1, in ISR ``isr`` of t-0, killed and its active segment damaged in the batch of
    offsets 4-6 (in bytes its CRC covers unless ``unchecked``), then started: its recovery
    cuts its log there. The window runs from before the damage to after the start."""
    r = Rec().sample(t0=(1, 1, isr), t1=(1, 1, [1, 2, 3]))
    lo = r.at
    _damage(r, running=False, unchecked=unchecked)
    if started:
        r.nemesis("start", {"target": [1]}, {"started": ["n1"]})
    r.sample(t0=(1, 2, [1]), t1=(1, 1, [1, 2, 3]))
    return r, lo, r.at


@pytest.mark.parametrize("isr, offset, outcome", [
    ([1], 5, PERMITTED),          # the lone in-sync replica came back without the batch
    ([1], 9, PERMITTED),          # ... and without every batch after it
    ([1], 3, VIOLATION),          # below the cut: recovery kept it
    ([1, 2, 3], 5, VIOLATION),    # the other in-sync replicas had it: n1 refetches
])
def test_a_recovery_cut_loses_what_only_the_cut_node_had_from_the_damaged_batch_on(
        isr, offset, outcome):
    r, lo, hi = _cut(isr)
    verdict = _judge(r, "lost-write", offset, lo, hi)
    assert verdict["outcome"] == outcome, verdict
    if outcome == PERMITTED:
        assert verdict["rule"] == "last-in-sync-replica-cut-by-recovery"
        assert verdict["evidence"].facts["from_offset"] == 4
        assert verdict["evidence"].facts["nodes"] == [1]


def test_a_cut_that_never_came_or_was_never_checked_explains_nothing_for_sure():
    """Without a start the node never recovered: the cut may lie past the read (doubt); a
    damage only in bytes no CRC covers is no cut (its records are served as they are)."""
    r, lo, hi = _cut([1], started=False)
    assert _judge(r, "lost-write", 5, lo, hi)["outcome"] == UNEXPLAINED
    r, lo, hi = _cut([1], unchecked=[4])
    verdict = _judge(r, "lost-write", 5, lo, hi)
    assert verdict["rule"] == "damage-served-unchecked", verdict
    r, lo, hi = _cut([1])
    assert _judge(r, "nonmonotonic-poll", None, lo, hi)["outcome"] == UNEXPLAINED  # no offset


def test_a_poll_pair_is_judged_at_its_later_offset():
    """A consumer stepping back from 9 to 3 met a log truncated at or below 9: a cut from 4
    explains it, one from 10 cannot (``judge._offset``)."""
    from kafka_chaos.analysis.judge import _offset

    assert _offset("nonmonotonic-poll", {"offsets": [9, 3]}) == 9
    assert _offset("lost-write", {"offset": 4}) == 4 and _offset("group-skip", {}) is None
    r, lo, hi = _cut([1])
    assert _judge(r, "nonmonotonic-poll", 9, lo, hi)["outcome"] == PERMITTED
    assert _judge(r, "nonmonotonic-poll", 3, lo, hi)["outcome"] == VIOLATION


def test_a_rolled_segment_damaged_after_a_kill_is_no_recovery_cut():
    """Recovery after a kill always reads the active segment; a rolled one only when the
    recovery point on disk lies before it: without the op's word on that, no cut is
    assumed, the finding is doubt."""
    r, lo, hi = _cut([1])
    rec, _ = r.build(replication_factor=3)
    assert [e.kind for e in rec.events[T0] if e.kind.startswith("recovery")] == ["recovery-cut"]
    r = Rec().sample(t0=(1, 1, [1]))
    lo = r.at
    _damage(r, running=False, kind="old-segment")
    r.nemesis("start", {"target": [1]}, {"started": ["n1"]})
    rec, _ = r.build(replication_factor=3)
    assert not [e for e in rec.events[T0] if e.kind == "recovery-cut"]
    r.sample(t0=(1, 2, [1]))
    assert _judge(r, "lost-write", 5, lo, r.at)["outcome"] == UNEXPLAINED


def test_a_duplicate_is_explained_when_every_copy_but_one_was_damaged():
    """A flipped digit that gave another written value: that value at its own offset and
    at the damaged one (5) is a duplicate the damage explains; with a third, undamaged copy
    it explains only one of two extra copies: a violation."""
    def judged(copies):
        r, lo, hi = _window()
        r.sample(t0=(1, 1, [1, 2, 3]), t1=(1, 1, [1, 2, 3]))
        rec, facts = r.build(replication_factor=3, idempotence=True)
        return judge_case("duplicate", Case(T0, lo, hi, copies=copies), facts, rec)

    verdict = judged((2, 5))
    assert verdict["outcome"] == PERMITTED and verdict["rule"] == "damage-served-unchecked"
    assert judged((2, 3, 5))["outcome"] == VIOLATION
    assert judged((2, 9))["outcome"] == VIOLATION  # 9: past the damaged batch


def test_a_damage_on_a_node_that_never_led_explains_nothing():
    """Readers fetch from the leader: a follower's damaged batch reaches none while it
    never leads (the samples say n1 led throughout); once it leads, it does."""
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.nemesis("bitflip", {"target": "one"}, {"running": ["n2"], "damaged": {"n2": {
        "file": _FILE, "kind": "segment", "bits": [80], "size": [9, 9], "sha256": ["a", "b"],
        "batches": [4], "offsets": [[4, 6]], "unchecked": [], "past_batches": False}}})
    r.sample(t0=(1, 1, [1, 2, 3]))
    assert _judge(r, "garbage-read", 5, lo, r.at)["outcome"] == VIOLATION
    r.sample(t0=(2, 2, [2, 3]))  # n2 leads later, before the read
    assert _judge(r, "garbage-read", 5, lo, r.at)["outcome"] == PERMITTED


def test_a_rolled_segment_after_a_kill_is_cut_or_served_as_its_recovery_point_says():
    """The damage op read the recovery point: a rolled segment whose successor begins above
    it is recovered (R2), so the damage is a recovery cut from its first batch (judged as a
    power loss of that node's log: permitted only when it was the last in-sync replica); one
    below it is never read at startup and served as it is (S1), like a running broker's."""
    def judged(recovered, isr):
        r = Rec().sample(t0=(1, 1, isr))
        lo = r.at
        _damage(r, running=False, kind="old-segment", recovered=recovered)
        r.nemesis("start", {"target": [1]}, {"started": ["n1"]})
        r.sample(t0=(1, 2, isr))
        rec, _ = r.build(replication_factor=3)
        cuts = [e for e in rec.events[T0] if e.kind == "recovery-cut"]
        return cuts, _judge(r, "lost-write", 5, lo, r.at)

    cuts, verdict = judged(True, [1])
    assert [e.facts["from_offset"] for e in cuts] == [4], cuts
    assert (verdict["outcome"], verdict["rule"]) == (
        PERMITTED, "last-in-sync-replica-cut-by-recovery"), verdict
    cuts, verdict = judged(True, [1, 2, 3])  # the followers had it: the cut loses nothing
    assert cuts and verdict["outcome"] == VIOLATION, verdict
    cuts, verdict = judged(False, [1, 2, 3])
    assert cuts == [] and (verdict["outcome"], verdict["rule"]) == (
        PERMITTED, "damage-served-unchecked"), verdict


def _rollback(r: Rec, restored: dict) -> Rec:
    r.nemesis("snapshot-file", {"target": [1], "topic": "t", "partition": 0, "file": "segment"},
              {"copied": {"n1": {"file": _FILE, "kind": "segment", "size": 10,
                                 "sha256": "a"}}})
    return r.nemesis("restore-file", None, {"restored": {"n1": {
        "file": _FILE, "kind": "segment", "size": [900, 10], "sha256": ["b", "a"],
        **restored}}, "started": ["n1"]})


def test_a_rolled_back_segment_is_a_recovery_cut_where_its_copy_ended():
    """Putting an older copy of a segment back cuts the batches written since (its record
    names them, the copy being a prefix); the node starts within the op, so the cut is
    judged as a power loss of its log from the first of them: permitted only when it held
    the last in-sync copy. A copy that was no prefix locates nothing: doubt."""
    def judged(restored, isr):
        r = Rec().sample(t0=(1, 1, isr))
        lo = r.at
        _rollback(r, restored)
        r.sample(t0=(1, 2, isr))
        rec, _ = r.build(replication_factor=3)
        return [e for e in rec.events[T0] if e.kind == "recovery-cut"], _judge(
            r, "lost-write", 5, lo, r.at)

    cut = {"prefix": True, "batches": [4], "offsets": [[4, 6]], "unchecked": [],
           "past_batches": False, "recovery_point": 0, "next_base": None, "recovered": True}
    cuts, verdict = judged(cut, [1])
    assert [(e.facts["from_offset"], e.facts["nodes"]) for e in cuts] == [(4, [1])], cuts
    assert cuts[0].hi == cuts[0].lo + 1  # from the restore's invoke to its own completion
    assert (verdict["outcome"], verdict["rule"]) == (
        PERMITTED, "last-in-sync-replica-cut-by-recovery"), verdict
    assert judged(cut, [1, 2, 3])[1]["outcome"] == VIOLATION  # the followers had it
    cuts, verdict = judged({"prefix": False}, [1])
    assert cuts == [] and verdict["outcome"] == UNEXPLAINED, verdict
    # a copy never put back, or whose restore ended unknown, may have cut anything
    r = Rec().sample(t0=(1, 1, [1, 2, 3]))
    lo = r.at
    r.nemesis("restore-file", None, None, "info")
    r.sample(t0=(1, 2, [1, 2, 3]))
    assert _judge(r, "lost-write", 5, lo, r.at)["outcome"] == UNEXPLAINED
