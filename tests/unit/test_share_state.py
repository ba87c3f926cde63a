"""``clusters.share_state.decode`` on records Kafka 4.4.0's share coordinator wrote (copied
from the ``__share_group_state`` log of a real run, keys and values as stored)."""

from __future__ import annotations

import base64
import uuid

import pytest

from kafka_chaos.clusters.share_state import ACKNOWLEDGED, decode

TOPIC = uuid.UUID(bytes=base64.urlsafe_b64decode("7JK16xxaTWirfe2HkNIfZw=="))
#: ShareSnapshotKey(groupId='kc-share', topicId=7JK16xxaTWirfe2HkNIfZw, partition=3),
#: ShareSnapshotValue(snapshotEpoch=0, stateEpoch=2, leaderEpoch=0, startOffset=-1,
#: createTimestamp=1795803267950, writeTimestamp=1795803267950, stateBatches=[])
SNAPSHOT = ("000000086b632d7368617265ec92b5eb1c5a4d68ab7ded8790d21f6700000003",
            "0000000000000000000200000000ffffffffffffffff000001a21e37436e000001a21e37436e0100")
#: ShareUpdateKey(the same), ShareUpdateValue(snapshotEpoch=0, leaderEpoch=0, startOffset=9,
#: deliveryCompleteCount=103 (a tagged field), stateBatches=[StateBatch(firstOffset=9,
#: lastOffset=9, deliveryState=2, deliveryCount=3)])
UPDATE = ("000100086b632d7368617265ec92b5eb1c5a4d68ab7ded8790d21f6700000003",
          "00000000000000000000000000000000000902000000000000000900000000000000090200030001"
          "000400000067")


def test_a_snapshot_and_an_update_as_kafka_wrote_them() -> None:
    assert decode(*map(bytes.fromhex, SNAPSHOT)) == ("kc-share", TOPIC, 3, [])
    assert decode(*map(bytes.fromhex, UPDATE)) == ("kc-share", TOPIC, 3,
                                                   [(9, 9, ACKNOWLEDGED, 3)])


def test_tombstones_and_other_records_are_none_and_garbage_raises() -> None:
    key, value = map(bytes.fromhex, UPDATE)
    assert decode(key, None) is None
    assert decode(b"\x00\x05" + key[2:], value) is None
    with pytest.raises(ValueError, match="does not parse"):
        decode(key, value[:-9])
    with pytest.raises(ValueError, match="version 1"):
        decode(key, b"\x00\x01" + value[2:])
