"""The one table from client errors to Jepsen op types.

``fail`` is kept for errors that prove the record was never appended; anything else is ``info``
(indeterminate), never ``fail`` — a timeout or a ``NOT_LEADER_OR_FOLLOWER`` may hide a write that
did happen (KAFKA-13574), and calling it ``fail`` would let a checker miss lost or duplicated data.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

#: librdkafka error names that prove the broker did not append the record.
DEFINITE_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE", "INVALID_MSG", "INVALID_MSG_SIZE",
    "INVALID_RECORD", "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS",
    "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG",
    "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION",
})
#: Rejected before append (``min.insync.replicas`` check, Kafka doc "NotEnoughReplicasException"),
#: but only conclusive when that response was the record's only attempt: an earlier timed-out
#: attempt may have been appended.
FAIL_IF_SINGLE_ATTEMPT = frozenset({"NOT_ENOUGH_REPLICAS"})


def classify(error: KafkaError, retries: int) -> str:
    """Map a delivery error to ``"fail"`` or ``"info"``.

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
