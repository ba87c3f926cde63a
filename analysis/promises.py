"""What a configuration promises, and what the run's record must show before an anomaly is
explained by it.

One table, as data (``RULES``). Each rule names the anomalies Kafka documents as possible
under a configuration (``when``), the sentence it relies on (``quote``, from ``source``), and
what must hold for one finding to be *permitted* by it:

- nothing more (``Rule.evidence`` and ``Rule.writer`` None): e.g. Jepsen's writes are never
  isolated, so every ``int-send-skip`` is permitted;
- a fact of the finding itself (``Rule.writer``): the value's writer was a producer without
  idempotence, the aborted write was a transaction's, the cycle has a ww step, the earlier
  owner of a partition two group members held at once had been fenced;
- an event in the run's own record (``Rule.evidence``, ``analysis.evidence``) on the finding's
  own topic-partition within its own window: a leader change after the write was
  acknowledged and before the read that misses it, an unclean election while the setting was
  on for that topic, a power loss of every replica that had the write;
- a precondition on the finding's own topic or partition at its own time (``Rule.applies``):
  a rule is a *candidate* for a finding only where its mechanism could have acted there
  (unclean election on for that topic, or forced there; a power loss that cut that
  partition, or one of unknown outcome), so neither its blind stretches nor its doubt reach
  findings elsewhere;
- a further fact of one anomaly's findings (``Rule.also``): a truncation explains a
  ``group-skip`` only when a commit above the skipped record was stored without its leader
  epoch (KAFKA-20507); with it, the member resuming from that offset must find the
  truncation (OffsetsForLeaderEpoch, KIP-320).

Each finding gets one of three outcomes (``judge_case``): ``permitted`` (some rule holds, and
its evidence is named), ``violation`` (no rule can explain it: Kafka broke a promise), or
``unexplained``: a rule's configuration holds but the record is blind where its event would
be (the monitor did not see the partition), so the verdict is unknown. Doubt never goes to
``permitted``. Nothing is permitted for a history whose configuration is unknown.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from kafka_chaos.analysis import evidence as ev
from kafka_chaos.analysis import mechanisms as m
from kafka_chaos.analysis.mechanisms import Case
from kafka_chaos.config import RunConfig
from kafka_chaos.catalogue.anomalies import (CORRUPT_READ, EOS_DUPLICATE, GARBAGE_READ,
                                             GROUP_OVERLAP, GROUP_REWIND,
                                             HANGING_TXN, SHARE_COUNT_REGRESS, SHARE_LOCK_OVERLAP,
                                             SHARE_REDELIVERY)

#: Anomalies that follow once a log may be truncated below acknowledged records: the records are
#: gone (lost-write, unseen), their offsets are reused (inconsistent-offsets, and positions that
#: step back), consumers whose position fell off the log are reset (auto.offset.reset, so
#: groups skip or rewind), and the orders built from the log stop agreeing with real time.
TRUNCATION = ("lost-write", "unseen", "inconsistent-offsets", "duplicate", "nonmonotonic-send",
              "int-nonmonotonic-send", "poll-skip", "nonmonotonic-poll", "int-poll-skip",
              "int-nonmonotonic-poll", "group-skip", GROUP_REWIND, EOS_DUPLICATE)

PERMITTED, VIOLATION, UNEXPLAINED = "permitted", "violation", "unexplained"
#: The broker config of KIP-890's first part (Kafka 3.6+, on by default).
VERIFICATION = "transaction.partition.verification.enable"
#: Why a finding the record is not blind on is still unexplained (``judge_case``'s ``why``).
UNSETTLED = "the record holds an event there whose outcome it cannot settle"
#: Why a finding is unexplained when a rule's condition on the finding itself cannot be told
#: from the record (``Rule.writer`` returned None), e.g. an earlier owner that may have been
#: fenced without learning it.
UNSETTLED_FACT = "the record cannot tell whether the finding meets the rule's condition"
#: A write is acknowledged at some time between its send's invoke and the moment its delivery
#: report was served (``ack_ns``; the op's completion in histories without it): an event in
#: that stretch may have come before the acknowledgement (and lost nothing of it) or after.
ACK_UNKNOWN = ("the event that could explain it lies between the send's invoke and its "
               "delivery report, and the history does not say whether the write was "
               "acknowledged before it")
#: Why an ``unseen`` record behind a transaction no marker ends is unexplained
#: (``mechanisms.behind_open_txn``) when the rule's event came before its window.
OPEN_TXN = ("a transaction no marker ends hides the record from read_committed reads, and "
            "the event that could have lost that marker came before the record's window")
#: Why a finding is unexplained when the rule's event lies in a stretch of the record that
#: crosses an edge of the finding's window (``analysis.evidence``'s interval semantics).
STRADDLES = ("the event that could explain it lies in a stretch of the record that crosses "
             "an edge of its window, so it may have happened before the write was "
             "acknowledged or after the read that misses it")


#: Every event of the record that explains the case (a rule's own evidence), in index order.
Evidence = Callable[[ev.Record, Case], "list[ev.Event]"]


#: ``min.insync.replicas`` of a configuration that omits it (a hand-written history's
#: header): the setting's default.
_MIN_ISR = RunConfig.model_fields["min_insync_replicas"].default


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row: ``anomalies`` are possible when ``when(facts)`` holds (``facts_of``); a
    finding is permitted by it when ``writer(case)`` holds (if given; None: the finding
    cannot tell, which leaves it unexplained) and ``evidence(record,
    case)`` finds an event (if given; ``mechanism`` names such an event in a phrase, for a
    run in which none happened). ``because`` says why, ``quote`` is the sentence of
    ``source`` the rule relies on. ``doubt(record, case)``: the stretch of an event that may
    be this rule's mechanism but that the record cannot settle (the finding is then
    unexplained, not a violation). ``applies(record, case)``: whether the rule's
    precondition held on the finding's topic or partition within its window (None: the
    run-wide ``when`` says all); where it did not, the rule is no candidate for it.
    ``alone``: why the configuration alone explains every finding, for a rule with no
    per-finding condition."""

    name: str
    anomalies: tuple[str, ...]
    when: Callable[[dict[str, Any]], bool]
    because: str
    source: str
    quote: str
    writer: Callable[[Case], bool] | None = None
    evidence: Evidence | None = None
    doubt: Callable[[ev.Record, Case], "ev.Stretch | None"] | None = None
    mechanism: str = ""
    applies: Callable[[ev.Record, Case], bool] | None = None
    #: for a rule with no per-finding condition: why its configuration alone explains every
    #: finding (issue 49's audit; ``tests/unit/test_promises.py`` holds every rule to one)
    alone: str = ""
    #: anomaly -> a further condition on its findings, as ``writer`` (None: cannot tell)
    also: dict[str, Callable[[Case], "bool | None"]] = dataclasses.field(default_factory=dict)

    @property
    def per_case(self) -> bool:
        """Whether findings are judged one by one (a writer or an evidence condition)."""
        return self.writer is not None or self.evidence is not None or bool(self.also)


