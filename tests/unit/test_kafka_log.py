"""The broker log's election lines (``analysis.kafka_log``), as Kafka 4.4 writes them."""

from __future__ import annotations

import datetime as dt

import pytest

from kafka_chaos.analysis import kafka_log

# lines of a real run (an unclean election after the toggle, then a clean one), one per kind
LEADER = ("[2026-11-29 11:44:45,194{zone}] INFO [Broker id=3] Leader kafka-chaos-0 with topic "
          "id Some(9RHrjeGXRDix2thqOC0nrQ) starts at leader epoch 2 from offset 795 with "
          "partition epoch 3, high watermark 791, ISR [3], adding replicas [] and removing "
          "replicas [] . Previous leader Some(-1) and previous leader epoch was 1. "
          "(state.change.logger)\n")
UNCLEAN = ("[2026-11-29 11:44:45,162{zone}] INFO [QuorumController id=3] UNCLEAN partition "
           "change for kafka-chaos-0 with topic ID 9RHrjeGXRDix2thqOC0nrQ: isr: [] -> [3], "
           "leader: -1 -> 3, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 1 -> "
           "2, elr: [2] -> [], lastKnownElr: [2] -> [], partitionEpoch: 2 -> 3 "
           "(org.apache.kafka.controller.ReplicationControlManager)\n")
FOLLOWER = ("[2026-11-29 11:46:16,477{zone}] INFO [Broker id=1] Follower kafka-chaos-0 starts "
            "at leader epoch 1 from offset 949 with partition epoch 1 and high watermark 925. "
            "Current leader is 3. (state.change.logger)\n")
TRUNCATED = ("[2026-11-29 11:46:17,816{zone}] INFO [UnifiedLog partition=kafka-chaos-0, "
             "dir=/tmp/runs/x/nodes/n1/data] Truncating to offset 812 "
             "(kafka.log.UnifiedLog)\n")
T0 = int(dt.datetime(2026, 11, 29, 11, 44, 0, tzinfo=dt.timezone.utc).timestamp()) * 10**9


@pytest.mark.parametrize("zone, offset_s", [("", 0), ("Z", 0), ("+01:00", 3600),
                                            ("+0100", 3600), ("", 3600), ("-05:30", -19800)])
def test_each_election_line_is_read_on_the_history_clock(tmp_path, zone, offset_s):
    log = tmp_path / "nodes" / "n1" / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(x.format(zone=zone) for x in (FOLLOWER, LEADER, UNCLEAN, TRUNCATED))
                   + "garbage\n[not a time] starts at leader epoch\n")
    read = kafka_log.read([log], T0, utc_offset_s=offset_s if not zone else 0)
    shift = -offset_s * 10**9
    assert read == [
        kafka_log.Logged("unclean", ("kafka-chaos", 0), 2, 3, 45_162_000_000 + shift),
        kafka_log.Logged("leader", ("kafka-chaos", 0), 2, 3, 45_194_000_000 + shift, 795, 791,
                         (3,)),
        kafka_log.Logged("follower", ("kafka-chaos", 0), 1, 1, 136_477_000_000 + shift, 949,
                         925),
        kafka_log.Logged("truncated", ("kafka-chaos", 0), -1, -1, 137_816_000_000 + shift,
                         812, node="n1"),
    ]


def test_a_topic_name_with_dashes_and_digits_keeps_them():
    line = LEADER.format(zone="Z").replace("kafka-chaos-0", "a-1-b-12")
    [x] = kafka_log.read_lines([line], T0)
    assert x.tp == ("a-1-b", 12)


@pytest.mark.parametrize("header, clock_faults, usable", [
    ({"clock": {"unix_ns": 5, "brokers": "host"}}, False, True),
    ({"clock": {"unix_ns": 5, "brokers": "host"}}, True, False),   # a broker's clock moved
    ({"clock": {"unix_ns": 5, "brokers": "own"}}, False, False),   # ssh: another machine
    ({}, False, False),                                            # a run before the anchor
    (None, False, False),
])
def test_a_log_is_read_only_on_a_clock_the_history_shares(header, clock_faults, usable):
    assert (kafka_log.usable(header, clock_faults) is not None) is usable


