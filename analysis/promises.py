"""What a configuration promises: which anomalies Kafka documents as possible under it.

One table, as data. An anomaly found in a run is *permitted* when some rule of the table holds
for the run's configuration (and for what its nemesis did, e.g. enabling unclean leader election
at runtime), else it is a *violation*: Kafka broke a promise. Nothing is permitted for a history
whose configuration is unknown (a format-1 history without ``config.json``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

#: Reported among the nemesis ``f``s that completed ``ok`` (``analysis.stats.count_ops``) when
#: an ``elect-unclean`` op elected at least one leader: an unclean election happened.
UNCLEAN_ELECTED = "elect-unclean:elected"
#: Reported likewise when a ``lose-unfsynced`` op hit a node that was the only in-sync replica
#: of a partition: a power loss took every in-sync copy.
LAST_IN_SYNC_LOST = "lose-unfsynced:last-in-sync"

#: Anomalies that follow once a log may be truncated below acknowledged records: the records are
#: gone (lost-write, unseen), their offsets are reused (inconsistent-offsets, and positions that
#: step back), consumers whose position fell off the log are reset (auto.offset.reset), and the
#: orders built from the log stop agreeing with real time.
TRUNCATION = ("lost-write", "unseen", "inconsistent-offsets", "duplicate", "nonmonotonic-send",
              "int-nonmonotonic-send", "poll-skip", "nonmonotonic-poll", "int-poll-skip",
              "int-nonmonotonic-poll", "group-skip")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row: ``anomalies`` are possible ``when(facts)`` holds; ``because`` says why, citing
    ``source``. ``facts`` is the run configuration (``RunConfig`` as a dict) plus
    ``unclean_at_runtime`` (a nemesis enabled unclean leader election during the run)."""

    name: str
    anomalies: tuple[str, ...]
    when: Callable[[dict[str, Any]], bool]
    because: str
    source: str


def _truncating_acks(c: dict) -> bool:
    return str(c.get("acks")) in ("0", "1")


def _unclean(c: dict) -> bool:
    return bool(c.get("unclean_leader_election") or c.get("unclean_at_runtime"))


def _kafka_before(c: dict, major: int, minor: int) -> bool:
    try:
        have = tuple(int(x) for x in str(c.get("kafka_version", "")).split(".")[:2])
    except ValueError:
        return False
    return len(have) == 2 and have < (major, minor)


def _retrying_without_idempotence(c: dict) -> bool:
    return not (c.get("idempotence") or c.get("txn")) and int(c.get("retries", 0)) > 0