#: Kafka's consumer configs, ``isolation.level``: why read_committed reads stop at an open
#: transaction (the quote of both rules that permit what a hanging one hides).
_WITHHELD = ("In particular any messages appearing after messages belonging to ongoing "
             "transactions will be withheld until the relevant transaction has been completed.")


def _verification_off(c: dict) -> bool:
    props = c.get("broker_properties") or {}
    return str(props.get(VERIFICATION, "true")).lower() == "false"


def _retrying_without_idempotence(c: dict) -> bool:
    return not c.get("idempotence") and int(c.get("retries", 0)) > 0


#: KIP-932 (Concepts) on delivery counts, which two rules rely on.
_IMPRECISE_COUNTS = ("These updates are not performed with exactly-once semantics, so the "
                     "delivery count cannot be relied upon to be precise in all situations.")

RULES: tuple[Rule, ...] = (
    Rule("acks-0", ("lost-write", "unseen"), lambda c: str(c.get("acks")) == "0",
         "with acks=0 the producer counts a record sent once it is in the socket buffer: "
         "nothing says the leader ever appended it (a transactional producer needs acks=all, "
         "so only a plain producer's writes)",
         "Kafka producer configs, `acks`",
         "acks=0 If set to zero then the producer will not wait for any acknowledgment from "
         "the server at all. The record will be immediately added to the socket buffer and "
         "considered sent. No guarantee can be made that the server has received the record "
         "in this case",
         writer=m.plain_producer),
    Rule("acks-below-all", TRUNCATION, lambda c: str(c.get("acks")) in ("0", "1"),
         "with acks=0 or acks=1 a record is acknowledged before the followers have it; the "
         "partition's leader changed after the acknowledgement (or a replaced leader was still "
         "acknowledging, or the leader lost power), and the new leader's log lacked it (never "
         "a write a consumer had read: that one was on every in-sync replica)",
         "Kafka producer configs, `acks`",
         "acks=1 This will mean the leader will write the record to its local log but will "
         "respond without awaiting full acknowledgement from all followers. In this case "
         "should the leader fail immediately after acknowledging the record but before the "
         "followers have replicated it then the record will be lost.",
         evidence=m.leader_change, doubt=m.unseen,
         mechanism="a leader change (or a zombie leader, or its leader's power loss) of a "
                   "partition",
         also=m.ACKS_BELOW_ALL_ALSO),
    Rule("unclean-leader-election", TRUNCATION, lambda c: bool(c.get("unclean_possible")),
         "a replica outside the ISR was elected leader of the partition while unclean leader "
         "election was on for its topic (in the config, or turned on at runtime), or by a "
         "forced unclean election, and the log was truncated to its shorter log",
         "Kafka topic configs, `unclean.leader.election.enable`; KIP-460 (ElectLeaders "
         "UNCLEAN)",
         "Indicates whether to enable replicas not in the ISR set to be elected as leader as a "
         "last resort, even though doing so may result in data loss.",
         evidence=m.unclean_election, doubt=m.unclean_maybe, applies=m.unclean_applies,
         mechanism="an unclean election while the setting was on, or a forced one",
         also=m.RESUMED_BLIND),
    Rule("min-insync-replicas-1", TRUNCATION,
         lambda c: str(c.get("acks")) == "all"
         and int(c.get("min_insync_replicas", _MIN_ISR)) <= 1,
         "with min.insync.replicas=1 the leader alone may form the ISR and acknowledge acks=all "
         "writes; it was the partition's whole ISR, then Kafka elected another broker",
         "Kafka design doc, Availability and Durability Guarantees; topic configs, "
         "`min.insync.replicas`",
         "if a topic is configured with only two replicas and one fails (i.e., only one in "
         "sync replica remains), then writes that specify acks=all will succeed. However, "
         "these writes could be lost if the remaining replica also fails.",
         evidence=m.leader_alone_replaced, doubt=m.unseen,
         mechanism="a leader that was its partition's whole ISR replaced",
         also=m.RESUMED_BLIND),
    Rule("last-in-sync-replica-lost-power", TRUNCATION,
         lambda c: bool(c.get("power_losses")),
         "Kafka does not fsync each write, and every replica that had the write (the ISR, "
         "and the eligible leader replicas of KIP-966) died, at least one losing its "
         "un-fsynced data in a power loss",
         "Kafka design doc, Unclean leader election: What if they all die?; KIP-966",
         "Note that Kafka's guarantee with respect to data loss is predicated on at least one "
         "replica remaining in sync. If all the nodes replicating a partition die, this "
         "guarantee no longer holds.",
         evidence=m.in_sync_replicas_lost_power, doubt=m.power_loss_unjudged,
         applies=m.power_applies,
         mechanism="a power loss while every other replica that had the writes was down",
         also=m.RESUMED_BLIND),
    Rule("last-in-sync-replica-cut-by-recovery", TRUNCATION,
         lambda c: bool(c.get("recovery_cuts")),
         "a file fault damaged the active segment of a killed broker in bytes its CRC covers; "
         "at its next start Kafka's recovery cut its log at the first damaged batch, that "
         "batch and every one after it gone, and every replica that had the write was that "
         "broker or dead: as a power loss of that log",
         "docs/file-faults.md (R1-R5: LogLoader, LogSegment.recover); Kafka design doc, "
         "Unclean leader election: What if they all die?",
         "Note that Kafka's guarantee with respect to data loss is predicated on at least one "
         "replica remaining in sync. If all the nodes replicating a partition die, this "
         "guarantee no longer holds.",
         evidence=m.in_sync_replicas_cut, doubt=m.cut_unjudged, applies=m.cut_applies,
         mechanism="a recovery that cut the damaged batch while every other replica that "
                   "had the writes was down",
         also=m.RESUMED_BLIND),
    Rule("damage-served-unchecked",
         (GARBAGE_READ, CORRUPT_READ, "lost-write", "unseen", "inconsistent-offsets",
          "duplicate"),
         lambda c: bool(c.get("file_damage")),
         "a file fault changed the bytes of the batch holding the record on a broker's disk "
         "where nothing checks them: the broker serves a segment as it is and checks CRCs "
         "only in recovery at startup, which a broker left running never ran, and the "
         "bytes in front of the CRC are checked by nothing; the reader got the changed "
         "record (another value, perhaps one written elsewhere: a duplicate; bytes that "
         "are no value; or a batch its own CRC check refused) instead of the one written",
         "docs/file-faults.md (S1, R1-R3, B1); librdkafka CONFIGURATION.md, `check.crcs`",
         "Verify CRC32 of consumed messages, ensuring no on-the-wire or on-disk corruption to "
         "the messages occurred. This check comes at slightly increased CPU usage.",
         evidence=m.damaged_unchecked, doubt=m.damage_unjudged, applies=m.damage_applies,
         mechanism="a damage of the record's batch on disk that no check read"),
    Rule("proxy-duplicated-produce", ("duplicate",),
         lambda c: bool(c.get("proxy")) and not c.get("idempotence"),
         "the Kafka protocol proxy's duplicate fault sent a Produce request of the partition "
         "to its leader twice while the value's send was in flight (the value among its "
         "records, where the proxy could read them), and without idempotence "
         "the broker cannot tell the copy from a new batch",
         "Kafka producer configs, `enable.idempotence`; KIP-98; docs/proxy.md",
         "When set to 'true', the producer will ensure that exactly one copy of each message "
         "is written in the stream. If 'false', producer retries due to broker failures, "
         "etc., may write duplicates of the retried message in the stream.",
         writer=m.plain_producer, evidence=m.proxy_duplicated, doubt=m.proxy_duplicated_maybe,
         mechanism="a Produce request of the partition sent twice by the proxy"),
    Rule("no-partition-verification", (HANGING_TXN,), _verification_off,
         "transaction.partition.verification.enable=false: a Produce of a transaction its "
         "client had already ended or fenced, kept by the proxy, reached the partition's "
         "leader, which appended it as a new transaction no coordinator knows of, so no "
         "marker ends it; read_committed reads stop at it (a hanging transaction)",
         "Kafka broker configs, `transaction.partition.verification.enable`; KIP-890",
         "Enable verification that checks that the partition has been added to the "
         "transaction before writing transactional records to the partition",
         evidence=m.late_produce, doubt=m.late_produce_maybe,
         mechanism="a Produce of an ended transaction forwarded late by the proxy"),
    Rule("read-committed-behind-hanging-transaction", ("unseen",), _verification_off,
         "the record is in its partition's log above a hanging transaction that "
         "no-partition-verification permits (its stuck LSO is where the final reads ended): "
         "read_committed consumers read nothing past the last stable offset",
         "Kafka consumer configs, `isolation.level`; KIP-890",
         _WITHHELD,
         evidence=m.hung_below,
         mechanism="a hanging transaction below the record where the final reads ended"),
    Rule("unclean-election-lost-marker", (HANGING_TXN,), lambda c: bool(c.get("unclean_possible")),
         "a replica outside the ISR was elected leader of the partition after the "
         "transaction's first records were written and before its LSO stopped: it held "
         "those records without the COMMIT or ABORT marker that had ended the transaction "
         "on the old leader, and the coordinator, done with it, never writes that marker "
         "again, so the transaction stays open on the new leader",
         "Kafka topic configs, `unclean.leader.election.enable`, as KAFKA-20716 documents "
         "it (apache/kafka PR 22937)",
         "An unclean election can remove a transaction's COMMIT or ABORT marker from the "
         "elected replica, causing consumers with isolation.level=read_committed to stop at "
         "the last stable offset.",
         evidence=m.lost_marker, doubt=m.lost_marker_maybe, applies=m.lost_marker_applies,
         mechanism="an unclean election after the transaction's records were written"),
    Rule("read-committed-behind-lost-marker", ("unseen",),
         lambda c: bool(c.get("unclean_possible")),
         "the record is in its partition's log above a hanging transaction that "
         "unclean-election-lost-marker permits (its stuck LSO is where the final reads "
         "ended): read_committed consumers read nothing past the last stable offset",
         "Kafka consumer configs, `isolation.level`; KAFKA-20716 (apache/kafka PR 22937)",
         _WITHHELD,
         evidence=m.hung_by_lost_marker,
         mechanism="a hanging transaction below the record, left by an unclean election"),
    Rule("retries-without-idempotence", ("duplicate",), _retrying_without_idempotence,
         "the value's producer retried without idempotence",
         "Kafka producer configs, `enable.idempotence`; KIP-98",
         "If 'false', producer retries due to broker failures, etc., may write duplicates of "
         "the retried message in the stream.",
         writer=m.plain_producer),
    Rule("reordering-retries", ("nonmonotonic-send", "int-nonmonotonic-send"),
         lambda c: _retrying_without_idempotence(c) and c.get("client") != "java",
         "the producer retried without idempotence: librdkafka re-queues a failed batch while "
         "a later one may already be accepted, whatever max.in.flight.requests.per.connection "
         "is (unlike the Java client, which promises order with max.in.flight=1): the limit "
         "counts requests per broker connection (rdkafka_broker.c:2779 at 4c3b017c, v2.15.0), "
         "so after a leader change the new leader's connection sends later messages while the "
         "old one's request is still in flight; only the idempotent producer waits for that "
         "request to drain first (rd_kafka_toppar_producer_serve, rdkafka_broker.c:4286 and "
         "4313, rktp_eos.wait_drain), and the failed batch is re-inserted in order into the "
         "queue (rd_kafka_toppar_retry_msgq, rdkafka_partition.c:1051) behind what was sent",
         "librdkafka CONFIGURATION.md, `retries`; INTRODUCTION.md, Reordering; librdkafka "
         "source (rdkafka_broker.c, rdkafka_partition.c)",
         "How many times to retry sending a failing Message. **Note:** retrying may cause "
         "reordering unless `enable.idempotence` is set to true.",
         writer=m.plain_producer),
    Rule("reordering-retries-java", ("nonmonotonic-send", "int-nonmonotonic-send"),
         lambda c: (_retrying_without_idempotence(c) and c.get("client") == "java"
                    and int(c.get("max_in_flight", 5)) > 1),
         "the Java producer retried without idempotence with more than one request in flight "
         "per connection, so a retried batch may land after a later one",
         "Kafka producer configs, `retries`",
         "Allowing retries while setting enable.idempotence to false and "
         "max.in.flight.requests.per.connection to greater than 1 will potentially change the "
         "ordering of records because if two batches are sent to a single partition, and the "
         "first fails and is retried but the second succeeds, then the records in the second "
         "batch may appear first.",
         writer=m.plain_producer),
    Rule("interleaved-writes", ("int-send-skip", "G0", "G0-process", "G0-realtime"),
         lambda c: True,
         "writes are never isolated: other producers' records interleave with an op's sends, "
         "and concurrent ops order their writes differently in different partitions",
         "Jepsen jepsen.tests.kafka `allowed-error-types`",
         "int-send-skip is normal behavior: transaction writes interleave constantly in the "
         "Kafka transaction model. ... Likewise, G0 is always allowed, since writes are never "
         "isolated",
         alone="Kafka isolates no write from another producer's: the mechanism is every "
               "run's, not an event of one"),
    Rule("ww-cycles", ("G1c", "G1c-process", "G1c-realtime"), lambda c: True,
         "the cycle has a ww step, an order of writes inferred from offsets, and writes are "
         "never isolated; a cycle of wr (process, realtime) edges alone is no such thing",
         "Jepsen jepsen.tests.kafka `allowed-error-types`",
         "When we include ww edges, G1c is normal--the lack of write isolation means we should "
         "expect cycles like t0 <ww t1 <wr t0.",
         writer=lambda case: case.ww),
    Rule("read-uncommitted-cycles", ("G1c", "G1c-process", "G1c-realtime"),
         lambda c: c.get("isolation_level") == "read_uncommitted",
         "isolation.level=read_uncommitted lets transactions read each other's uncommitted "
         "writes, so two of them may each read the other's",
         "Jepsen jepsen.tests.kafka `allowed-error-types`",
         "g0 cycles are normal in the Kafka transactional model, and g1c is normal with "
         "wr-only edges at read-uncommitted but *not* with read-committed.",
         alone="the isolation level is the mechanism: every read of the run may return "
               "uncommitted writes"),
    Rule("read-uncommitted-aborted", ("G1a",),
         lambda c: c.get("isolation_level") == "read_uncommitted",
         "isolation.level=read_uncommitted returns the records of aborted transactions; the "
         "value read was written by a transaction that aborted",
         "Kafka consumer configs, `isolation.level`",
         "If set to read_uncommitted (the default), consumer.poll() will return all messages, "
         "even transactional messages which have been aborted. Non-transactional messages will "
         "be returned unconditionally in either mode.",
         writer=lambda case: case.writer_f == "txn"),
    Rule("read-uncommitted", ("precommitted-read",),
         lambda c: c.get("isolation_level") == "read_uncommitted",
         "isolation.level=read_uncommitted returns transactional records before their "
         "transaction commits, the reader's own too",
         "Kafka consumer configs, `isolation.level`",
         "read_uncommitted - return all messages, even transactional messages which have been "
         "aborted.",
         alone="the isolation level is the mechanism: every read of the run may return "
               "uncommitted writes"),
    Rule("consumer-group-rebalances", ("poll-skip", "nonmonotonic-poll"),
         lambda c: c.get("sub_via") == "subscribe",
         "a subscribed consumer may be rebalanced between ops and resume elsewhere",
         "Jepsen jepsen.tests.kafka `allowed-error-types` (subscribe)",
         "With subscribe, we expect external poll skips and nonmonotonic polls, because our "
         "consumer might be rebalanced between transactions.",
         alone="Jepsen's allowance: a subscribed consumer's position moves with the group's "
               "rebalances, and the polls checker already restarts a process's order at the "
               "rebalance events it reported; one it did not report (its position reset "
               "between two polls without a callback) leaves no mark to require"),
    Rule("at-least-once-groups", ("group-redelivery",), lambda c: True,
         "a group resumes from its committed offsets after a rebalance or a crashed member, so "
         "records delivered above the committed offset are delivered again (at-least-once)",
         "KafkaConsumer javadoc; Kafka design doc, Message Delivery Semantics",
         "the process that took over consumption would consume from last committed offset and "
         "would repeat the insert of the last batch of data. Used in this way Kafka provides "
         "what is often called \"at-least-once\" delivery guarantees",
         alone="the checker reports a group-redelivery only above what the group had "
               "committed (below it is a group-rewind): at-least-once is the finding itself"),
    Rule("fenced-member", (GROUP_OVERLAP,), lambda c: True,
         "the earlier owner was fenced (it reported the partition lost, it crashed, or a "
         "commit of it failed as no longer in the group): the coordinator gave the partition "
         "to another member once its session expired, before the old member learnt it",
         "ConsumerRebalanceListener javadoc, onPartitionsLost; CommitFailedException "
         "javadoc; KIP-848",
         "A callback method you can implement to provide handling of cleaning up resources for "
         "partitions that have already been reassigned to other consumers. This method will "
         "not be called during normal execution as the owned partitions would first be revoked "
         "by calling the onPartitionsRevoked, before being reassigned to other consumers "
         "during a rebalance event.",
         writer=lambda case: case.fenced),
    Rule("share-at-least-once", (SHARE_REDELIVERY,), lambda c: True,
         "a share group delivers a record again after a release, an expired lock, a crashed "
         "holder or a refused acknowledgement (the checker names which)",
         "KIP-932, Concepts",
         "This means that the delivery behavior is at-least-once.",
         alone="the share checker reports a redelivery only with the cause it found (a "
               "release, an expired lock, a crashed holder, a refused acknowledgement), each "
               "one at-least-once delivery by KIP-932"),
    Rule("share-member-gone", (SHARE_LOCK_OVERLAP,), lambda c: True,
         "the earlier holder had crashed: the end of its share session releases what it had "
         "acquired before the lock expires",
         "Kafka SharePartition.releaseAcquiredRecords javadoc (SharePartitionManager calls "
         "it for a member whose share session ends)",
         "Release the acquired records for the share partition.",
         writer=lambda case: case.fenced),
    Rule("share-failover-count", (SHARE_COUNT_REGRESS,), lambda c: True,
         "a share-partition's state lives on the partition's leader and a new leader loads "
         "it from the share coordinator, so a delivery count may miss an acquisition",
         "KIP-932, Concepts",
         _IMPRECISE_COUNTS,
         evidence=m.leader_change, mechanism="a leader change of the record's partition"),
    Rule("share-state-write-failed", (SHARE_COUNT_REGRESS,), lambda c: True,
         "an acknowledgement of the share-partition failed in between: the share-partition "
         "leader writes its state through the share coordinator before it answers one, and "
         "after a failed write it goes on from state that may miss acquisitions",
         "KIP-932, Concepts",
         _IMPRECISE_COUNTS,
         writer=lambda case: case.state_write_failed),
    # not for share-after-ack nor share-accepted-twice: both need an acknowledgement answered
    # ok, and the leader answers one only once the share coordinator has persisted it
    # (SharePartition.rollbackOrProcessStateUpdates), so a new leader loads it
    Rule("share-failover-redelivery", (SHARE_LOCK_OVERLAP,), lambda c: True,
         "a share-partition's in-flight state lives on the partition's leader; a new leader "
         "loads it from the share coordinator, so the locks held at the move are lost and "
         "the record delivered again",
         "KIP-932, Concepts",
         "This means that the delivery behavior is at-least-once.",
         evidence=m.leader_change, mechanism="a leader change of the record's partition"),
    Rule("reset-to-latest", ("group-skip",), lambda c: c.get("auto_offset_reset") == "latest",
         "a member without a committed offset starts at the log end (auto.offset.reset=latest); "
         "one was assigned the record's partition after the record was written and before "
         "its group had committed an offset of it",
         "Kafka consumer configs, `auto.offset.reset`",
         "What to do when there is no initial offset in Kafka or if the current offset does "
         "not exist any more on the server ... latest: automatically reset the offset to the "
         "latest offset",
         writer=lambda case: case.reset),
)


