"""The live verdict on a history being written, with real Spark: what each check sees, what it
counts under ``--fail-on``, and the stop it asks for (``kafka_chaos.live``)."""

from __future__ import annotations

import json
import threading

import pytest

from kafka_chaos.config import RunConfig
from kafka_chaos.history import HistoryWriter
from kafka_chaos.live import LiveCheck
from tests.queue_builder import Q

#: A run whose plan forbids duplicates (Kafka permits them here: retries, no idempotence).
CONFIG = RunConfig(forbid=["duplicate"]).model_dump(mode="json")


def _clean() -> Q:
    return Q(CONFIG).assign(1, [0]).send(0, [(0, 0), (0, 1), (0, 2)]).poll(
        1, {0: [(0, 0), (1, 1), (2, 2)]})


def _duplicated(config: dict = CONFIG) -> Q:
    """Value 1 acknowledged again at offset 3 and read there: a duplicate."""
    return Q(config).assign(1, [0]).send(0, [(0, 0), (0, 1), (0, 2)]).send(
        2, [(0, 1)]).poll(1, {0: [(0, 0), (1, 1), (2, 2), (3, 1)]})


def _append(w: HistoryWriter, q: Q) -> None:
    for process, type, f, value, error in q.lines:
        w.append(process, type, f, value, error)


@pytest.mark.spark
def test_each_check_sees_the_complete_lines_and_counts_what_fail_on_counts(spark, tmp_path):
    path = tmp_path / "history.jsonl"
    logged: list[str] = []
    with HistoryWriter(path, header={"config": CONFIG}) as w:
        live = LiveCheck(path, tmp_path, "local[2]", "violation", 1.0, True, log=logged.append)
        assert live.check_once() is None  # a header and no op: nothing to check yet
        _append(w, _clean())
        first = live.check_once()
        assert first["lines"] == 7 and first["anomalies"] == {} and first["counted"] == []
        assert logged == []  # nothing found, nothing changed: nothing said
        # a line being written is left for the next check
        w.append(0, "invoke", "send", [["send", 0, 1]])
        with path.open("ab") as f:
            f.write(b'{"index":99')
        second = live.check_once()
        assert second["lines"] == 8 and second["counted"] == []
    assert live.snapshot.read_bytes().count(b"\n") == 8
    assert live.snapshot.read_bytes().endswith(b"\n")
    assert [json.loads(x)["check"] for x in (tmp_path / "live.jsonl").read_text().splitlines()] \
        == [1, 2]

    # the plan forbids duplicates, so "violation" counts one; without the plan's word Kafka
    # permits it here, and only "any" counts it
    # (the offsets also order the two writes of value 1 both ways: a G0 cycle, always
    # permitted)
    for forbid, fail_on, counted in ((["duplicate"], "violation", ["duplicate"]),
                                     ([], "violation", []),
                                     ([], "any", ["duplicate", "G0", "G0-realtime"])):
        d = tmp_path / f"{fail_on}-{len(forbid)}"
        d.mkdir()
        _duplicated(dict(CONFIG, forbid=forbid)).write(d / "history.jsonl")
        entry = LiveCheck(d / "history.jsonl", d, "local[2]", fail_on, 1.0, True).check_once()
        assert entry["anomalies"] == {"duplicate": 1, "G0": 1, "G0-realtime": 1}
        assert entry["counted"] == counted and entry["check_s"] > 0, fail_on


@pytest.mark.spark
def test_the_thread_stops_the_run_once_and_close_cleans_up(spark, tmp_path):
    path = tmp_path / "history.jsonl"
    stopped = threading.Event()
    names: list[list[str]] = []
    with HistoryWriter(path, header={"config": CONFIG}) as w:
        _append(w, _duplicated())

        def on_stop(found: list[str]) -> None:
            names.append(found)
            stopped.set()

        live = LiveCheck(path, tmp_path, "local[2]", "violation", 1.0, True, on_stop=on_stop)
        live.start()
        assert stopped.wait(120), "no stop asked"
        facts = live.close()
    assert names == [["duplicate"]]
    assert facts["checks"] == 1 and facts["errors"] == 0 and facts["counted"] == ["duplicate"]
    assert facts["found"]["duplicate"] == 1 and facts["stopped_at_s"] >= 1.0
    assert not live.snapshot.parent.exists()  # the snapshot is gone, the record stays
    assert (tmp_path / "live.jsonl").read_text().count("\n") == 1
    assert live.summary() == "live check 1: duplicate 1 (!), G0 1, G0-realtime 1"
