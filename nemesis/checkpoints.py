"""A broker's offset checkpoint files read as Kafka reads them, so that a file fault can
record what its damage did to the values the broker will load (``docs/file-faults.md``).

``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` share one text format (Kafka's ``CheckpointFile`` with
``OffsetCheckpointFile.Formatter``, version 0)::

    0                     <- version (Integer.parseInt; another value: IOException)
    2                     <- entry count (Integer.parseInt)
    kafka-chaos 0 1234    <- topic, partition (Integer.parseInt), offset (Long.parseLong)
    kafka-chaos 1 987

read as UTF-8 by a ``BufferedReader`` (``\\n``, ``\\r`` or ``\\r\\n`` end a line; a byte that
is no UTF-8 is a ``MalformedInputException``), each entry line split on ``\\s+``. An empty
file, or one that ends after the version, reads as no entries; a count that differs from the
entries, a line of other than three fields or a number Java does not parse makes the read
throw (the log directory fails, or the partitions are not loaded: either way not a value the
broker goes on with). A missing partition starts from 0 (recovery point and log start:
``LogManager.loadLog``, ``getOrDefault(topicPartition, 0L)``; the high watermark:
``Partition.createLog``'s ``orElseGet(() -> 0L)``, then clamped into the log by
``updateHighWatermark``). Duplicates: the last wins (``OffsetCheckpointFile.read`` fills a
``HashMap``). Read at the ``4.4`` branch's ``87943b2f`` (``docs/file-faults.md``).
"""

from __future__ import annotations

import re

from kafka_chaos.catalogue.faults import LOWERED, OFFSET_CHECKPOINTS, RAISED, UNREADABLE

__all__ = ["LOWERED", "OFFSET_CHECKPOINTS", "RAISED", "UNREADABLE", "change", "read"]

_LINE_END = re.compile(r"\r\n|\r|\n")
#: Java's ``\s``: space, tab, newline, vertical tab, form feed, carriage return.
_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
#: What ``Integer.parseInt`` / ``Long.parseLong`` accept (ASCII digits; a non-ASCII digit
#: never gets this far: the text is refused as soon as it is not ASCII).
_NUMBER = re.compile(r"[+-]?[0-9]+")
_INT, _LONG = 2 ** 31, 2 ** 63


def _java_number(text: str, bound: int) -> int:
    if not _NUMBER.fullmatch(text) or not -bound <= int(text) < bound:
        raise ValueError(f"not a Java number: {text!r}")
    return int(text)


def read(data: bytes) -> dict[tuple[str, int], int] | None:
    """``{(topic, partition): offset}`` as Kafka reads the checkpoint ``data``, or None where
    its read throws (an ``IOException`` or a ``NumberFormatException``). Non-ASCII text counts
    as unreadable too: Java would accept some Unicode digits this reader does not check."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":  # the terminator of the last line ends no further line
        lines.pop()
    try:
        if not lines:
            return {}
        if _java_number(lines[0], _INT) != 0:
            return None
        if len(lines) == 1:
            return {}
        count, out = _java_number(lines[1], _INT), {}
        for line in lines[2:]:
            parts = _WHITESPACE.split(line)
            while parts and parts[-1] == "":  # Java's split drops trailing empty strings
                parts.pop()
            if len(parts) != 3:
                return None
            out[(parts[0], _java_number(parts[1], _INT))] = _java_number(parts[2], _LONG)
        return out if len(lines) - 2 == count else None
    except ValueError:
        return None


def change(before: bytes, after: bytes) -> str:
    """What replacing checkpoint ``before`` with ``after`` does to the offsets the broker
    loads at its next start: ``LOWERED`` when Kafka reads both and every partition of
    ``after`` was in ``before`` with an offset at least as high (a missing one starts from 0:
    lower too), ``UNREADABLE`` when Kafka cannot read ``after``, ``RAISED`` otherwise (a
    higher offset, a partition ``before`` did not name, or a ``before`` Kafka could not read
    either)."""
    new = read(after)
    if new is None:
        return UNREADABLE
    old = read(before)
    if old is None or any(key not in old or value > old[key] for key, value in new.items()):
        return RAISED
    return LOWERED
