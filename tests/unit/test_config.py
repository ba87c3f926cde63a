"""Pure logic of the run configuration, error table, broker properties and nemesis routing."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import KafkaError
from pydantic import ValidationError

from clusters.base import Node
from clusters.kafka_config import server_properties
from kafka_chaos.config import RunConfig
from nemesis.base import Composed, Nemesis, NemesisError
from nemesis.schedule import parse_packages
from workloads.outcomes import classify


@pytest.mark.parametrize("kwargs, message", [
    ({"acks": "0", "idempotence": True}, "needs acks=all"),
    ({"acks": "1", "idempotence": True}, "needs acks=all"),
    ({"min_insync_replicas": 4}, "exceeds the replication factor"),
    ({"brokers": 1}, "exceeds --brokers"),
    ({"scenario": "nope"}, "choose from isr-shrink-unclean"),
    ({"scenario": "isr-shrink-unclean", "nemesis": ["kill"]}, "--nemesis none"),
    ({"scenario": "isr-shrink-unclean", "acks": "1"}, "--acks all"),
])
def test_invalid_combinations_are_refused(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        RunConfig(**kwargs)


def test_defaults_are_valid_and_reach_the_brokers():
    cfg = RunConfig()
    assert cfg.acks == "all" and cfg.min_insync_replicas == 2 and cfg.brokers == 3
    props = cfg.broker_config()
    assert props["min.insync.replicas"] == "2"
    assert props["unclean.leader.election.enable"] == "false"


def test_parse_packages():
    assert parse_packages("kill, partition") == ["kill", "partition"]
    assert parse_packages("none") == []
    with pytest.raises(ValueError, match="unknown fault 'kil'"):
        parse_packages("kil")


@pytest.mark.parametrize("code, retries, expected", [
    (KafkaError.MSG_SIZE_TOO_LARGE, 5, "fail"),
    (KafkaError._MSG_TIMED_OUT, 5, "info"),
    (KafkaError.NOT_LEADER_FOR_PARTITION, 0, "info"),  # KAFKA-13574: may have been written
    (KafkaError.NOT_ENOUGH_REPLICAS, 0, "fail"),     # refused before append, single attempt
    (KafkaError.NOT_ENOUGH_REPLICAS, 3, "info"),     # an earlier attempt may have landed
    (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0, "info"),
    (KafkaError._TRANSPORT, 0, "info"),
])
def test_only_proven_failures_are_fail(code, retries, expected):
    assert classify(KafkaError(code), retries) == expected


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_server_properties_combined_and_dedicated():
    combined = [Node(i, f"n{i}", f"10.0.0.{i}", ("broker", "controller")) for i in (1, 2)]
    p = _props(server_properties(combined[0], combined, "/d", {"min.insync.replicas": "3"}))
    assert p["process.roles"] == "broker,controller"
    assert p["controller.quorum.voters"] == "1@10.0.0.1:9093,2@10.0.0.2:9093"
    assert p["listeners"] == "PLAINTEXT://10.0.0.1:9092,CONTROLLER://10.0.0.1:9093"
    # capped at the broker count, or no write and no internal topic could ever succeed
    assert p["default.replication.factor"] == "2" and p["min.insync.replicas"] == "2"

    nodes = [Node(1, "n1", "10.0.0.1", ("broker",)), Node(2, "c1", "10.0.0.2", ("controller",))]
    ctrl = _props(server_properties(nodes[1], nodes, "/d", {}))
    assert ctrl["process.roles"] == "controller"
    assert ctrl["controller.quorum.voters"] == "2@10.0.0.2:9093"
    assert "advertised.listeners" not in ctrl


class _Fake(Nemesis):
    def __init__(self, fs):
        super().__init__(cluster=None, rng=random.Random(0))
        self.fs = frozenset(fs)

    def invoke(self, f, value):
        return {"did": f}


def test_compose_routes_by_f_and_refuses_overlaps():
    composed = Composed([_Fake({"kill", "start"}), _Fake({"partition", "heal"})])
    assert composed.invoke("heal", None) == {"did": "heal"}
    with pytest.raises(NemesisError, match="no nemesis handles"):
        composed.invoke("pause", None)
    with pytest.raises(NemesisError, match="two nemeses handle"):
        Composed([_Fake({"kill"}), _Fake({"kill"})])


def test_error_table_names_real_librdkafka_errors():
    from workloads.outcomes import DEFINITE_FAILURES, FAIL_IF_SINGLE_ATTEMPT

    codes = [getattr(KafkaError, n) for n in dir(KafkaError) if n.lstrip("_").isupper()]
    known = {KafkaError(c).name() for c in codes if isinstance(c, int)}
    assert DEFINITE_FAILURES | FAIL_IF_SINGLE_ATTEMPT <= known


def test_cluster_ids_never_look_like_options():
    from clusters.local import kafka_uuid

    ids = [kafka_uuid() for _ in range(5000)]  # 1 in 64 raw ids starts with "-"
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
