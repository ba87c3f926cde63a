"""Pure logic of the run configuration, error table, broker properties and nemesis routing."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import KafkaError

from kafka_chaos.clusters import backends
from kafka_chaos.clusters.base import Node
from kafka_chaos.clusters.errors import EnvironmentUnsupported
from kafka_chaos.clusters.kafka_config import initial_controllers, server_properties
from kafka_chaos.admission import admit
from kafka_chaos.config import RunConfig
from kafka_chaos.nemesis.base import Composed, Nemesis, NemesisError
from kafka_chaos.catalogue.faults import parse_packages
from kafka_chaos.workloads.outcomes import classify
from kafka_chaos.workloads.settings import WorkloadSettings


@pytest.mark.parametrize("kwargs, message", [
    ({"acks": "0", "idempotence": True}, "needs acks=all"),
    ({"acks": "1", "idempotence": True}, "needs acks=all"),
    ({"min_insync_replicas": 4}, "exceeds the replication factor"),
    ({"brokers": 1}, "exceeds --brokers"),
    ({"scenario": "nope"},
     "choose from acks1-lagging-follower, acks1-leader-move, damaged-last-replica, "
     "delayed-end-txn"),
    ({"scenario": "isr-shrink-unclean", "nemesis": ["kill"]}, "--nemesis none"),
    ({"nemesis": ["request"]}, "request faults happen in the Kafka protocol proxy; add --proxy"),
    ({"proxy_fault": "forget-leader-epoch"}, "--proxy-fault: request faults happen in the "
     "Kafka protocol proxy; add --proxy"),
    ({"proxy_fault": "lose-it", "proxy": True}, "--proxy-fault 'lose-it': choose from delay"),
    ({"scenario": "isr-shrink-unclean", "acks": "1"}, "--acks all"),
    ({"txn": True, "acks": "1"}, "--acks 1 with --txn"),
    ({"txn": True, "auto_commit": True}, "commits its consumer offsets itself"),
    ({"abort_p": 0.5}, "--abort-p needs --txn"),
    ({"txn_ids": "process"}, "--txn-ids needs --txn"),
    ({"topics": 4, "keys": 3}, "--topics 4 exceeds --keys 3"),
    ({"ops_per_txn": (3, 2)}, "need 1 <= MIN <= MAX"),
    ({"isolation_level": "serializable"}, "read_committed"),
    ({"sub_via": "both"}, "assign"),
    ({"client": "rust"}, "librdkafka"),
    ({"group_protocol": "consumer"}, "needs --sub-via subscribe"),
    ({"sub_via": "subscribe", "group_protocol": "consumer", "kafka_version": "3.9.1"},
     "needs Kafka 4.0 or later"),
    ({"client_version": "2.16"}, "a release of librdkafka \\(confluent-kafka\\), MAJOR"),
    ({"sub_via": "share", "client_version": "2.14.0"},
     "needs librdkafka \\(confluent-kafka\\) 2.15 or later"),
    ({"client": "java", "delivery_timeout_ms": 2000}, "linger.ms \\+ request.timeout.ms"),
    ({"sub_via": "share", "txn": True}, "take no part in transactions"),
    ({"sub_via": "share", "client": "java", "client_version": "4.1.1"},
     "needs kafka-clients 4.2 or later"),
    ({"sub_via": "share", "kafka_version": "4.1.1"}, "needs Kafka 4.2 or later"),
    ({"sub_via": "share", "share_delivery_limit": 11}, "less than or equal to 10"),
])
def test_invalid_combinations_are_refused(kwargs, message):
    """By the settings model itself, or on admission (a scenario's file)."""
    with pytest.raises(ValueError, match=message):
        admit(RunConfig(**kwargs))


def test_share_groups_on_an_attached_cluster_are_asked_of_the_cluster_not_the_version():
    """An attached cluster's Kafka version is unknown to the tool: the run asks its brokers
    for ShareGroupHeartbeat at the start (``attach.create_topics``) instead."""
    cfg = RunConfig(sub_via="share", backend="external", bootstrap_servers="b:9092",
                    kafka_version="4.1.1")
    assert cfg.sub_via == "share"


@pytest.mark.parametrize("kwargs, idempotent", [
    ({}, False), ({"client": "java"}, True), ({"client": "java", "acks": "1"}, False),
    ({"client": "java", "retries": 0}, False), ({"client": "java", "max_in_flight": 6}, False),
    ({"client": "java", "idempotence": False}, False), ({"idempotence": True}, True)])
def test_an_unset_idempotence_is_recorded_as_the_client_resolves_it(kwargs, idempotent):
    """librdkafka's default is off; the Java client's on unless a setting conflicts
    (KIP-679); what the run records is what the producer ran with, for the verdict."""
    cfg = RunConfig(**kwargs)
    assert cfg.idempotence is idempotent and cfg.model_dump()["idempotence"] is idempotent
    settings = WorkloadSettings.from_config(cfg)
    assert settings.java_producer_config("b:9092")["enable.idempotence"] is idempotent
    # kafka-clients of the Kafka release unless asked; confluent-kafka the installed one
    assert settings.client_version == (cfg.client_version or (
        cfg.kafka_version if cfg.client == "java" else ""))


def test_ops_per_txn_ranges_parse():
    from kafka_chaos.config import parse_range

    assert parse_range("1..4") == (1, 4) and parse_range(" 3 ") == (3, 3)
    for bad in ("", "1..", "a..b", "-1..2", "1...4"):
        with pytest.raises(ValueError, match="is not N or MIN..MAX"):
            parse_range(bad)


def test_workload_settings_follow_the_config():
    s = WorkloadSettings.from_config(RunConfig(txn=True, abort_p=0.25, ops_per_txn=(2, 6),
                                               crash_clients=True, crash_client_interval_s=3))
    assert (s.txn, s.abort_p, s.mops_min, s.mops_max, s.crash_interval_s) == (True, 0.25, 2, 6, 3)
    conf = s.producer_config("b:9092", "kc-txn-0")
    assert conf["enable.idempotence"] is True and conf["transactional.id"] == "kc-txn-0"
    assert s.consumer_config("b:9092", "g")["enable.auto.commit"] is False
    assert WorkloadSettings.from_config(RunConfig()).crash_interval_s == 0.0
    # a slot's id outlives its processes (KIP-98 fencing); a process's own is never reused
    own = WorkloadSettings.from_config(RunConfig(txn=True, txn_ids="process"))
    assert (s.transactional_id(7, 2), own.transactional_id(7, 2)) == ("kc-txn-2", "kc-txn-7")
    assert WorkloadSettings.from_config(RunConfig()).transactional_id(7, 2) is None


def test_keys_spread_over_topics_and_map_back():
    from kafka_chaos.workloads.keys import KeySpace

    ks = KeySpace("t", keys=5, topics=2)
    assert ks.topic_partitions == {"t": 3, "t-1": 2}
    assert [ks.tp(k) for k in range(5)] == [("t", 0), ("t-1", 0), ("t", 1), ("t-1", 1), ("t", 2)]
    assert all(ks.key(*ks.tp(k)) == k for k in range(5))
    with pytest.raises(KeyError):
        ks.key("t-1", 2)
    with pytest.raises(ValueError):
        KeySpace("t", keys=1, topics=2)


def test_generator_is_seeded_and_follows_the_modes():
    import itertools

    from kafka_chaos.workloads.generator import Generator
    from kafka_chaos.workloads.keys import KeySpace
    from kafka_chaos.workloads.settings import WorkloadSettings

    def ops(settings, n=200, seed=7):
        gen = Generator(settings, KeySpace(keys=4), random.Random(seed), itertools.count())
        out, uncommitted = [], {}
        for i in range(n):
            out.append(gen.next(uncommitted, fresh=i == 0, crash=i == 50))
            uncommitted = {"0": 3} if out[-1][0] == "poll" else {}
        return out

    plain = ops(WorkloadSettings(mops_min=2, mops_max=3))
    assert plain == ops(WorkloadSettings(mops_min=2, mops_max=3))  # same seed, same ops
    assert plain[0][0] == "assign" and plain[50] == ("crash", None)
    sends = [v for f, v in plain if f == "send"]
    assert sends and all(2 <= len(v) <= 3 for v in sends)
    values = [m[2] for v in sends for m in v]
    assert len(values) == len(set(values))  # every value unique
    assert {f for f, _ in plain} >= {"assign", "send", "poll"}
    group = ops(WorkloadSettings(sub_via="subscribe"))
    assert group[0] == ("subscribe", group[0][1]) and group[0][1]["group"] == "kc-group"
    assert any(f == "commit" for f, _ in group)  # manual commits follow polls
    txn = ops(WorkloadSettings(txn=True, sub_via="subscribe"))
    assert {f for f, _ in txn} <= {"subscribe", "txn", "crash"}
    assert any(m == ["poll"] for f, v in txn if f == "txn" for m in v)
    shared = ops(WorkloadSettings(sub_via="share", ids="r1"))
    assert {f for f, _ in shared} == {"send", "share", "crash"}
    # a crash first acquires records and acknowledges none, so that they stay locked
    assert shared[50] == ("share", {"group": "r1-share", "hold": True})
    assert shared[51] == ("crash", None)


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


def test_ports_are_node_data():
    nodes = [Node(1, "n1", "172.18.0.2", ("broker", "controller"), broker_port=19092,
                  controller_port=19093),
             Node(2, "n2", "172.18.0.3", ("broker", "controller"), 19092, 19093)]
    p = _props(server_properties(nodes[0], nodes, "/d", {}))
    assert p["listeners"] == "PLAINTEXT://172.18.0.2:19092,CONTROLLER://172.18.0.2:19093"
    assert p["advertised.listeners"] == "PLAINTEXT://172.18.0.2:19092"
    assert p["controller.quorum.voters"] == "1@172.18.0.2:19093,2@172.18.0.3:19093"
    assert [n.client_endpoint for n in nodes] == ["172.18.0.2:19092", "172.18.0.3:19092"]


def test_backends_are_chosen_in_one_place():
    assert backends.NAMES[0] == "local"
    assert backends.get("local").name == "local"
    with pytest.raises(EnvironmentUnsupported, match="unknown cluster backend 'k8s'"):
        backends.get("k8s")
    with pytest.raises(ValueError, match="--backend 'k8s': choose from local"):
        RunConfig(backend="k8s")


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
    from kafka_chaos.workloads.outcomes import COMMIT_REJECTED, DEFINITE_FAILURES, FAIL_IF_SINGLE_ATTEMPT

    codes = [getattr(KafkaError, n) for n in dir(KafkaError) if n.lstrip("_").isupper()]
    known = {KafkaError(c).name() for c in codes if isinstance(c, int)}
    assert DEFINITE_FAILURES | FAIL_IF_SINGLE_ATTEMPT | COMMIT_REJECTED <= known


def test_cluster_ids_never_look_like_options():
    from kafka_chaos.clusters.local import kafka_uuid

    ids = [kafka_uuid() for _ in range(5000)]  # 1 in 64 raw ids starts with "-"
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("error, committing, expected", [
    (KafkaError(KafkaError.PRODUCER_FENCED, fatal=True), False, "fatal"),
    (KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True), True, "fatal"),
    (KafkaError(KafkaError.INVALID_TXN_STATE, txn_requires_abort=True), True, "abort"),
    (KafkaError(KafkaError._TIMED_OUT, retriable=True), True, "retry"),
    (KafkaError(KafkaError._TIMED_OUT, retriable=True), False, "unknown"),
    (KafkaError(KafkaError._TRANSPORT), True, "unknown"),
])
def test_transactional_errors_follow_librdkafkas_classes(error, committing, expected):
    from kafka_chaos.workloads.outcomes import txn_action

    assert txn_action(error, committing) == expected