@pytest.mark.parametrize("line", [
    "[2026-11-29 11:44:00,500Z] INFO Registered `kafka:type=kafka.Log4jController` MBean "
    "(org.apache.kafka.server.logger.Log4jControllerRegistration)\n",  # log4j 2, Kafka 4
    "[2026-11-29 11:44:00,500+0000] INFO Registered kafka:type=kafka.Log4jController MBean "
    "(kafka.utils.Log4jControllerRegistration$)\n",                   # log4j 1, Kafka 3.9
])
def test_a_broker_starting_is_read_as_a_start_of_its_node(tmp_path, line):
    log = tmp_path / "nodes" / "n2" / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text(line)
    assert kafka_log.server_logs(tmp_path) == [log]
    assert kafka_log.read([log], T0) == [kafka_log.Logged("start", None, -1, -1, 500_000_000,
                                                          node="n2")]


def test_an_unclean_election_is_known_by_its_epoch_without_a_clock():
    """An ssh cluster's logs, on a clock of their own: the controller's word still names the
    election (partition, leader epoch) the monitor bracketed."""
    from kafka_chaos.analysis import evidence

    rows = []
    for i, (leader, epoch, isr) in enumerate([(2, 1, [2]), (3, 2, [3])]):
        rows.append({"op": 2 * i, "index": 2 * i + 1, "process": "monitor", "f": "cluster-state",
                     "type": "ok", "inv": {}, "done": {"partitions": {"kafka-chaos": [
                         {"partition": 0, "leader": leader, "leader_epoch": epoch,
                          "replicas": [1, 2, 3], "isr": isr, "elr": []}]}},
                     "invoke_time": 2 * i, "time": 2 * i + 1})
    rec = evidence.build(rows, None, None)
    kafka_log.mark_unclean(rec, kafka_log.read_lines([UNCLEAN.format(zone="")], 0))
    [change] = rec.events[("kafka-chaos", 0)]
    assert change.facts["logged_unclean"] is True and (change.lo, change.hi) == (0, 3)


def test_a_restart_after_election_lines_still_names_the_logs_own_node(tmp_path):
    """A broker that led, then restarted: its start line, after lines naming brokers by id,
    is still of the node whose log it is (a restart is what disqualifies a deposed leader)."""
    log = tmp_path / "nodes" / "n3" / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    start = ("[2026-11-29 11:50:00,000Z] INFO Registered `kafka:type=kafka.Log4jController` "
             "MBean (org.apache.kafka.server.logger.Log4jControllerRegistration)\n")
    log.write_text(LEADER.format(zone="Z") + start)
    [leader, started] = kafka_log.read([log], T0)
    assert (leader.kind, leader.leader) == ("leader", 3)
    assert (started.kind, started.node) == ("start", "n3")


def test_a_broker_that_stopped_for_good_is_named_by_its_last_fatal_line():
    """The line with which Kafka halts a broker whose every log directory failed (a damaged
    checkpoint: ``docs/file-faults.md`` K7b), or on a fatal fault, is the reason the verdict
    gives (``verdict.judge_run``); a log without one gives none."""
    from kafka_chaos.verdict import judge_run

    lines = ["[2026-11-30 10:00:00,000] INFO [KafkaRaftServer nodeId=2] Kafka Server started",
             "[2026-11-30 10:00:05,001] ERROR Shutdown broker because all log dirs in "
             "/kc/n2/data have failed (kafka.log.LogManager)"]
    reason = kafka_log.halt_reason(lines)
    assert reason == ("Shutdown broker because all log dirs in /kc/n2/data have failed "
                      "(kafka.log.LogManager)")
    assert kafka_log.halt_reason(lines[:1]) is None
    fatal = "[x] ERROR Encountered fatal fault: Error starting LogManager (org.apache...)"
    assert kafka_log.halt_reason([fatal]).startswith("Encountered fatal fault: Error starting")
    result = judge_run({"valid": True, "anomaly_types": []},
                       {"recovery_error": "2/3 brokers registered: [1, 3]",
                        "halted": {"n2": reason}})
    assert result["valid"] == "unknown" and result["unknown_reasons"] == [
        "the cluster did not recover after the final heal: 2/3 brokers registered: [1, 3]; "
        f"n2 stopped for good: {reason}"]
