"""``kafka-chaos bisect``'s choices (``kafka_chaos.bisect``): what a run shows, how a
version is classed from its runs, and which version runs next, on hand-made results; the
search is checked against every class function Hypothesis draws."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.bisect import (Outcome, boundaries, next_version, release, result, tally,
                                versions)

pytestmark = pytest.mark.fast


def _results(word: str, **counts: int) -> dict:
    return {"verdict": word, "anomalies": {n.replace("_", "-"): {"count": c}
                                           for n, c in counts.items()},
            "violations": [n.replace("_", "-") for n, c in counts.items() if c and
                           word == "violation"]}


def test_an_outcome_is_shown_absent_or_not_judged() -> None:
    lost = Outcome.parse("anomaly:lost-write")
    assert lost.shown(_results("valid", lost_write=3)) is True      # found, permitted
    assert lost.shown(_results("valid")) is False
    assert lost.shown(_results("unknown")) is None                  # not judged: not absent
    assert lost.shown(_results("unknown", lost_write=1)) is True
    forbidden = Outcome.parse("violation:lost-write")
    assert forbidden.shown(_results("valid", lost_write=3)) is False
    assert forbidden.shown(_results("violation", lost_write=3)) is True
    violation = Outcome.parse("violation")
    assert violation.shown(_results("violation")) is True
    assert violation.shown(_results("valid")) is False
    assert violation.shown(_results("unknown")) is None
    assert Outcome.parse("unknown").shown(_results("unknown")) is True
    assert str(lost) == "anomaly:lost-write" and str(violation) == "violation"
    for bad, words in (("anomaly:lost", "no anomaly name"), ("crash", "one of violation"),
                       ("valid:x", "one of violation")):
        with pytest.raises(ValueError, match=words):
            Outcome.parse(bad)


def test_versions_are_a_list_or_a_served_range_oldest_first() -> None:
    served = ["3.8.1", "3.9.0", "3.9.1", "4.0.0", "4.10.0", "4.4.0"]
    assert versions("4.4.0, 3.9.1") == ["3.9.1", "4.4.0"]
    assert versions("3.9.0..4.4.0", served) == ["3.9.0", "3.9.1", "4.0.0", "4.4.0"]
    assert release("4.10.0") > release("4.4.0")
    for spec, words in (("4.4.0", "two versions or more"), ("3.9.0..4.4.0", "needs the served"),
                        ("3.9..4.4.0", "not a served release"), ("3.9.1,4.x", "no release")):
        with pytest.raises(ValueError, match=words):
            versions(spec, served if "3.9.." in spec else None)


def test_a_version_is_classed_by_its_judged_runs() -> None:
    lost = Outcome.parse("anomaly:lost-write")
    t = tally("3.9.1", [_results("valid", lost_write=2), _results("unknown"), None], lost)
    assert (t.runs, t.shown, t.judged, t.rate) == (3, 1, 1, 1.0)
    assert dict(t.verdicts) == {"valid": 1, "unknown": 1, "error": 1}
    assert t.shows(0.0) is True
    t = tally("4.4.0", [_results("valid", lost_write=1), _results("valid"),
                        _results("valid")], lost)
    assert t.shows(0.0) is True and t.shows(0.5) is False
    assert tally("4.0.0", [_results("unknown"), None], lost).shows(0.0) is None
    assert tally("4.0.0", [_results("valid")] * 3, lost).shows(0.0) is False


def test_the_search_runs_the_ends_then_halves_the_span_that_differs() -> None:
    order = [f"4.{i}.0" for i in range(9)]
    truth = {v: i >= 6 for i, v in enumerate(order)}  # appears at 4.6.0
    classes: dict = {}
    ran = []
    while (v := next_version(order, classes, exhaustive=False)) is not None:
        ran.append(v)
        classes[v] = truth[v]
    assert ran[:2] == ["4.0.0", "4.8.0"] and len(ran) <= 2 + 3
    assert boundaries(order, classes) == [("4.5.0", "4.6.0")]
    assert next_version(order, {}, exhaustive=True) == "4.0.0"
    # a version no run could judge ends the search there
    assert next_version(order, {"4.0.0": None, "4.8.0": True}, exhaustive=False) is None
    same = {order[0]: False, order[-1]: False}
    assert next_version(order, same, exhaustive=False) is None
    lost = Outcome.parse("anomaly:lost-write")
    answer = result(order, {v: tally(v, [_results("valid", lost_write=int(c))], lost)
                            for v, c in classes.items()}, 0.0, False, lost)
    assert answer["done"] and answer["changes"] == [
        {"before": "4.5.0", "after": "4.6.0", "from": False, "to": True}]
    assert answer["summary"] == "anomaly:lost-write appears between 4.5.0 and 4.6.0"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), min_size=2, max_size=20))
def test_when_the_search_ends_every_change_it_reports_is_real_and_between_neighbours(
        truth) -> None:
    """Whatever the versions do, the search ends; each boundary it reports is a real change
    between two neighbouring versions; a single step (one change) is always found, in at most
    2 + ceil(log2(n)) versions run."""
    order = [f"1.{i}.0" for i in range(len(truth))]
    classes: dict = {}
    while (v := next_version(order, classes, exhaustive=False)) is not None:
        assert v not in classes
        classes[v] = truth[order.index(v)]
    found = boundaries(order, classes)
    for a, b in found:
        i = order.index(a)
        assert order[i + 1] == b and truth[i] != truth[i + 1]
    changes = [i for i in range(len(truth) - 1) if truth[i] != truth[i + 1]]
    if len(changes) == 1:
        assert found == [(order[changes[0]], order[changes[0] + 1])]
        assert len(classes) <= 2 + (len(truth) - 1).bit_length()
    if truth[0] == truth[-1]:  # the same at both ends: a bisect sees no change (--all does)
        assert len(classes) == 2 and found == []