def test_only_rejected_commits_are_fail():
    from kafka_chaos.workloads.outcomes import classify_commit

    assert classify_commit(KafkaError(KafkaError.REBALANCE_IN_PROGRESS)) == "fail"
    assert classify_commit(KafkaError(KafkaError._TIMED_OUT)) == "info"


def test_a_power_loss_fault_asks_for_the_lossy_filesystem_which_only_local_has():
    assert not admit(RunConfig()).backend.lossy_fs
    assert admit(RunConfig(nemesis=["kill", "lose-unfsynced"])).backend.lossy_fs
    assert admit(RunConfig(scenario="last-replica-standing")).backend.lossy_fs
    assert not admit(RunConfig(scenario="isr-shrink-unclean")).backend.lossy_fs
    options = backends.BackendOptions(lossy_fs=True)
    for name in ("docker", "ssh"):
        with pytest.raises(EnvironmentUnsupported, match=f"needs --backend local, not {name}"):
            backends.get(name).check_environment(options, 3, 0)


def test_clock_faults_ask_for_libfaketime_which_only_local_preloads():
    assert admit(RunConfig(nemesis=["clock"])).backend.clock
    assert not admit(RunConfig(nemesis=["kill"])).backend.clock
    with pytest.raises(EnvironmentUnsupported, match="clock faults need --backend local or ssh"):
        backends.get("docker").check_environment(backends.BackendOptions(clock=True), 3, 0)
    with pytest.raises(ValueError, match="unknown fault 'nope'"):
        RunConfig(nemesis=["nope"])


