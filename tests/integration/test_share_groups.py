"""Share groups (KIP-932, ``--sub-via share``) on a real 4.4.0 cluster, on each client: share
consumers that accept, release and reject at random and crash holding locked records, under
kills, pauses and partitions; the share checker's counts, and the coordinator's own state
after the drain.

The verdict is not asserted valid: on this seed the run recorded records accepted twice with
both acknowledgements answered ok (docs/clients.md, "Found"), which the checker rightly
reports. What must hold is asserted: the faults ran, the drain ended quiet with nothing left
in flight, the share coordinator's log was read, no record was lost or delivered past its
limit, redeliveries were counted and permitted, and every finding reached a verdict."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.integration.conftest import kafka_chaos, leftovers, results_of
from tests.preconditions import require

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("client", ["librdkafka", pytest.param("java", marks=pytest.mark.long)])
def test_a_share_group_under_crashes_kills_pauses_and_partitions(tmp_path, client):
    # as many faults and crashes as every 4 s in 40 s, with more time between them: in a CI
    # run of 2026-12-01 the share consumers got no record before the drain (likely: the share
    # coordinator's state is made at the group's first use, there under the faults)
    proc = kafka_chaos("run", "--client", client, "--sub-via", "share", "--crash-clients",
                       "--crash-client-interval", "6", "--nemesis", "kill,pause,partition",
                       "--nemesis-interval", "6", "--time-limit", "60", "--seed", "932",
                       "--out", str(tmp_path), timeout_s=900)
    run_dir = (tmp_path / "latest").resolve()
    res = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    assert res["client"]["name"] == client, res.get("client")
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
           if '"index"' in line]
    # the faults ran and healed, and the monitor saw a broker stop answering
    done_faults = {op["f"] for op in ops if op["process"] == "nemesis" and op["type"] == "ok"}
    assert {"kill", "pause", "partition"} <= done_faults, done_faults
    assert not facts["faults_not_run"] and not facts["heal_left"], facts
    samples = [op["value"] for op in ops if op["f"] == "cluster-state" and op["type"] == "ok"]
    assert any(not all(v["answering"].values()) for v in samples)
    # the monitor followed the share-partitions' start offsets as the coordinator gave them
    starts = [p["start_offset"] for v in samples for ps in v["share"].values()
              if isinstance(ps, list) for p in ps]
    assert len(starts) > len(samples) and max(starts) > 0, samples[-1]["share"]
    done = [op for op in ops if op["f"] == "share" and op["type"] != "invoke"]
    records = [r for op in done for r in op["value"]["records"]]
    acks = Counter(r[4] for r in records)
    # share consumers got records, acknowledged them every way, and some came back again
    # (a CI run of 2026-12-01 on a slow machine got its records only in the final drain,
    # which accepts all: the faults' chance at release and reject never came)
    require(len(records) >= 500 and {"accept", "release", "reject"} <= set(acks), acks)
    assert any(r[3] >= 2 for r in records)
    # crashes: a process held records unacknowledged, then died without closing
    holds = [op["index"] for op in ops if op["f"] == "share" and op["type"] == "invoke"
             and op["value"].get("hold")]
    crashes = [op for op in ops if op["f"] == "crash" and op["type"] == "info"]
    assert len(holds) >= 3 and len(crashes) >= 3
    # the drain ended quiet, and the coordinator agrees nothing is left in flight
    share = facts["share"]
    assert share["drain"] == "ok", share
    assert share["after"] and all(s["lag"] == 0 and s["start_offset"] > 0
                                  for s in share["after"].values()), share["after"]
    assert any(op["value"].get("drained") for op in done)
    a = res["anomalies"]
    # the coordinator's own log was read; a verdict was reached: every acknowledged record in
    # the log was settled, or archived at its limit by the coordinator's account (on Java, a
    # consumer's fetch-ahead left one such record of 3,854, its last delivery never returned);
    # none went past its limit; redeliveries were counted and permitted
    assert share["persisted"] == "ok", share["persisted"]
    assert res["verdict"] in ("valid", "violation") and not res["unknown_reasons"], res
    for name in ("share-lost", "share-over-limit"):
        assert a[name]["count"] == 0, (name, a[name]["examples"])
    assert a["share-redelivery"]["count"] > 0 and a["share-redelivery"]["permitted"]
    for ex in a["share-accepted-twice"]["examples"]:  # two acquisitions, both answered ok
        assert ex["outcome"] == "violation" and len(ex["op_indexes"]) == 2, ex
    assert set(res.get("violations") or []) <= {"share-accepted-twice", "share-after-ack",
                                                 "share-count-regress", "share-lock-overlap"}
    assert 'name="share delivery"' in (run_dir / "junit.xml").read_text()
    assert leftovers() == []
