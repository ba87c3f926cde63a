"""Validation of a whole history file, streamed, before any analysis reads it.

Spark's JSON reader is permissive: a field of the wrong type (``3.0`` for an integer) silently
becomes NULL, and a checker fed NULLs reports "no anomaly" for data it never understood. So every
line is read here first: line format and index sequence (``history.store``), invoke/completion
pairing (``Pairer``), and each client value against ``docs/history-format.md``. Any problem raises
``HistoryError`` naming the 1-based line; memory stays bounded by the open ops, not the file.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from kafka_chaos.history.op import SYSTEM_PROCESSES, Op, OpType
from kafka_chaos.history.store import HistoryError, Pairer, iter_history, read_header

#: Client ``f``s whose values are micro-op lists (format 2).
MOP_FS = ("send", "poll", "txn")
#: Client ``f``s of format 1 that the checkers read; other format-1 ``f``s are ignored.
V1_FS = ("send", "poll")

_INT64 = (-(2**63), 2**63 - 1)
_KEY = re.compile(r"(0|[1-9][0-9]{0,18})")
_EVENTS = ("assigned", "revoked", "lost")
_OFFSET_EVENTS = ("committed", "seek", "corrupt")


@dataclasses.dataclass(frozen=True)
class HistoryInfo:
    """What validation learnt: ``format`` (1 or 2), ``ops`` (count of op lines, a torn last line
    not counted), ``header`` (the format-2 header dict, None for format 1)."""

    format: int
    ops: int
    header: dict[str, Any] | None


def validate(path: Path) -> HistoryInfo:
    """Check the history at ``path`` line by line and return a ``HistoryInfo``.

    Raises:
        HistoryError: a malformed line (``"line N: ..."``), a pairing error, or a client value
            not shaped as in ``docs/history-format.md``.
        OSError: the file cannot be read.
    """
    header = read_header(Path(path))
    checker = LineValidator(1 if header is None else 2)
    for lineno, op in iter_history(Path(path)):
        checker.add(lineno, op)
    return HistoryInfo(checker.format, checker.ops, header)


class LineValidator:
    """Validation of one op at a time, in file order: what ``validate`` does for each line, for
    writers that see ops one by one (``history.columnar``). Memory: the open ops only.

    ``format``: 1 or 2; ``ops``: op lines accepted so far.
    """

    def __init__(self, fmt: int) -> None:
        self.format = fmt
        self.ops = 0
        self._pairer = Pairer()

    def add(self, lineno: int, op: Op) -> Op | None:
        """Check ``op`` (on 1-based line ``lineno``) against what came before; returns the
        invoke it completes (None for an invoke).

        Raises ``HistoryError`` naming the line: a pairing error or a malformed client value.
        """
        try:
            invoke = self._pairer.add(op)
        except HistoryError as exc:
            # Pairer names op indexes; users open the file, so name the line too
            raise HistoryError(f"line {lineno} ({str(exc).replace(': ', '): ', 1)}") from exc
        self.ops += 1
        if op.process in SYSTEM_PROCESSES:
            return invoke
        try:
            if self.format == 1:
                _check_v1(op, invoke)
            else:
                _check_v2(op, invoke)
        except _Bad as exc:
            raise HistoryError(f"line {lineno}: {op.f} {op.type.value} {exc}") from None
        return invoke

    @property
    def open(self) -> list[Op]:
        """The invokes not completed yet, in invoke order."""
        return sorted(self._pairer.open.values(), key=lambda op: op.index)


class _Bad(Exception):
    """A value problem; ``validate`` adds the line and op kind."""


def _int(x: Any, what: str, *, nullable: bool = False, minimum: int = _INT64[0]) -> None:
    if x is None and nullable:
        return
    if type(x) is not int or not minimum <= x <= _INT64[1]:
        raise _Bad(f"{what} must be a 64-bit integer"
                   f"{f' >= {minimum}' if minimum != _INT64[0] else ''}"
                   f"{' or null' if nullable else ''}, got {x!r}")


def _ack_ns(x: Any, i: int, span: tuple[int, int]) -> None:
    """A send's acknowledgement time (ns) lies within its op ``span`` (invoke, completion)."""
    _int(x, f"mop {i} ack_ns", minimum=0)
    if not span[0] <= x <= span[1]:
        raise _Bad(f"mop {i} ack_ns {x} lies outside its op (invoke at {span[0]} ns, "
                   f"completion at {span[1]} ns)")


def _key_str(s: Any, what: str) -> None:
    if not isinstance(s, str) or not _KEY.fullmatch(s) or int(s) > _INT64[1]:
        raise _Bad(f"{what}: {s!r} is not a key (a non-negative decimal integer string)")