def test_membership_faults_ask_for_a_dynamic_quorum_which_the_own_cluster_backends_format():
    assert admit(RunConfig(nemesis=["membership"])).backend.dynamic_quorum
    assert not admit(RunConfig(nemesis=["kill"])).backend.dynamic_quorum
    options = backends.BackendOptions(dynamic_quorum=True)
    backends.get("docker").check_options(options, 3, 0)
    backends._no_options("ssh", options)
    with pytest.raises(EnvironmentUnsupported, match="membership faults need --backend local, "
                       "docker or ssh, not external"):
        backends._no_options("external", options)


def test_attaching_takes_its_own_options_and_refuses_faults_it_cannot_make(tmp_path):
    """``--backend external`` needs ``--bootstrap-servers`` and takes no fault; the attach
    options are refused on backends that make their own plaintext cluster; the workload's
    clients carry the security settings and the run's ids."""
    import dataclasses

    ok = RunConfig(backend="external", bootstrap_servers="h:9092", client_properties="/p",
                   keep_topics=True)
    assert admit(ok).backend.bootstrap_servers == "h:9092"
    attach = {"backend": "docker-attach", "bootstrap_servers": "h:1", "compose_project": "p"}
    assert admit(RunConfig(**attach, nemesis=["kill", "partition"])).backend \
        .compose_project == "p"
    RunConfig(**attach, nemesis=["unclean"], nemesis_targets="topic")  # explicit: own topics
    for fields, words in (({"backend": "external"}, "--bootstrap-servers goes with"),
                          ({"bootstrap_servers": "h:9092"}, "--bootstrap-servers goes with"),
                          ({"containers": "a,b"}, "need --backend docker-attach"),
                          ({**attach, "nemesis": ["unclean"]}, "--nemesis-targets topic"),
                          ({**attach, "nemesis": ["clock"]}, "the clock faults need"),
                          ({**attach, "scenario": "isr-shrink-unclean"}, "toggles unclean"),
                          ({"client_properties": "/p"}, "--client-properties"),
                          ({"keep_topics": True}, "--keep-topics"),
                          ({"fault_last_broker": True}, "--fault-last-broker"),
                          ({"backend": "external", "bootstrap_servers": "h:1",
                            "nemesis": ["kill"]}, "cannot fault")):
        with pytest.raises(ValueError, match=words):
            admit(RunConfig(**fields))
    s = dataclasses.replace(WorkloadSettings.from_config(RunConfig()), ids="kafka-chaos-r1",
                            connection={"security.protocol": "SSL", "sasl.password": "pw"})
    assert s.producer_config("b:9092", "x")["security.protocol"] == "SSL"
    assert s.consumer_config("b:9092", "g")["sasl.password"] == "pw"
    assert "pw" not in repr(s)


