"""``group-overlap`` on hand-built histories (``analysis/checkers/owners.py``): two members of
one group owning a partition at once by their own rebalance callbacks is a violation when the
earlier owner had revoked it, permitted when it had been fenced (lost, its process died, or a
commit of it failed as fenced), unexplained when its record never says; a clean handover and
other groups are no case."""

from __future__ import annotations

import pytest

from kafka_chaos.analysis.explain import explain, explain_judged
from tests.queue_builder import Q

SUB = {"sub_via": "subscribe", "group_protocol": "consumer"}


def overlap(result: dict) -> dict:
    return result["anomalies"]["group-overlap"]


def two_owners(end: list | None, *, crash: bool = False, group_b: str = "kc-group") -> Q:
    """Process 0 is assigned key 0; process 1 (of ``group_b``) is assigned it while process 0
    still holds it; then process 0's stretch ends with ``end`` (an event), a crash, or goes on
    with a poll that says nothing."""
    q = (Q(**SUB).subscribe(0, [0]).subscribe(1, [0], group=group_b)
         .send(5, [(0, 1), (0, 2)])
         .poll(0, {0: [(0, 1)]}, events=[["assigned", [0]]])
         .poll(1, {0: [(0, 1), (1, 2)]}, events=[["assigned", [0]]]))
    if crash:
        q.crash(0)
    else:
        q.poll(0, {}, events=[end] if end else [])
    return q.read_all(9)


@pytest.mark.spark
def test_a_partition_the_earlier_owner_revoked_only_later_is_a_violation(run):
    result = run(two_owners(["revoked", [0]]))
    a = overlap(result)
    assert a["count"] == 1 and a["outcomes"]["violation"] == 1 and not a["permitted"]
    ex = a["examples"][0]
    assert ex["processes"] == [0, 1] and ex["ended_by"] == "revoked" and ex["key"] == 0
    assert explain("group-overlap", ex).startswith(
        "group kc-group: processes 0 and 1 both owned key 0 at once, the first until it "
        "revoked it (ops ")
    assert "group-overlap" in result["violations"] and a["side"] == "consumer"


@pytest.mark.spark
@pytest.mark.parametrize("end, crash", [(["lost", [0]], False), (None, True)])
def test_an_earlier_owner_that_was_fenced_permits_the_overlap(run, end, crash):
    a = overlap(run(two_owners(end, crash=crash)))
    assert a["count"] == 1 and a["permitted"] and a["rules"] == {"fenced-member": 1}
    assert a["examples"][0]["ended_by"] == ("gone" if crash else "lost")


@pytest.mark.spark
def test_a_commit_failing_as_fenced_ends_the_earlier_ownership(run):
    """A commit of the earlier owner failing with CommitFailedException after the later
    owner was assigned: permitted as fenced; before it: the ownership had ended, no case; a
    commit failing otherwise says nothing of the member: still unexplained."""
    def history(error: str, before: bool) -> Q:
        q = (Q(**SUB).subscribe(0, [0]).subscribe(1, [0]).send(5, [(0, 1), (0, 2)])
             .poll(0, {0: [(0, 1)]}, events=[["assigned", [0]]]))
        if before:
            q.commit(0, {0: 1}, type="fail", error=error)
        q.poll(1, {0: [(0, 1), (1, 2)]}, events=[["assigned", [0]]])
        if not before:
            q.commit(0, {0: 1}, type="fail", error=error)
        return q.poll(0, {}).read_all(9)

    after = overlap(run(history("CommitFailedException", before=False)))
    assert after["count"] == 1 and after["rules"] == {"fenced-member": 1}
    assert after["examples"][0]["ended_by"] == "fenced"
    assert overlap(run(history("UNKNOWN_MEMBER_ID", before=True)))["count"] == 0
    other = overlap(run(history("REQUEST_TIMED_OUT", before=False)))
    assert other["outcomes"]["unexplained"] == 1
    assert other["examples"][0]["ended_by"] == "still-owned"


@pytest.mark.spark
def test_an_earlier_owner_that_never_gave_it_up_leaves_the_overlap_unexplained(run):
    result = run(two_owners(None))
    a = overlap(result)
    assert a["outcomes"]["unexplained"] == 1 and result["valid"] == "unknown"
    assert "cannot tell" in explain_judged("group-overlap", a["examples"][0])


@pytest.mark.spark
def test_a_handover_and_members_of_other_groups_are_no_case(run):
    handover = (Q(**SUB).subscribe(0, [0]).subscribe(1, [0])
                .send(5, [(0, 1)])
                .poll(0, {0: [(0, 1)]}, events=[["assigned", [0]]])
                .poll(0, {}, events=[["revoked", [0]]])
                .poll(1, {0: [(0, 1)]}, events=[["assigned", [0]]])
                .read_all(9))
    assert overlap(run(handover))["count"] == 0
    assert overlap(run(two_owners(["revoked", [0]], group_b="other")))["count"] == 0


@pytest.mark.spark
def test_an_earlier_owner_still_committing_after_the_handover_was_not_fenced(run):
    """Issue 49, class 7: an earlier owner whose process crashed later permitted the overlap
    even though it went on committing ok after the later owner was assigned the partition:
    the coordinator took it as a member of the current generation then, so it had not been
    fenced. A commit before the later owner's assignment says nothing of that."""
    def history(commit_after: bool, auto: bool = False) -> Q:
        q = (Q(**SUB).subscribe(0, [0]).subscribe(1, [0]).send(5, [(0, 1), (0, 2)])
             .poll(0, {0: [(0, 1)]}, events=[["assigned", [0]]]))
        if not commit_after:
            q.commit(0, {0: 1})
        q.poll(1, {0: [(0, 1), (1, 2)]}, events=[["assigned", [0]]])
        if commit_after and auto:
            q.poll(0, {}, events=[["committed", {"0": 1}]])
        elif commit_after:
            q.commit(0, {0: 1})
        return q.crash(0).read_all(9)

    for auto in (False, True):
        a = overlap(run(history(commit_after=True, auto=auto)))
        assert a["count"] == 1 and a["outcomes"]["violation"] == 1, (auto, a)
        assert a["examples"][0]["ended_by"] == "still-committing"
        assert "not fenced" in explain("group-overlap", a["examples"][0])
    a = overlap(run(history(commit_after=False)))
    assert a["count"] == 1 and a["rules"] == {"fenced-member": 1}, a
    assert a["examples"][0]["ended_by"] == "gone"