def _key_map(m: Any, what: str) -> dict:
    if not isinstance(m, dict):
        raise _Bad(f"{what} must be an object of key -> value, got {m!r}")
    for k in m:
        _key_str(k, what)
    return m


def _records(records: Any, what: str) -> None:
    # The hot loop of validation (final reads hold whole partitions): exact type() tests and
    # chained comparisons are the cheapest correct checks.
    if type(records) is not list:
        raise _Bad(f"{what} must be a list of [offset, value]")
    lo, hi = _INT64
    for i, rec in enumerate(records):
        if type(rec) is not list or len(rec) != 2:
            raise _Bad(f"{what}[{i}] must be [offset, value] 64-bit integers, got {rec!r}")
        o, v = rec
        if type(o) is not int or type(v) is not int or not 0 <= o <= hi or not lo <= v <= hi:
            raise _Bad(f"{what}[{i}] must be [offset, value] 64-bit integers, got {rec!r}")


# -- format 2 ------------------------------------------------------------------------------------

def _check_v2(op: Op, invoke: Op | None) -> None:
    v = op.value
    if op.f in MOP_FS:
        if op.type is OpType.INVOKE:
            _invoke_mops(op.f, v)
        elif v != [] or op.type is OpType.OK:  # a client cut short may know nothing at all
            _completion_mops(op.f, v, invoke.value, (invoke.time, op.time))
    elif op.f in ("assign", "subscribe"):
        if not isinstance(v, dict) or not isinstance(v.get("keys"), list):
            raise _Bad(f"value must be {{\"keys\": [key, ...], ...}}, got {v!r}")
        for k in v["keys"]:
            _int(k, "value 'keys' element", minimum=0)
        extra = "group" if op.f == "subscribe" else "seek"
        if v.get(extra) is not None and not isinstance(v[extra], str):
            raise _Bad(f"value field {extra!r} must be a string")
    elif op.f == "share":
        _share(op, v)
    elif op.f == "commit":
        if not isinstance(v, dict):
            raise _Bad(f"value must be {{\"offsets\": {{key: offset}}}}, got {v!r}")
        for off in _key_map(v.get("offsets"), "value 'offsets'").values():
            _int(off, "committed offset", minimum=0)


_SHARE_ACKS = ("accept", "release", "reject", None)


def _share(op: Op, v: Any) -> None:
    """A share-group op (``workloads.share``): ``{"group", "hold"?, "final"?}`` invoked;
    ``{"group", "records": [[key, offset, value, delivery_count, ack], ...], "acks": {key:
    "ok" | error}, "drained"?}`` completed."""
    if not isinstance(v, dict) or not isinstance(v.get("group"), str):
        raise _Bad(f"value must be an object with a string 'group', got {v!r}")
    for flag in ("hold", "final", "drained"):
        if not isinstance(v.get(flag, False), bool):
            raise _Bad(f"value field {flag!r} must be true or false")
    if op.type is OpType.INVOKE:
        return
    if type(v.get("records")) is not list:
        raise _Bad("value field 'records' must be a list of [key, offset, value, "
                   "delivery_count, ack]")
    for i, rec in enumerate(v["records"]):
        if type(rec) is not list or len(rec) != 5 or rec[4] not in _SHARE_ACKS:
            raise _Bad(f"record {i} must be [key, offset, value, delivery_count, ack] with ack "
                       f"accept, release, reject or null, got {rec!r}")
        _int(rec[0], f"record {i} key", minimum=0)
        _int(rec[1], f"record {i} offset", minimum=0)
        _int(rec[2], f"record {i} value")
        _int(rec[3], f"record {i} delivery_count", minimum=1)
    for k, res in _key_map(v.get("acks"), "value 'acks'").items():
        if not isinstance(res, str):
            raise _Bad(f"acknowledgement result of key {k} must be \"ok\" or an error name")


def _mop_list(v: Any) -> list:
    if type(v) is not list or not v:
        raise _Bad(f"value must be a non-empty list of micro-ops, got {v!r}")
    for i, mop in enumerate(v):
        if type(mop) is not list or not mop or not isinstance(mop[0], str):
            raise _Bad(f"mop {i} must be a list starting with its kind, got {mop!r}")
    return v


def _invoke_mops(f: str, v: Any) -> None:
    for i, mop in enumerate(_mop_list(v)):
        kind = mop[0]
        if kind == "send" and f in ("send", "txn"):
            if len(mop) != 3:
                raise _Bad(f"mop {i} must be [\"send\", key, value], got {mop!r}")
            _int(mop[1], f"mop {i} key", minimum=0)
            _int(mop[2], f"mop {i} value")
        elif kind == "poll" and f in ("poll", "txn"):
            if len(mop) != 1:
                raise _Bad(f"mop {i} must be [\"poll\"] in an invoke, got {mop!r}")
        else:
            raise _Bad(f"mop {i}: a {f} op cannot hold a {kind!r} micro-op")