def test_every_backend_is_either_ours_or_attaching():
    assert set(backends.OWN) | set(backends.ATTACHING) == set(backends.NAMES)
    assert not set(backends.OWN) & set(backends.ATTACHING)
    for name in backends.NAMES:  # each name a user may give is a backend of that name
        assert backends.get(name).name == name
    with pytest.raises(EnvironmentUnsupported, match=", ".join(backends.NAMES)):
        backends.get("k8s")


def test_a_share_group_run_sets_the_brokers_lock_and_delivery_limit():
    """The checker judges by the lock and the limit (``analysis.checkers.share``), so the
    brokers get exactly those, their bounds opened to them; other runs set none."""
    props = RunConfig(sub_via="share", share_lock_ms=4000, share_delivery_limit=4).broker_config()
    assert props["group.share.record.lock.duration.ms"] == "4000"
    assert props["group.share.min.record.lock.duration.ms"] == "4000"
    assert props["group.share.delivery.count.limit"] == "4"
    assert props["group.share.session.timeout.ms"] == "6000"
    assert not any(k.startswith("group.share.") for k in RunConfig().broker_config())


def test_admission_reads_once_what_the_run_needs():
    """The runner takes the scenario's steps, the packages, their targets and the backend's
    options from the ``Admitted`` record: the scenario file is read once, on admission."""
    from kafka_chaos.admission import SCRIPTED

    scripted = admit(RunConfig(scenario="isr-shrink-unclean"))
    assert scripted.scenario is not None and scripted.scenario.name == "isr-shrink-unclean"
    assert scripted.packages == SCRIPTED and set(scripted.targets) == set(SCRIPTED)
    assert scripted.toggles_unclean and "unclean-on" in scripted.faults
    planned = admit(RunConfig(nemesis=["kill", "partition"], nemesis_targets="leader,halves"))
    assert planned.scenario is None and planned.packages == ("kill", "partition")
    assert planned.targets == {"kill": ["leader"], "partition": ["halves"]}
    assert planned.faults == {"kill", "partition"} and not planned.toggles_unclean


def test_a_dynamic_quorum_is_found_through_bootstrap_servers_and_formatted_with_its_voters():
    nodes = [Node(1, "n1", "10.0.0.1", ("broker",)),
             Node(2, "c1", "10.0.0.2", ("controller",)), Node(3, "c2", "10.0.0.3", ("controller",))]
    p = _props(server_properties(nodes[0], nodes, "/d", {}, dynamic=True, metadata_dir="/m"))
    assert "controller.quorum.voters" not in p
    assert p["controller.quorum.bootstrap.servers"] == "10.0.0.2:9093,10.0.0.3:9093"
    assert p["metadata.log.dir"] == "/m" and p["log.dirs"] == "/d"
    assert "metadata.log.dir" not in _props(server_properties(nodes[0], nodes, "/d", {}))
    assert initial_controllers(nodes, {2: "AAA", 3: "BBB"}) == (
        "2@10.0.0.2:9093:AAA,3@10.0.0.3:9093:BBB")
