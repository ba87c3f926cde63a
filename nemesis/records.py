"""Kafka's record batches (magic 2, KIP-98), as they lie in a Produce request and in a log
segment: the proxy reads the values a Produce carries (``proxy.codec``), the file nemesis
finds the batches and values it damages (``nemesis.files``).

Layout (``DefaultRecordBatch``): base offset (int64), length of the rest (int32), partition
leader epoch (int32), magic (int8), CRC-32C (uint32), attributes (int16: the compression
codec in bits 0-2, the control flag in bit 5), last offset delta (int32), first and max
timestamps (int64 each), producer id (int64), producer epoch (int16), base sequence (int32),
record count (int32): 61 bytes, then the records. A record (``DefaultRecord``): its length,
attributes (int8), timestamp delta, offset delta, key length, key, value length, value,
headers; lengths and deltas are zigzag varints (-1: null).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kio.serial.readers import read_unsigned_varint

#: Bytes before a batch's first record; bytes before its length ends (base offset, length).
HEAD, OVERHEAD = 61, 12
#: The attributes' compression codec bits (0: none) and control flag.
CODEC, CONTROL = 0x07, 0x20
#: Where a batch's magic, attributes and last offset delta lie.
_MAGIC_AT, _ATTRIBUTES_AT, _LAST_DELTA_AT, _COUNT_AT = 16, 21, 23, 57


class Batch(NamedTuple):
    """One batch of ``data``: ``base`` offset, its bytes ``[start, end)``."""

    base: int
    start: int
    end: int


class Value(NamedTuple):
    """One record's value: the record's ``offset`` (base plus its offset delta), its bytes
    ``[start, end)`` (``start == end`` for an empty or null value; ``null``: length -1)."""

    offset: int
    start: int
    end: int
    null: bool


def zigzag(data: bytes, at: int) -> tuple[int, int]:
    """The zigzag varint at ``at`` and the position after it (``ByteUtils.readVarint``).
    Raises ``IndexError`` or ``ValueError`` past the end of ``data``."""
    raw, size = read_unsigned_varint(data, at)
    return (raw >> 1) ^ -(raw & 1), at + size


def batches(data: bytes) -> list[Batch]:
    """The batches of ``data`` in order, found by their base offsets and lengths alone. The
    walk stops at a length that does not fit (a torn or damaged tail): the bytes after the
    last batch belong to none."""
    out, at = [], 0
    while at + OVERHEAD <= len(data):
        base, length = struct.unpack_from(">qi", data, at)
        end = at + OVERHEAD + length
        if length < 0 or end > len(data):
            break
        out.append(Batch(base, at, end))
        at = end
    return out


def last_offset(data: bytes, batch: Batch) -> int:
    """The batch's last offset: base plus its last offset delta (the base for a batch too
    short to hold one)."""
    if batch.end - batch.start < _LAST_DELTA_AT + 4:
        return batch.base
    return batch.base + struct.unpack_from(">i", data, batch.start + _LAST_DELTA_AT)[0]


def plain(data: bytes, batch: Batch) -> bool:
    """The batch is of magic 2 and uncompressed: its records lie as written."""
    return (batch.end - batch.start >= HEAD and data[batch.start + _MAGIC_AT] == 2
            and not struct.unpack_from(">h", data, batch.start + _ATTRIBUTES_AT)[0] & CODEC)


def control(data: bytes, batch: Batch) -> bool:
    """The batch holds control records (transaction markers), not data."""
    return bool(struct.unpack_from(">h", data, batch.start + _ATTRIBUTES_AT)[0] & CONTROL)


def values(data: bytes, batch: Batch) -> list[Value]:
    """The values of a ``plain`` batch's records, as many as its record count says. Raises
    ``ValueError`` when its records do not parse within the batch (``IndexError`` and
    ``struct.error`` are turned into it)."""
    try:
        (count,) = struct.unpack_from(">i", data, batch.start + _COUNT_AT)
        out, at = [], batch.start + HEAD
        for _ in range(count):
            size, at = zigzag(data, at)
            record_end = at + size
            _, at = zigzag(data, at + 1)           # timestamp delta, after the attributes
            delta, at = zigzag(data, at)           # offset delta
            key_size, at = zigzag(data, at)
            value_size, at = zigzag(data, at + max(key_size, 0))
            if record_end > batch.end or at + max(value_size, 0) > record_end:
                raise ValueError("a record runs past its batch")
            out.append(Value(batch.base + delta, at, at + max(value_size, 0), value_size < 0))
            at = record_end
    except (IndexError, struct.error) as exc:
        raise ValueError(f"the records of the batch at offset {batch.base} do not parse: "
                         f"{exc}") from None
    return out
