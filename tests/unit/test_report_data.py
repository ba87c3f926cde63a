"""What the HTML report reads from a history (``report.data``) and computes (``report.stats``),
on hand-made histories with chosen times."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kafka_chaos.history import HistoryError
from kafka_chaos.report import stats as report_stats
from kafka_chaos.report.data import (FAIL, INFO, OK, example_windows, extract,
                                     offset_windows)
from tests.builder import H, Lines
from tests.queue_builder import Q

S = 1_000_000_000


def write_timed(lines: Lines, path: Path, times_s: list[float]) -> Path:
    """Write ``lines`` as a history whose op ``i`` happened at ``times_s[i]`` seconds (the
    builders' ``write`` takes the clock's times, all within a millisecond)."""
    assert len(times_s) == len(lines.lines)
    with open(path, "wb") as fh:
        if lines.header is not None:
            fh.write(orjson.dumps({"format": 2, **lines.header}) + b"\n")
        for i, ((process, type, f, value, error), t) in enumerate(zip(lines.lines, times_s)):
            fh.write(orjson.dumps({"index": i, "time": round(t * S), "process": process,
                                   "type": type, "f": f, "value": value, "error": error}) + b"\n")
    return path


def sample(leader: int, isr: list[int], answering: dict[int, bool], epoch: int = 1,
           controller: int = 1) -> dict:
    return {"answering": {str(n): up for n, up in answering.items()},
            "partitions": {"t": [{"partition": 0, "leader": leader, "leader_epoch": epoch,
                                  "replicas": [1, 2, 3], "isr": isr}]},
            "controller": {"leader": controller, "epoch": 1}, "took_ms": 1}


ALL_UP = {1: True, 2: True, 3: True}


def test_a_retired_process_hands_its_row_to_the_next_one(tmp_path) -> None:
    q = (Q().send(0, [(0, 1)]).send(1, [(0, 2)])
         .send(0, [(0, 3)], type="info", acked=[False])   # process 0 retired
         .send(5, [(0, 4)])                               # its successor
         .send(1, [(0, 5)], type="fail")
         .read_all(9))
    data = extract(q.write(tmp_path / "h.jsonl"))
    assert data.lanes == [[0, 5], [1], [9]]
    ops = data.ops
    assert list(ops.outcome) == [OK, OK, INFO, OK, FAIL, OK]
    assert [ops.fs[f] for f in ops.f] == ["send"] * 5 + ["final-read"]
    assert list(ops.sends) == [1, 1, 1, 1, 1, 0] and list(ops.acked) == [1, 1, 0, 1, 0, 0]
    assert report_stats.ack_share(data) == (3, 5)  # the final read is no workload op
    assert report_stats.outcome_counts(data) == {"ok": 3, "fail": 1, "info": 1}


def test_a_transaction_acknowledges_its_sends_only_when_it_commits(tmp_path) -> None:
    q = (Q(txn=True).txn(0, [("send", 0, 1), ("send", 0, 2)])
         .txn(1, [("send", 0, 3)], type="fail", error="ABORTED").read_all(9))
    data = extract(q.write(tmp_path / "h.jsonl"))
    assert list(data.ops.acked[:2]) == [2, 0] and list(data.ops.sends[:2]) == [2, 1]


def test_fault_windows_pair_starts_with_what_undoes_them(tmp_path) -> None:
    q = (Q().nemesis("kill", {"target": "leader"}, {"killed": ["n1"]})
         .nemesis("pause", {"target": "one"}, {"paused": ["n2"]})
         .nemesis("unclean-on", {"target": "topic", "topic": "t"}, {"read_back": "true"})
         .nemesis("unclean-on", {"target": "cluster", "topic": "t"}, {"read_back": "true"})
         .nemesis("start", None, {"started": ["n1"]})
         .nemesis("unclean-off", {"target": "cluster", "topic": "t"}, {"read_back": "false"})
         .nemesis("resume", None, {"resumed": ["n2"]})
         .nemesis("partition", {"target": "halves"}, {"isolated": [["n1"], ["n2", "n3"]]})
         .invoke("nemesis", "kill", {"target": "one"})
         .complete("nemesis", "info", "kill", {"target": "one"}, "NemesisError: no node")
         .nemesis("heal-all", None, {}))
    times = [float(i) for i in range(len(q.lines))]
    data = extract(write_timed(q, tmp_path / "h.jsonl", times))
    got = [(w.package, w.start_s, w.end_s, w.failed) for w in data.windows]
    assert got == [("kill", 0, 9, False), ("pause", 2, 13, False), ("unclean", 4, 19, False),
                   ("unclean", 6, 11, False),  # only the cluster-wide one was turned off
                   ("partition", 14, 19, False), ("kill", 16, 19, True)]
    assert data.windows[0].label == "kill leader: killed n1"
    assert data.windows[4].label == "partition halves: isolated [n1] | [n2, n3]"
    assert [op.f for op in data.nemesis][-1] == "heal-all"


def test_a_fault_never_undone_stays_open(tmp_path) -> None:
    q = Q().nemesis("partition", {"target": "halves"}, {"isolated": [["n1"], ["n2"]]})
    data = extract(write_timed(q, tmp_path / "h.jsonl", [1.0, 1.5]))
    assert [(w.start_s, w.end_s) for w in data.windows] == [(1.0, None)]
    assert report_stats.recovery(data) == []
    assert report_stats.open_at_end(data.windows) == data.windows


def test_monitor_changes_and_full_isr_transitions(tmp_path) -> None:
    q = (Q().monitor(sample(1, [1, 2, 3], ALL_UP))
         .monitor(sample(1, [1, 2, 3], ALL_UP))                       # nothing changed
         .monitor(sample(-1, [1, 2, 3], {1: False, 2: True, 3: True}))
         .monitor(sample(2, [2, 3], {1: False, 2: True, 3: True}, epoch=2, controller=2))
         .monitor(sample(2, [1, 2, 3], ALL_UP, epoch=2, controller=2)))
    times = [0.0, 0.01, 0.5, 0.51, 1.0, 1.01, 1.5, 1.51, 2.0, 2.01]
    data = extract(write_timed(q, tmp_path / "h.jsonl", times))
    assert data.monitor_samples == 5
    assert [(e.time_s, sorted(e.kinds)) for e in data.events] == [
        (1.01, ["answering", "leader"]), (1.51, ["controller", "isr-shrink", "leader"]),
        (2.01, ["answering", "isr-grow"])]
    assert "t-0: leader 1 → none (epoch 1 → 1)" in data.events[0].text
    assert "t-0: ISR [2, 3] → [1, 2, 3]" in data.events[2].text
    assert data.isr_full == [(0.01, True), (1.01, False), (2.01, True)]


def test_unavailability_and_recovery_from_chosen_times(tmp_path) -> None:
    q = (Q().send(0, [(0, 1)])                                    # acked at 0.2
         .nemesis("kill", {"target": "leader"}, {"killed": ["n1"]})
         .monitor(sample(-1, [2, 3], {1: False, 2: True, 3: True}))
         .send(0, [(0, 2)], type="info", acked=[False])           # 0.4 -> 1.4: no ack
         .nemesis("start", None, {"started": ["n1"]})             # healed at 2.0
         .send(1, [(0, 3)])                                       # invoked 1.5 < heal
         .send(1, [(0, 4), (0, 5)])                               # 2.5 -> 2.8: the recovery
         .monitor(sample(2, [1, 2, 3], ALL_UP, epoch=2)))         # full ISRs at 3.01
    times = [0.1, 0.2, 0.3, 0.35, 0.36, 0.37, 0.4, 1.4, 1.9, 2.0, 1.5, 2.4, 2.5, 2.8, 3.0, 3.01]
    order = sorted(range(len(times)), key=times.__getitem__)  # lines in time order
    q.lines = [q.lines[i] for i in order]
    data = extract(write_timed(q, tmp_path / "h.jsonl", sorted(times)))
    assert data.workload_s == (0.1, 2.8)
    assert report_stats.unavailability(data) == [(0.2, 2.4)]
    assert report_stats.unavailability(data, min_s=3) == []
    [rec] = report_stats.recovery(data)
    assert rec["window"].package == "kill" and rec["window"].end_s == 2.0
    assert rec["first_ack_s"] == pytest.approx(0.8)
    assert rec["isr_full_s"] == pytest.approx(1.01)
    summary = report_stats.summary(data)
    assert summary["longest_unavailable_s"] == pytest.approx(2.2)
    [kept] = summary["recovery"]
    assert (kept["fault"], kept["healed_s"]) == ("kill", 2.0)
    assert kept["first_ack_s"] == pytest.approx(0.8) and kept["isr_full_s"] == pytest.approx(1.01)


def test_throughput_and_latency_per_second(tmp_path) -> None:
    q = Q()
    times = []
    for i, (start, latency, type) in enumerate([(0.1, 0.010, "ok"), (0.2, 0.030, "ok"),
                                                (0.5, 0.020, "ok"), (1.2, 0.5, "fail"),
                                                (1.3, 0.9, "info")]):
        q.send(i, [(0, i)], type=type)
        times += [start, start + latency]
    q.lines = [q.lines[i] for i in sorted(range(len(times)), key=times.__getitem__)]
    data = extract(write_timed(q, tmp_path / "h.jsonl", sorted(times)))
    tp = report_stats.throughput(data, 1.0)
    assert tp["t"] == [0.0, 1.0, 2.0]
    assert tp["ok"] == [3, 0, 0] and tp["fail"] == [0, 1, 0] and tp["info"] == [0, 0, 1]
    assert tp["sends"] == [3, 2, 0] and tp["acked"] == [3, 0, 1]  # info keeps its ack
    lat = report_stats.latency(data, 1.0)
    assert lat["ok"]["p50"][0] == pytest.approx(20) and lat["ok"]["max"][0] == pytest.approx(30)
    assert lat["ok"]["p99"][0] == pytest.approx(30) and lat["ok"]["p50"][1] is None
    assert lat["fail"]["max"][1] == pytest.approx(500)
    assert report_stats.bin_width_s(10) == 1.0 and report_stats.bin_width_s(7201) == 3.0


LOST = {"key": 0, "value": 11, "offset": 1, "covered_by": [0, 3], "final_end": 3}


def test_offset_views_around_anomaly_examples(tmp_path) -> None:
    results = {"anomalies": {
        "lost-write": {"count": 1, "examples": [LOST]},
        "unseen": {"count": 1, "examples": [{"key": 1, "value": 7, "offset": None,
                                             "final_end": 40}]},
        "inconsistent-offsets": {"count": 1, "examples": [{"key": 0, "offset": 1,
                                                           "values": [11, 12]}]},
        "duplicate": {"count": 1, "examples": [{"key": 0, "value": 10, "offsets": [0, 2]}]}}}
    wanted = example_windows(results["anomalies"])
    assert [(n, k, lo, hi) for n, k, lo, hi, _ in wanted] == [
        ("lost-write", 0, 0, 8), ("unseen", 1, 34, 47), ("inconsistent-offsets", 0, 0, 8)]
    assert offset_windows(results["anomalies"]) == [(0, 0, 8), (1, 34, 47)]
    q = (Q().send(0, [(0, 10), (0, 11)]).poll(1, {0: [(0, 10), (1, 11)]})
         .send(0, [(0, 12)], offsets=[1]).send(0, [(0, 99)], offsets=[20])
         .final(2, 0, [(0, 10), (1, 12)]))
    data = extract(q.write(tmp_path / "h.jsonl"), results["anomalies"])
    view = next(v for v in data.views if v.key == 0)
    assert sorted((o, v) for o, v, _ in view.acked) == [(0, 10), (1, 11), (1, 12)]  # not 20
    assert view.polled == {0: {10}, 1: {11}} and view.final == {0: {10}, 1: {12}}
    assert view.final_range == (0, 2)


def test_examples_far_apart_get_diagrams_of_their_own() -> None:
    far = {**LOST, "offset": 100, "value": 5}
    near = {**LOST, "offset": 5, "value": 6}
    results = {"anomalies": {"lost-write": {"examples": [far, LOST, near]}}}
    assert [(lo, hi, [e["value"] for e in ex]) for _, _, lo, hi, ex in
            example_windows(results["anomalies"])] == [(0, 12, [11, 6]), (94, 107, [5])]


def test_format_1_histories_are_read_too(tmp_path) -> None:
    h = (H().send(0, key=1, value=10).send(0, key=1, value=11, type="info")
         .poll(1, key=1, records=[(0, 10)], final=True))
    data = extract(h.write(tmp_path / "h.jsonl"))
    assert data.header is None
    assert [data.ops.fs[f] for f in data.ops.f] == ["send", "send", "final-read"]
    assert list(data.ops.acked) == [1, 0, 0]


@pytest.mark.parametrize("line, expect", [
    (b'{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[],"error":null}',
     "line 2: op 0: ok from process 0 with no open invoke"),
    (b'{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[],"error":null}\n'
     b'{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send",0,[1]]],'
     b'"error":null}', "line 3: a send value not shaped as in docs/history-format.md"),
    (b'{"index":0,"time":1.5,"process":0}', "line 2: missing field(s) type, f, value, error"),
])
def test_a_malformed_line_is_named(tmp_path, line: bytes, expect: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"format":2,"config":{}}\n' + line + b"\n")
    with pytest.raises(HistoryError) as err:
        extract(path)
    assert expect in str(err.value)


def test_a_package_may_start_with_any_of_several_fs(tmp_path, monkeypatch) -> None:
    from kafka_chaos.catalogue import faults

    packages = {**faults.PACKAGES, "skew": faults.FaultKind(
        ("skew-up", "skew-strobe"), "skew-reset", ("one",), ("one",), "#123456")}
    monkeypatch.setattr(faults, "PACKAGES", packages)
    q = (Q().nemesis("skew-strobe", {"target": "one"}, {"strobed": ["n1"]})
         .nemesis("skew-reset", None, {"reset": ["n1"]})
         .nemesis("skew-up", {"target": "one"}, {"bumped": ["n2"]}))
    data = extract(write_timed(q, tmp_path / "h.jsonl", [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]))
    assert [(w.package, w.start_s, w.end_s) for w in data.windows] == [
        ("skew", 0.0, 1.5), ("skew", 2.0, None)]


def test_recovery_names_the_first_read_and_a_heal_after_the_last_send(tmp_path) -> None:
    """After a heal: the first poll invoked after it that returned records is its first read
    (an empty poll is not); the final heal after the workload's last send shows no recovery
    (``sent_after`` False), which the figures leave out, never an unrecovered fault."""
    q = (Q().send(0, [(0, 1)])
         .nemesis("kill", {"target": "leader"}, {"killed": ["n1"]})
         .nemesis("start", None, {"started": ["n1"]})              # healed at 1.0
         .poll(1, {})                                             # 1.1 -> 1.2: empty
         .send(0, [(0, 2)])                                       # 1.3 -> 1.5
         .poll(1, {0: [(0, 1), (1, 2)]})                          # 1.6 -> 1.9: the read
         .nemesis("kill", {"target": "leader"}, {"killed": ["n1"]})
         .nemesis("start", None, {"started": ["n1"]}))            # healed at 2.5
    times = [0.1, 0.2, 0.5, 0.6, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 1.6, 1.9, 2.0, 2.1, 2.4, 2.5]
    data = extract(write_timed(q, tmp_path / "h.jsonl", times))
    first, last = report_stats.recovery(data)
    assert first["first_ack_s"] == pytest.approx(0.5) and first["sent_after"]
    assert first["first_read_s"] == pytest.approx(0.9)
    assert last["first_ack_s"] is None and last["first_read_s"] is None
    assert not last["sent_after"]
    from kafka_chaos.verdict import RunVerdict

    figures = RunVerdict(availability=report_stats.summary(data)).availability_figures()
    assert (figures["slowest_recovery_s"], figures["slowest_read_s"]) == (0.5, 0.9)
    assert figures["unrecovered"] == 0
