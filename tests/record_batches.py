"""Record batches of magic 2 built by hand for tests (``nemesis.records`` reads them)."""

from __future__ import annotations

import struct


def zigzag(n: int) -> bytes:
    """``n`` as a zigzag varint (``ByteUtils.writeVarint``)."""
    raw, out = (n << 1) ^ (n >> 63), b""
    while True:
        byte, raw = raw & 0x7F, raw >> 7
        out += bytes([byte | (0x80 if raw else 0)])
        if not raw:
            return out


def batch(values: list[bytes | None], *, base: int = 0, attributes: int = 0) -> bytes:
    """A record batch of ``values`` (None: a null value) with null keys and offset deltas
    0, 1, ..., its last offset delta set; the CRC is left 0 (nothing here checks it)."""
    records = b""
    for i, v in enumerate(values):
        body = (b"\x00" + zigzag(0) + zigzag(i) + zigzag(-1)
                + (zigzag(-1) if v is None else zigzag(len(v)) + v) + zigzag(0))
        records += zigzag(len(body)) + body
    rest = (struct.pack(">i", 0) + b"\x02" + struct.pack(">I", 0)
            + struct.pack(">hiqqqhii", attributes, len(values) - 1, 0, 0, -1, -1, -1,
                          len(values)) + records)
    return struct.pack(">qi", base, len(rest)) + rest