def _completion_mops(f: str, v: Any, invoked: list, span: tuple[int, int]) -> None:
    sends = [m for m in invoked if m[0] == "send"]
    polls_left = sum(1 for m in invoked if m[0] == "poll")
    n_send = 0
    for i, mop in enumerate(_mop_list(v)):
        kind = mop[0]
        if kind == "send":
            if len(mop) != 3 or n_send >= len(sends):
                raise _Bad(f"mop {i}: send {mop!r} matches no send of the invoke")
            res = mop[2]
            if type(res) is list:
                if len(res) not in (2, 3) or (len(res) == 3 and res[0] is None):
                    raise _Bad(f"mop {i} must be [\"send\", key, [offset, value]] or "
                               f"[\"send\", key, [offset, value, ack_ns]], got {mop!r}")
                _int(res[0], f"mop {i} offset", nullable=True, minimum=0)
                if len(res) == 3:
                    _ack_ns(res[2], i, span)
                res = res[1]
            if ([mop[1], res] != sends[n_send][1:] or type(mop[1]) is not int
                    or type(res) is not int):
                raise _Bad(f"mop {i}: send of key {mop[1]!r} value {res!r} differs from the "
                           f"invoke's send {sends[n_send][1:]!r}")
            n_send += 1
        elif kind == "poll":
            polls_left -= 1
            if polls_left < 0 or len(mop) not in (2, 3):
                raise _Bad(f"mop {i}: poll {str(mop)[:80]} matches no poll of the invoke")
            for k, recs in _key_map(mop[1], f"mop {i} poll result").items():
                _records(recs, f"mop {i} records of key {k}")
            if len(mop) == 3:
                _poll_meta(mop[2], i)
        elif kind in _EVENTS:
            if len(mop) != 2 or type(mop[1]) is not list:
                raise _Bad(f"mop {i} must be [{kind!r}, [key, ...]], got {mop!r}")
            for k in mop[1]:
                _int(k, f"mop {i} key", minimum=0)
        elif kind in _OFFSET_EVENTS:
            if len(mop) != 2:
                raise _Bad(f"mop {i} must be [{kind!r}, {{key: offset}}], got {mop!r}")
            for off in _key_map(mop[1], f"mop {i} offsets").values():
                _int(off, f"mop {i} offset", minimum=0)
        else:
            raise _Bad(f"mop {i}: unknown micro-op kind {kind!r}")
    if n_send != len(sends):
        raise _Bad(f"lists {n_send} of the invoke's {len(sends)} sends")


def _poll_meta(meta: Any, i: int) -> None:
    if (not isinstance(meta, dict) or not isinstance(meta.get("final", False), bool)
            or not isinstance(meta.get("eof", False), bool)):
        raise _Bad(f"mop {i}: third element must be {{\"final\": bool, \"range\": ..., "
                   "\"eof\": bool}}")
    for k, rng in _key_map(meta.get("range", {}), f"mop {i} range").items():
        if type(rng) is not list or len(rng) != 2:
            raise _Bad(f"mop {i} range of key {k} must be [start, end]")
        _int(rng[0], f"mop {i} range start", minimum=0)
        _int(rng[1], f"mop {i} range end", minimum=0)
        if rng[1] < rng[0]:
            raise _Bad(f"mop {i} range of key {k} ends before it starts: {rng}")


# -- format 1 ------------------------------------------------------------------------------------

def _check_v1(op: Op, invoke: Op | None) -> None:
    if op.f not in V1_FS:
        return
    v = op.value
    if not isinstance(v, dict):
        raise _Bad(f"value must be an object, got {v!r}")
    _int(v.get("key"), "value field 'key'")
    if op.f == "send":
        _int(v.get("value"), "value field 'value'")
        if op.type is OpType.OK:
            _int(v.get("partition"), "value field 'partition'")
            # librdkafka reports no offset (null) when the broker returned none, e.g. acks=0
            _int(v.get("offset"), "value field 'offset'", nullable=True)
    elif op.type is OpType.OK:
        _int(v.get("partition"), "value field 'partition'")
        _int(v.get("end_offset"), "value field 'end_offset'", nullable=True)
        if not isinstance(v.get("final", False), bool):
            raise _Bad("value field 'final' must be true or false")
        _records(v.get("records"), "value field 'records'")
    if invoke is not None:
        for field in (("key", "value") if op.f == "send" else ("key",)):
            if invoke.value.get(field) != v.get(field):
                raise _Bad(f"{field}={v.get(field)!r} differs from its invoke (op "
                           f"{invoke.index}) {field}={invoke.value.get(field)!r}")
