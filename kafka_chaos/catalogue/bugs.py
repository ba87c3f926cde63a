"""The known-bug catalogue: one record per Kafka or client bug a built-in scenario reproduces
on demand, with the run options that make it and what a run shows when it does. It is the
rows of the known-bug matrix (``kafka-chaos known-bugs``, ``docs/known-bugs.md``), whose
columns are Kafka versions and the two clients."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class KnownBug:
    """One bug.

    Attributes:
        name: the row's name (its scenario's, or the scenario's with what differs).
        ticket: where it is reported (a Kafka JIRA key, a librdkafka issue, a KIP).
        summary: what goes wrong, in one line.
        args: the ``run`` options that make it, as a user types them.
        broker: broker properties the row adds to the scenario's (none of them has a flag:
            a plan's ``cluster.broker_config`` sets them).
        outcome: what a run shows when the bug shows (``kafka_chaos.bisect.Outcome``'s
            text: a verdict word, ``anomaly:NAME`` or ``violation:NAME``).
        status: what Kafka or the client did about it, as of the date the row was written.
    """

    name: str
    ticket: str
    summary: str
    args: tuple[str, ...]
    outcome: str
    status: str
    broker: tuple[tuple[str, str], ...] = ()


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug("delayed-end-txn", "KAFKA-17754",
             "an EndTxn held past its client's timeout ends the client's next transaction",
             ("--scenario", "delayed-end-txn"), "violation",
             "fixed by transactions v2 (KIP-890 part 2: Kafka 4.0+ with a client that speaks "
             "it)"),
    KnownBug("acks1-leader-move", "KAFKA-20554",
             "acks=1 writes are lost in a planned leader move, no broker failing",
             ("--scenario", "acks1-leader-move", "--acks", "1"), "anomaly:lost-write",
             "documented as expected under acks=1 (apache/kafka PR 22233), no fix"),
    KnownBug("truncated-commit", "KAFKA-20507",
             "a group resumes from an offset committed without its leader epoch above a "
             "truncation and skips the records written there after the election",
             ("--scenario", "truncated-commit", "--proxy-fault", "forget-leader-epoch"),
             "anomaly:group-skip",
             "documented (apache/kafka PR 23183), no fix"),
    KnownBug("truncated-commit-epoch", "librdkafka #5158",
             "librdkafka resumes from an offset committed with its leader epoch without "
             "validating it (KIP-320) and skips the same records",
             ("--scenario", "truncated-commit"), "violation:group-skip",
             "closed in 2025; its fix (#4931) was reverted (#5207) and is in no release "
             "(docs/findings/librdkafka-5158.md)"),
    KnownBug("late-produce", "KIP-890",
             "a Produce of a transaction that already ended opens a transaction no "
             "coordinator knows of: the partition's LSO stops for good",
             ("--scenario", "late-produce"), "anomaly:hanging-transaction",
             "prevented since Kafka 3.6 by transaction.partition.verification.enable "
             "(default true), turned off here",
             broker=(("transaction.partition.verification.enable", "false"),)),
    KnownBug("lost-txn-marker", "KAFKA-20716",
             "an unclean election elects a replica without a transaction's COMMIT or ABORT "
             "marker: the partition's LSO stops for good",
             ("--scenario", "lost-txn-marker"), "anomaly:hanging-transaction",
             "documented (apache/kafka PR 22937), no fix"),
)
