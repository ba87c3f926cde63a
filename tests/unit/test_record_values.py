"""What the workload's consumers make of a record's bytes and of a consumer error
(``workloads.outcomes.record_value``, ``bad_batch``): a damaged record is recorded as a
``corrupt`` event, never read as a value it does not carry."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from kafka_chaos.workloads.outcomes import bad_batch, record_value

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("raw, value", [
    (b"1102", 1102), (b"0", 0), (b"-5", -5),
    (b"110 ", None), (b" 110", None), (b"0110", None), (b"+110", None), (b"1_102", None),
    (b"11\x002", None), (b"", None), (None, None), (b"1p02", None),
])
def test_only_the_exact_text_a_send_writes_is_a_value(raw, value):
    assert record_value(raw) == value


def test_only_a_batch_the_client_refused_is_a_bad_batch():
    assert bad_batch(KafkaError(KafkaError._BAD_MSG))
    assert not bad_batch(KafkaError(KafkaError._PARTITION_EOF))
    assert not bad_batch(None)
