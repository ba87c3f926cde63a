"""The one table from client errors to Jepsen op outcomes.

``fail`` is kept for errors that prove the effect did not happen; anything else is ``info``
(indeterminate), never ``fail`` — a timeout or a ``NOT_LEADER_OR_FOLLOWER`` may hide a write that
did happen (KAFKA-13574), and calling it ``fail`` would let a checker miss lost or duplicated data.

Transactions follow librdkafka's transactional API (``INTRODUCTION.md``, "Transactional
Producer"; KIP-98): an error that ``txn_requires_abort()`` is abortable — abort, and the
transaction certainly did not commit; a ``retriable()`` error of ``commit_transaction`` means
"call it again", the outcome still unknown; a ``fatal()`` error (``PRODUCER_FENCED``,
``INVALID_PRODUCER_EPOCH``, an idempotence ``OUT_OF_ORDER_SEQUENCE_NUMBER``, ``INVALID_TXN_STATE``
after a failed abort) ends the producer, and the process with it, as in Jepsen.
"""

from __future__ import annotations

import re

from confluent_kafka import KafkaError

#: The text a send writes for its value (``str(v)``): no sign but a minus, no leading zero.
_DECIMAL = re.compile(rb"0|-?[1-9][0-9]*")
#: librdkafka error names that prove the broker did not append the record.
DEFINITE_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE", "INVALID_MSG", "INVALID_MSG_SIZE",
    "INVALID_RECORD", "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS",
    "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG",
    "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "_QUEUE_FULL",
})
#: Rejected before append (``min.insync.replicas`` check, Kafka doc "NotEnoughReplicasException"),
#: but only conclusive when that response was the record's only attempt: an earlier timed-out
#: attempt may have been appended.
FAIL_IF_SINGLE_ATTEMPT = frozenset({"NOT_ENOUGH_REPLICAS"})
#: Offset commits the group coordinator rejected (the commit was not applied).
COMMIT_REJECTED = frozenset({
    "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID",
    "_ASSIGNMENT_LOST", "_NO_OFFSET", "GROUP_AUTHORIZATION_FAILED", "STALE_MEMBER_EPOCH",
})


def classify(error: KafkaError, retries: int) -> str:
    """Map a delivery error of one send to ``"fail"`` or ``"info"``.

    Args:
        error: the ``KafkaError`` from a delivery report or ``produce()``.
        retries: the producer's ``retries`` setting (0 means a single attempt).
    """
    name = error.name()
    if name in DEFINITE_FAILURES:
        return "fail"
    if name in FAIL_IF_SINGLE_ATTEMPT and retries == 0:
        return "fail"
    return "info"


def classify_commit(error: KafkaError) -> str:
    """``"fail"`` when the coordinator rejected an offset commit, else ``"info"``."""
    return "fail" if error.name() in COMMIT_REJECTED else "info"


def txn_action(error: KafkaError, committing: bool) -> str:
    """What to do about an error of a transactional call (librdkafka transactional API).

    Returns ``"fatal"`` (the producer is dead: end the process), ``"abort"`` (abortable: call
    ``abort_transaction``), ``"retry"`` (only while ``committing``: call ``commit_transaction``
    again, the outcome still unknown) or ``"unknown"`` (give up: the op is ``info`` when
    ``committing``, else abort).
    """
    if error.fatal():
        return "fatal"
    if error.txn_requires_abort():
        return "abort"
    if committing and error.retriable():
        return "retry"
    return "unknown"


def record_value(raw: bytes | None) -> int | None:
    """The value a polled record carries: the decimal integer a send wrote (``str(v)``
    encoded), or None when its bytes are not such a text (a record damaged on disk and served
    as it is: librdkafka checks no CRC by default, ``check.crcs``). Only the exact text
    counts: ``int()`` alone would take a flipped digit turned into a space or a leading
    zero for a value."""
    if raw is None or _DECIMAL.fullmatch(raw) is None:
        return None
    return int(raw)


def bad_batch(error: KafkaError | None) -> bool:
    """The consumer error says a fetched batch failed the client's own check (librdkafka's
    ``_BAD_MSG`` at the batch's base offset when ``check.crcs`` is on, "MessageSet at offset
    … failed CRC32C check"; also its answer to a batch it cannot parse); the consumer's
    position stays at that offset (``docs/file-faults.md``, L2 and L4)."""
    return error is not None and error.code() == KafkaError._BAD_MSG
