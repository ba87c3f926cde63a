"""``kafka-chaos bisect`` on real brokers: scenario ``delayed-end-txn`` (KAFKA-17754) over the
Java client's versions against a 4.4.0 cluster. kafka-clients 3.9.1 speaks transactions v1,
whose late EndTxn tears the next transaction (a violation); 4.4.0 speaks transactions v2
(KIP-890), which the tear cannot reach (valid). The bisect must name that boundary, store
each run as a comparison does, and a resumed bisect must find nothing left to run."""

from __future__ import annotations

import json

import pytest

from kafka_chaos.clusters import dist
from tests.integration.conftest import kafka_chaos, leftovers

pytestmark = pytest.mark.kafka


@pytest.mark.long  # 225 s in a full run of 2026-12-01; tests/unit/test_bisect.py stays in it
def test_a_bisect_of_the_java_client_names_the_transactions_v2_boundary(tmp_path) -> None:
    proc = kafka_chaos("bisect", "--axis", "client", "--versions", "4.4.0,3.9.1",
                       "--runs", "1", "--outcome", "violation", "--scenario",
                       "delayed-end-txn", "--client", "java", "--kafka-version",
                       dist.DEFAULT_KAFKA_VERSION, "--out", str(tmp_path), timeout_s=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    [where] = list(tmp_path.glob("bisect-*"))
    answer = json.loads((where / "bisect.json").read_text())
    assert answer["order"] == ["3.9.1", "4.4.0"] and answer["done"], answer
    rows = {r["version"]: r for r in answer["versions"]}
    assert rows["3.9.1"]["shows"] is True and rows["3.9.1"]["verdicts"] == {"violation": 1}
    assert rows["4.4.0"]["shows"] is False and rows["4.4.0"]["verdicts"] == {"valid": 1}
    assert answer["changes"] == [{"before": "3.9.1", "after": "4.4.0", "from": True,
                                  "to": False}]
    assert answer["summary"] == "violation disappears between 3.9.1 and 4.4.0"
    assert "violation disappears between 3.9.1 and 4.4.0" in proc.stdout
    # each run is an ordinary run directory, its client the version the bisect set
    manifest = json.loads((where / "compare.json").read_text())
    for cell in manifest["cells"]:
        version = cell["settings"]["client_version"]
        results = json.loads((where / cell["id"] / f"seed-{manifest['seeds'][0]}"
                              / "results.json").read_text())
        assert (results["client"]["name"], results["client"]["version"]) == ("java", version)
    assert "| 3.9.1 | 1 | 1 | 1 | 1.00 | yes | 1 violation |" in \
        (where / "bisect.md").read_text()
    again = kafka_chaos("bisect", "--resume", str(where))
    assert again.returncode == 0 and "violation disappears" in again.stdout, again.stdout
    assert leftovers() == []


@pytest.mark.long  # 16 versions (2026-12-01) x 3 runs, 1.6-2.1 min a run: 80-100 min
def test_delayed_end_txn_over_every_served_kafka_version_with_librdkafka(tmp_path) -> None:
    """The Kafka axis, every release Maven Central serves from 3.9.0 to the default, 3 runs
    each: librdkafka speaks transactions v1 only (KIP-890's v2 needs the client's support),
    so KAFKA-17754's late EndTxn tears the next transaction on every broker version; each
    run's violation must be that tear (G1a), not something else."""
    proc = kafka_chaos("bisect", "--axis", "kafka", "--versions",
                       f"3.9.0..{dist.DEFAULT_KAFKA_VERSION}", "--all", "--runs", "3",
                       "--outcome", "violation:G1a", "--scenario", "delayed-end-txn",
                       "--client", "librdkafka", "--out", str(tmp_path), timeout_s=3 * 3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    [where] = list(tmp_path.glob("bisect-*"))
    answer = json.loads((where / "bisect.json").read_text())
    assert answer["done"] and answer["exhaustive"] and answer["undecided"] == [], answer
    assert answer["order"][0] == "3.9.0" and answer["order"][-1] == dist.DEFAULT_KAFKA_VERSION
    assert len(answer["order"]) >= 15, answer["order"]  # 3.9.0-3.9.2 and 4.0-4.4's releases
    for row in answer["versions"]:  # a rate, not a bit: shown in one judged run is shown
        assert row["runs"] == row["judged"] == 3 and row["shows"] is True, row
    assert answer["changes"] == [] and answer["summary"] == \
        "every version run shows violation:G1a", answer["summary"]
    assert leftovers() == []
