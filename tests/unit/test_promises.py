"""The table of what each configuration promises (pure logic, no Spark)."""

from __future__ import annotations

import pytest

from kafka_chaos.analysis.checkers import ANOMALIES
from kafka_chaos.analysis.promises import RULES, UNCLEAN_ELECTED, facts_of, judge
from kafka_chaos.config import RunConfig


def facts(nemesis_ok=(), **overrides):
    return facts_of(RunConfig(**overrides).model_dump(mode="json"), set(nemesis_ok))


def rule(name, **overrides) -> str | None:
    return judge(name, facts(**overrides))["rule"]


def test_every_rule_names_real_anomalies_and_cites_a_source():
    for r in RULES:
        assert set(r.anomalies) <= set(ANOMALIES), r.name
        assert r.source and r.because


def test_the_default_quick_start_permits_duplicates_but_not_loss():
    assert rule("duplicate") == "retries-without-idempotence"
    assert rule("nonmonotonic-send") == "reordering-retries"
    assert rule("int-nonmonotonic-send") == "reordering-retries"
    verdict = judge("lost-write", facts())
    assert verdict["permitted"] is False and verdict["rule"] is None


@pytest.mark.parametrize("overrides", [{"idempotence": True}, {"txn": True}, {"retries": 0}])
def test_idempotence_or_no_retries_forbids_duplicates(overrides):
    assert rule("duplicate", **overrides) is None
    assert rule("nonmonotonic-send", **overrides) is None


def test_max_in_flight_1_forbids_reordering_but_not_duplicates():
    assert rule("nonmonotonic-send", max_in_flight=1) is None
    assert rule("duplicate", max_in_flight=1) == "retries-without-idempotence"


@pytest.mark.parametrize("overrides, expected", [
    ({"acks": "1"}, "acks-below-all"), ({"acks": "0"}, "acks-below-all"),
    ({"unclean_leader_election": True}, "unclean-leader-election"),
    ({"min_insync_replicas": 1}, "min-insync-replicas-1"),
])
def test_configurations_that_can_truncate_the_log_permit_loss(overrides, expected):
    for name in ("lost-write", "unseen", "inconsistent-offsets", "group-skip"):
        assert rule(name, **overrides) == expected


def test_unclean_election_enabled_at_runtime_by_the_nemesis_counts():
    assert judge("lost-write", facts(nemesis_ok={"unclean-on"}))["rule"] == \
        "unclean-leader-election"
    # a forced unclean ElectLeaders that elected nothing proves no unclean election
    assert judge("lost-write", facts(nemesis_ok={"kill", "elect-unclean"}))["permitted"] is False
    # one that elected a leader did happen, whatever the topic config said (KIP-460)
    assert judge("lost-write", facts(nemesis_ok={"kill", "elect-unclean", UNCLEAN_ELECTED}))[
        "rule"] == "unclean-leader-election"


def test_isolation_level_decides_aborted_reads():
    assert rule("G1a", txn=True, isolation_level="read_uncommitted") == "read-uncommitted"
    assert rule("precommitted-read", txn=True, isolation_level="read_uncommitted") == \
        "read-uncommitted"
    assert rule("G1a", txn=True) is None and rule("precommitted-read", txn=True) is None


def test_consumer_side_rules():
    assert rule("poll-skip", sub_via="subscribe") == "consumer-group-rebalances"
    assert rule("poll-skip") is None and rule("int-poll-skip", sub_via="subscribe") is None
    assert rule("group-redelivery") == "at-least-once-groups"
    assert rule("group-skip") is None
    assert rule("group-skip", auto_offset_reset="latest") == "reset-to-latest"


def test_cycles_and_interleavings_are_always_permitted_as_in_jepsen():
    for name in ("int-send-skip", "G0", "G0-process", "G1c", "G1c-realtime"):
        assert judge(name, facts(txn=True))["permitted"] is True


def test_an_unknown_configuration_permits_nothing():
    for name in ANOMALIES:
        verdict = judge(name, None)
        assert verdict["permitted"] is False and "unknown" in verdict["because"]


def test_a_power_loss_of_the_only_in_sync_replica_permits_loss_before_elr_only():
    from kafka_chaos.analysis.promises import LAST_IN_SYNC_LOST

    def lost_write(nemesis_ok, version):
        return judge("lost-write", facts(nemesis_ok, kafka_version=version))["rule"]

    hit = (LAST_IN_SYNC_LOST,)
    assert lost_write(hit, "3.9.1") == "last-in-sync-replica-lost-power"
    assert lost_write(hit, "4.0.0") == "last-in-sync-replica-lost-power"
    assert lost_write(hit, "4.1.0") is None  # ELR: a promise kept
    assert lost_write(("lose-unfsynced",), "3.9.1") is None


def test_the_light_name_list_matches_the_checkers():
    from kafka_chaos.analysis import elle, names

    assert names.CYCLE_ANOMALIES == elle.CYCLE_ANOMALIES
    assert set(names.ANOMALIES) == set(ANOMALIES) and len(ANOMALIES) == len(set(ANOMALIES))
