"""``kafka-chaos shrink`` on real brokers (the longer tier: about 20 replays). A random
schedule of kills, partitions and pauses under ``acks=1`` loses acknowledged writes; the
shrink must end with at most 2 of its faults that still lose writes in 2 of at most 3
replays, write them as a scenario that ``run --scenario`` accepts with the run's settings,
and a resumed shrink must run nothing more."""

from __future__ import annotations

import json

import pytest
import yaml

from kafka_chaos.config import RunConfig
from kafka_chaos.nemesis.script import Script
from kafka_chaos.options import scenario_settings
from tests.integration.conftest import kafka_chaos, leftovers

pytestmark = [pytest.mark.kafka, pytest.mark.long]
SOURCE = ("--acks", "1", "--nemesis", "kill,partition,pause", "--time-limit", "40",
          "--nemesis-interval", "5")


def _losing_run(tmp_path):
    """A run of ``SOURCE`` that lost writes: seeds 1, 2, 3 in turn (a schedule finds lost
    writes at a rate); the test fails, naming the verdicts, when none did."""
    seen = []
    for seed in (1, 2, 3):
        out = tmp_path / f"source-{seed}"
        proc = kafka_chaos("run", *SOURCE, "--seed", str(seed), "--out", str(out),
                           timeout_s=600)
        run_dir = (out / "latest").resolve()
        results = json.loads((run_dir / "results.json").read_text())
        if results["anomalies"]["lost-write"]["count"] > 0:
            return run_dir
        seen.append((seed, proc.returncode, results["verdict"]))
    pytest.fail(f"no run of {' '.join(SOURCE)} lost a write: {seen}")


def test_a_lossy_random_schedule_shrinks_to_at_most_two_faults(tmp_path) -> None:
    source = _losing_run(tmp_path)
    proc = kafka_chaos("shrink", str(source), "--outcome", "anomaly:lost-write",
                       "--out", str(tmp_path), timeout_s=5400)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    [where] = list(tmp_path.glob("shrink-*"))
    answer = json.loads((where / "shrink.json").read_text())
    assert answer["reproduced"] and len(answer["units"]) >= 2, answer
    assert 1 <= len(answer["kept"]) <= 2, answer
    assert answer["rate"]["shown"] >= 2 and answer["rate"]["ran"] <= 3, answer
    # the candidates: the whole schedule first, then ever fewer faults, each decided
    rows = answer["candidates"]
    assert rows[0]["faults"] == len(answer["units"]) and rows[0]["reproduces"] is True
    assert all(r["reproduces"] is not None for r in rows), rows
    # the scenario replays the kept faults with the run's settings
    shrunk = yaml.safe_load((where / "shrunk.yaml").read_text())
    script = Script(**shrunk)
    seed = int(source.parent.name.removeprefix("source-"))
    assert (shrunk["settings"]["acks"], shrunk["settings"]["seed"]) == ("1", seed), shrunk
    faults = [s for s in script.steps if set(s.do) & {"kill", "partition", "pause"}]
    assert len(faults) == len(answer["kept"])
    fields = {"scenario": str(where / "shrunk.yaml")}  # as run --scenario FILE takes it
    scenario_settings(fields, set(), lambda line: None)
    assert RunConfig(**fields).acks == "1"
    again = kafka_chaos("shrink", "--resume", str(where))
    assert again.returncode == 0 and "run 1/" not in again.stdout, again.stdout[-3000:]
    assert leftovers() == []