def facts_of(config: dict[str, Any] | None, record: ev.Record | None = None
             ) -> dict[str, Any] | None:
    """The facts rules' ``when`` is judged on: ``config`` plus, from ``record``,
    ``unclean_possible`` (unclean leader election was, or may have been, on at some time, or
    was forced), ``power_losses`` (a ``lose-unfsynced`` op completed), ``file_damage`` (a
    file op damaged a segment, or may have: ``Record.file_damage``) and ``recovery_cuts``
    (a damage of a killed broker's segment that its recovery cuts). None when the
    configuration is unknown."""
    if config is None:
        return None
    record = record or ev.Record(unclean_config=bool(config.get("unclean_leader_election")))
    return {**config, "unclean_possible": record.unclean_possible,
            "power_losses": record.power_losses, "file_damage": record.file_damage,
            "recovery_cuts": record.recovery_cuts}


def candidates(name: str, facts: dict[str, Any] | None) -> list[Rule]:
    """The rules that may permit anomaly ``name`` under ``facts``, in table order."""
    if facts is None or name in (facts.get("forbid") or ()):
        return []
    return [r for r in RULES if name in r.anomalies and r.when(facts)]


def judge(name: str, facts: dict[str, Any] | None) -> dict[str, Any]:
    """How every finding of anomaly ``name`` is judged under ``facts`` when that does not
    depend on the finding: ``{"per_case": False, "permitted": bool, "rule", "because",
    "source"}``; else ``{"per_case": True, ...}`` with the first per-case rule's text (the
    findings are then judged by ``judge_case``). The plan's ``forbid`` list (a plan's
    ``checkers:``) wins over everything, then ``allow``, then the rules."""
    if facts is None:
        return _verdict(False, None, "the run's configuration is unknown, so nothing is "
                        "permitted", None)
    if name in (facts.get("forbid") or ()):
        return _verdict(False, None, "the plan forbids it, whatever Kafka documents",
                        "plan checkers.forbid")
    if name in (facts.get("allow") or ()):
        return _verdict(True, "plan-allows", "the plan allows it", "plan checkers.allow")
    rules = candidates(name, facts)
    for rule in rules:
        if not rule.per_case:
            return _verdict(True, rule.name, rule.because, rule.source)
    if rules:
        return {**_verdict(False, rules[0].name, rules[0].because, rules[0].source),
                "per_case": True}
    return _verdict(False, None, "no rule permits it under this configuration", None)


