"""The warm-up check a short run makes while its workload goes (``analysis.warm``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from kafka_chaos.analysis.warm import warm_up


def test_warm_up_checks_every_kind_of_op_and_leaves_nothing(spark) -> None:
    before = set(Path(tempfile.gettempdir()).glob("kc-warm-up-*"))
    result = warm_up("local[2]")
    # a clean verdict with nothing unknown: every checker ran on it without raising
    assert result["valid"] is True and result["unknown_reasons"] == []
    assert result["anomaly_types"] == []
    # sends, polls, a transaction and an assign: the plans of every checker get compiled
    assert {f for f, n in result["stats"]["by_f"].items() if n["ok"]} == {
        "assign", "poll", "send", "txn"}
    assert result["stats"]["acked_sends"] == 3 and result["cycle_search"]["complete"]
    assert set(Path(tempfile.gettempdir()).glob("kc-warm-up-*")) == before