RULES: tuple[Rule, ...] = (
    Rule("acks-below-all", TRUNCATION, _truncating_acks,
         "with acks=0 or acks=1 a record is acknowledged before the followers have it; a leader "
         "change then truncates it away",
         "Kafka producer configs, `acks`; design doc, Replication"),
    Rule("unclean-leader-election", TRUNCATION, _unclean,
         "unclean.leader.election.enable lets a replica outside the ISR become leader, and the "
         "log is truncated to its (shorter) log: \"doing so may result in data loss\" (also when "
         "an admin forces an unclean election)",
         "Kafka topic configs, `unclean.leader.election.enable`; KIP-460 (ElectLeaders UNCLEAN)"),
    Rule("min-insync-replicas-1", TRUNCATION,
         lambda c: str(c.get("acks")) == "all" and int(c.get("min_insync_replicas", 2)) <= 1,
         "with min.insync.replicas=1 the leader alone may form the ISR and acknowledge acks=all "
         "writes; a committed record survives only \"as long as one in-sync replica is alive\"",
         "Kafka topic configs, `min.insync.replicas`; design doc, Replication; KIP-966"),
    Rule("last-in-sync-replica-lost-power", TRUNCATION,
         lambda c: c.get("last_in_sync_lost") and _kafka_before(c, 4, 1),
         "Kafka does not fsync each write; its guarantee \"is predicated on at least one replica "
         "remaining in sync. If all the nodes replicating a partition die, this guarantee no "
         "longer holds\": the only in-sync replica lost its un-flushed writes in a power loss "
         "and, with no eligible leader replicas (before Kafka 4.1), came back as the one "
         "electable leader with a shorter log",
         "Kafka design doc, Replication; KIP-966 (eligible leader replicas, on for new "
         "clusters from 4.1)"),
    Rule("retries-without-idempotence", ("duplicate",), _retrying_without_idempotence,
         "without idempotence \"producer retries due to broker failures, etc., may write "
         "duplicates of the retried message in the stream\"",
         "Kafka producer configs, `enable.idempotence`; KIP-98"),
    Rule("reordering-retries",
         ("nonmonotonic-send", "int-nonmonotonic-send", "G0-realtime"),
         lambda c: _retrying_without_idempotence(c) and int(c.get("max_in_flight", 1)) > 1,
         "with max.in.flight.requests.per.connection > 1 and idempotence off \"there is a risk of "
         "message reordering after a failed send due to retries\"",
         "Kafka producer configs, `max.in.flight.requests.per.connection`"),
    Rule("interleaved-writes", ("int-send-skip", "G0", "G0-process", "G0-realtime", "G1c",
                                "G1c-process", "G1c-realtime"),
         lambda c: True,
         "writes are never isolated: other producers' records interleave with an op's sends, "
         "concurrent ops (transactions too) order their writes differently in different "
         "partitions, and a long-running op's late write closes cycles through ww edges "
         "inferred from offsets (\"G0 is always allowed, since writes are never isolated\"; "
         "\"when we include ww edges, G1c is normal\")",
         "Jepsen jepsen.tests.kafka `allowed-error-types`"),
    Rule("read-uncommitted", ("G1a", "precommitted-read"),
         lambda c: c.get("isolation_level") == "read_uncommitted",
         "isolation.level=read_uncommitted \"will return all messages, even transactional "
         "messages which have been aborted\" (and those not yet committed)",
         "Kafka consumer configs, `isolation.level`"),
    Rule("consumer-group-rebalances", ("poll-skip", "nonmonotonic-poll"),
         lambda c: c.get("sub_via") == "subscribe",
         "a subscribed consumer may be rebalanced between ops and resume elsewhere",
         "Jepsen jepsen.tests.kafka `allowed-error-types` (subscribe)"),
    Rule("at-least-once-groups", ("group-redelivery",), lambda c: True,
         "a group resumes from its committed offsets after a rebalance or a crashed member, so "
         "records delivered but not yet committed are delivered again (at-least-once)",
         "Kafka docs, Consumer Position and Offset Management (design 4.6)"),
    Rule("reset-to-latest", ("group-skip",), lambda c: c.get("auto_offset_reset") == "latest",
         "a member without a committed offset starts at the log end (auto.offset.reset=latest)",
         "Kafka consumer configs, `auto.offset.reset`"),
)


def facts_of(config: dict[str, Any] | None, nemesis_ok: set[str]) -> dict[str, Any] | None:
    """The facts rules are judged on: ``config`` plus ``unclean_at_runtime`` (an ``unclean-on``
    nemesis op completed ``ok``, or a forced unclean ElectLeaders elected a leader, KIP-460)
    and ``last_in_sync_lost`` (a power loss hit a partition's only in-sync replica). None when
    the configuration is unknown."""
    if config is None:
        return None
    forced = UNCLEAN_ELECTED in nemesis_ok
    return {**config, "unclean_at_runtime": "unclean-on" in nemesis_ok or forced,
            "last_in_sync_lost": LAST_IN_SYNC_LOST in nemesis_ok}


def judge(name: str, facts: dict[str, Any] | None) -> dict[str, Any]:
    """``{"permitted": bool, "rule": name or None, "because": text, "source": text}`` for
    anomaly ``name`` under ``facts`` (``facts_of``). The user's ``forbid`` list (a plan's
    ``checkers:``) wins over everything, then ``allow``, then the first matching rule."""
    if facts is None:
        return {"permitted": False, "rule": None, "because": "the run's configuration is "
                "unknown, so nothing is permitted", "source": None}
    if name in (facts.get("forbid") or ()):
        return {"permitted": False, "rule": None, "because": "the plan forbids it, whatever "
                "Kafka documents", "source": "plan checkers.forbid"}
    if name in (facts.get("allow") or ()):
        return {"permitted": True, "rule": "plan-allows", "because": "the plan allows it",
                "source": "plan checkers.allow"}
    for rule in RULES:
        if name in rule.anomalies and rule.when(facts):
            return {"permitted": True, "rule": rule.name, "because": rule.because,
                    "source": rule.source}
    return {"permitted": False, "rule": None, "because": "no rule permits it under this "
            "configuration", "source": None}