def by_configuration(rule: str) -> bool:
    """Whether findings permitted by ``rule`` (a ``Rule.name``, or the plan's
    ``plan-allows``) are permitted by the configuration and the finding alone, whatever
    happened in the run: a rule that needs no event of the run's record (``Rule.evidence``
    None: G0 under ``interleaved-writes``, a retried duplicate under
    ``retries-without-idempotence``), or the plan's ``allow`` list. A fault the rules do not
    know (a file fault) cannot make such a finding otherwise; one permitted by an event (an
    election, a power loss) it can explain instead (``verdict.judge_run``)."""
    if rule == "plan-allows":
        return True
    found = next((r for r in RULES if r.name == rule), None)
    return found is not None and found.evidence is None


def _verdict(permitted: bool, rule: str | None, because: str, source: str | None) -> dict:
    return {"per_case": False, "permitted": permitted, "rule": rule, "because": because,
            "source": source}


def judge_case(name: str, case: Case, facts: dict[str, Any], record: ev.Record
               ) -> dict[str, Any]:
    """One finding of anomaly ``name``: ``{"outcome": "permitted" | "violation" |
    "unexplained", "rule", "evidence": Event or None, "blind": the blind stretch
    (``evidence.Stretch``) or None}``.

    The candidates are the rules of ``facts`` whose ``applies`` holds for the finding.
    Permitted by the first candidate rule whose writer condition holds and whose event the
    record shows on the finding's partition inside its window (``analysis.evidence``'s
    interval semantics; an event the record locates only within a blind stretch does not
    count). Otherwise unexplained when some candidate needs an event and the record is
    blind on that partition somewhere in the window, holds an event it cannot settle
    (``Rule.doubt``), holds the rule's event between the send's invoke and its
    acknowledgement (``ACK_UNKNOWN``), holds it in a stretch that crosses an edge of the
    window (``STRADDLES``), or the finding has no partition, or a writer condition the
    finding cannot settle (``UNSETTLED_FACT``), or it is an ``unseen`` record behind a
    transaction no marker ends and the rule's event came before its window (``OPEN_TXN``);
    else a violation.
    ``why``: for an unexplained finding that is not blind, which doubt it is."""
    waiting, doubt, why, unsettled = False, None, None, False
    for rule in candidates(name, facts):
        if rule.applies is not None and case.tp is not None and not rule.applies(record, case):
            continue
        holds = True if rule.writer is None else rule.writer(case)
        if holds and name in rule.also:
            holds = rule.also[name](case)
        unsettled = unsettled or holds is None
        if not holds:
            continue
        if rule.evidence is None:
            return {"outcome": PERMITTED, "rule": rule.name, "evidence": None, "blind": None,
                    "why": None}
        if case.tp is None:
            waiting = True
            continue
        events = rule.evidence(record, case)
        if events:
            return {"outcome": PERMITTED, "rule": rule.name, "evidence": events[0],
                    "blind": None, "why": None}
        waiting = True
        if doubt is None and rule.doubt is not None:
            doubt, why = rule.doubt(record, case), UNSETTLED
        if doubt is None and case.write is not None and case.write[0] < case.lo:
            early = rule.evidence(record, dataclasses.replace(case, lo=case.write[0],
                                                              ack_ns=None))
            if early:
                doubt, why = early[0].stretch, ACK_UNKNOWN
        if doubt is None:  # from the send's invoke: an election in flight is doubt too
            with record.overlapping():
                straddling = rule.evidence(record, dataclasses.replace(
                    case, lo=m.since_sent(case), ack_ns=None))
            if straddling:
                doubt, why = straddling[0].stretch, STRADDLES
    if waiting:
        gap = None if case.tp is None else (record.blind_in(case.tp, case.lo, case.hi)
                                            or record.unlocated(case.tp, case.lo, case.hi))
        if case.tp is None or gap is not None:
            return {"outcome": UNEXPLAINED, "rule": None, "evidence": None, "blind": gap,
                    "why": None}
        if doubt is not None:
            return {"outcome": UNEXPLAINED, "rule": None, "evidence": None, "blind": doubt,
                    "why": why}
    if unsettled:
        return {"outcome": UNEXPLAINED, "rule": None, "evidence": None, "blind": None,
                "why": UNSETTLED_FACT}
    if name == "unseen" and case.tp is not None and m.behind_open_txn(record, case):
        since = dataclasses.replace(case, lo=0, ack_ns=None, write=None)
        for rule in candidates(name, facts):
            if rule.evidence is None or rule.applies is not None and not rule.applies(
                    record, since):
                continue
            with record.overlapping():
                before = rule.evidence(record, since)
            if before:
                return {"outcome": UNEXPLAINED, "rule": None, "evidence": None,
                        "blind": before[0].stretch, "why": OPEN_TXN}
    return {"outcome": VIOLATION, "rule": None, "evidence": None, "blind": None, "why": None}


def chances(name: str, facts: dict[str, Any] | None, record: ev.Record) -> dict[str, int]:
    """For each rule of ``facts`` that needs an event to permit anomaly ``name``: how many
    such events the record holds, over every partition and the whole history. A rule with
    none had no chance to explain a finding, and a run without findings says nothing of the
    promise it stands for ("0 lost writes" under acks=1 with no leader change)."""
    out = {}
    for rule in candidates(name, facts):
        if rule.evidence is not None:
            found = {(e.kind, e.tp, e.lo, e.hi) for tp in record.events for e in rule.evidence(
                record, Case(tp, 0, ev.END, write=(0, ev.END)))}
            out[rule.name] = len(found)
    return out
