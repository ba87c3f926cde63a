"""A columnar copy of a history: Parquet tables beside ``history.jsonl``, shaped for analysis.

The JSON Lines file stays the record: crash-safe, one flushed line per op. Parsing that text is
most of what an analysis that reads it costs (1 M ops: ~60 % of the wall time), so the analysis
reads this copy instead. It is written while the run goes (``HistoryWriter(columnar="background")``),
each op validated as it is added (``history.validate.LineValidator``), so a complete copy is a
validated history. A history without a complete copy (a crashed run, format 1, a file from
elsewhere, a file edited after its run) is converted once by ``ensure``: one streaming pass
that validates and writes, memory bounded by the open ops and one row group.

``<history>.parquet/`` (``copy_dir``) holds five tables, one Parquet file each, in row groups of
about ``ROW_GROUP_OPS`` op lines; rows follow completion order. ``f`` and ``type`` are strings
as in the history (``type`` of a pair: ``ok|fail|info``, or ``pending`` for an invoke that never
completed). Offsets, values, keys, times (ns) and op indexes are int64.

- ``ops``: one row per op: ``op`` (invoke index), ``index`` (completion index, null if
  pending), ``process`` (as in the history: a decimal string, ``nemesis`` or ``monitor``),
  ``pid`` (client process id; null for the nemesis and the monitor), ``f, type, error,
  invoke_time, time`` (null if pending), ``inv, done`` (the values as JSON text; null for the
  micro-op lists of ``send``/``poll``/``txn``, which are the other tables), ``final`` (an ``ok``
  final read: it holds a range).
- ``sends``: one row per send micro-op: ``op, index, process, f, type, pos`` (its position in
  the op's micro-op list), ``key, value, offset`` (from the delivery report; null if none),
  ``ack_ns`` (when the report was served; null if none, or in histories before layout 2).
  Taken from the completion, or from the invoke when the op is pending or completed ``[]``.
- ``reads``: one row per poll micro-op and key it returned records of: ``op, process, f, type,
  final, pos, key, offsets, values`` (two lists, record i is ``(offsets[i], values[i])``).
- ``ranges``: a final read's complete ranges: ``op, key, start, end`` (exclusive), ``eof``.
- ``events``: ``process, op, type, pos, kind`` (assigned, revoked, lost, committed, seek),
  ``key, offset`` (null for rebalance events).

``meta.json``, written last, makes the copy complete: ``layout`` (``LAYOUT``), ``format`` (1 or
2), ``ops`` (op lines), ``header`` (format 2), ``rows`` per table, ``source`` (``recorder`` or
``converted``), ``op_counts`` (client ops: ``{f: {type: n}}``, ``type`` as in ``ops``),
``records`` (records all polls returned), ``sends_by_key`` (send micro-ops per key: ``{key
as text: n}``; absent in copies made before it was added) and
``jsonl``: the size and SHA-256 of the first and last 64 KiB of the history
it was made from. A copy whose ``jsonl`` does not match the file is stale and made again.
A format-1 history (kafka-chaos 0.1) converts into the same tables: a send is a one-send op, a
final read a poll with the range ``[0, end_offset)``.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import queue
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_chaos.history.op import SYSTEM_PROCESSES, Op, OpType
from kafka_chaos.history.store import HistoryError, read_header, scan_history
from kafka_chaos.history.validate import MOP_FS, LineValidator

#: Version of the table layout above; a copy of another layout is made again.
LAYOUT = 2
#: Op lines per row group (and per flush of the live writer).
ROW_GROUP_OPS = 100_000
#: Records buffered before a flush whatever the op count: final reads hold 10,000 each.
ROW_GROUP_RECORDS = 2_000_000
FINGERPRINT_BYTES = 64 * 1024

_I64, _I32, _STR, _BOOL = pa.int64(), pa.int32(), pa.string(), pa.bool_()
SCHEMAS: dict[str, pa.Schema] = {
    "ops": pa.schema([("op", _I64), ("index", _I64), ("process", _STR), ("pid", _I64),
                      ("f", _STR), ("type", _STR), ("error", _STR), ("invoke_time", _I64),
                      ("time", _I64), ("inv", _STR), ("done", _STR), ("final", _BOOL)]),
    "sends": pa.schema([("op", _I64), ("index", _I64), ("process", _I64), ("f", _STR),
                        ("type", _STR), ("pos", _I32), ("key", _I64), ("value", _I64),
                        ("offset", _I64), ("ack_ns", _I64)]),
    "reads": pa.schema([("op", _I64), ("process", _I64), ("f", _STR), ("type", _STR),
                        ("final", _BOOL), ("pos", _I32), ("key", _I64),
                        ("offsets", pa.list_(_I64)), ("values", pa.list_(_I64))]),
    "ranges": pa.schema([("op", _I64), ("key", _I64), ("start", _I64), ("end", _I64),
                         ("eof", _BOOL)]),
    "events": pa.schema([("process", _I64), ("op", _I64), ("type", _STR), ("pos", _I32),
                         ("kind", _STR), ("key", _I64), ("offset", _I64)]),
}
TABLES = tuple(SCHEMAS)
_REBALANCE = ("assigned", "revoked", "lost")


def copy_dir(history: Path) -> Path:
    """Where the copy of ``history`` lives: ``history.jsonl`` -> ``history.parquet/``."""
    history = Path(history)
    return history.with_name(history.stem + ".parquet")


def fingerprint(path: Path, size: int | None = None) -> dict[str, Any]:
    """``{"bytes", "head", "tail"}`` of the first ``size`` bytes of ``path`` (default: all):
    the length and the SHA-256 of its first and last 64 KiB. Raises ``OSError``."""
    with open(path, "rb") as fh:
        if size is None:
            size = os.fstat(fh.fileno()).st_size
        head = fh.read(min(size, FINGERPRINT_BYTES))
        fh.seek(max(0, size - FINGERPRINT_BYTES))
        tail = fh.read(min(size, FINGERPRINT_BYTES))
    return fingerprint_of(size, head, tail)


def fingerprint_of(size: int, head: bytes, tail: bytes) -> dict[str, Any]:
    """``fingerprint`` of a file of ``size`` bytes whose first and last ``FINGERPRINT_BYTES``
    (or all of it, when shorter) are ``head`` and ``tail``: for a file read elsewhere
    (``analysis.remote``)."""
    return {"bytes": size, "head": hashlib.sha256(head).hexdigest(),
            "tail": hashlib.sha256(tail).hexdigest()}


@dataclasses.dataclass(frozen=True)
class Copy:
    """A complete columnar copy: ``dir`` and its ``meta`` (``meta.json``, see above)."""

    dir: Path
    meta: dict[str, Any]

    def table(self, name: str) -> Path:
        """The Parquet file of table ``name`` (one of ``TABLES``)."""
        return self.dir / f"{name}.parquet"


def read_meta(directory: Path) -> dict[str, Any] | None:
    """``meta.json`` of a copy, or None when there is none (an incomplete or absent copy)."""
    try:
        meta = orjson.loads((Path(directory) / "meta.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) and meta.get("layout") == LAYOUT else None


def current(history: Path) -> Copy | None:
    """The complete copy of ``history`` when it was made from the file as it is now, beside
    it or in the cache (``cache_dir``), else None."""
    found = [(d, meta) for d in (copy_dir(history), cache_dir(history))
             if (meta := read_meta(d)) is not None]
    if not found:
        return None
    try:
        now = fingerprint(history)
    except OSError:
        return None
    return next((Copy(d, meta) for d, meta in found if meta.get("jsonl") == now), None)


#: Environment variable naming the cache of copies of histories in read-only folders (default
#: ``~/.cache/kafka-chaos``).
CACHE_ENV = "KAFKA_CHAOS_CACHE"
#: ``errno`` values that mean "this folder cannot be written": the copy goes to the cache.
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def cache_root() -> Path:
    """The project's cache folder on this machine: ``$KAFKA_CHAOS_CACHE``, else
    ``~/.cache/kafka-chaos`` (not created here)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafka-chaos")


def cache_dir(history: Path) -> Path:
    """Where the copy of ``history`` goes when its folder cannot be written (a read-only
    mount, another user's run): ``<cache>/columnar/<first 16 hex digits of the SHA-256 of the
    history's resolved path>/history.parquet``, the cache being ``cache_root()``."""
    key = hashlib.sha256(str(Path(history).resolve()).encode()).hexdigest()[:16]
    return cache_root() / "columnar" / key / copy_dir(Path(history)).name


def ensure(history: Path) -> Copy:
    """The complete copy of ``history``, converting the file first when it has none or the
    copy is stale. The conversion validates every line and replaces a stale or partial copy
    only once it is complete. The copy is made beside the history, or in ``cache_dir`` when
    that folder cannot be written.

    Raises:
        HistoryError: a malformed line (named), as ``history.validate.validate`` does.
        OSError: the history cannot be read or the copy cannot be written anywhere.
    """
    history = Path(history)
    found = current(history)
    if found is not None:
        return found
    try:
        return _make(history, copy_dir(history))
    except OSError as exc:
        if exc.errno not in _NOT_WRITABLE or not os.access(history, os.R_OK):
            raise
    return _make(history, cache_dir(history))


def _make(history: Path, d: Path) -> Copy:
    """Convert ``history`` into a temporary folder beside ``d``, then put it in place."""
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = d.with_name(f".{d.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        meta = convert(history, tmp)
        if d.exists():
            shutil.rmtree(d)
        tmp.rename(d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Copy(d, meta)


def convert(history: Path, out: Path) -> dict[str, Any]:
    """Validate ``history`` and write its columnar copy into the new directory ``out``;
    returns the copy's meta. A torn last line is left out, as readers do. Raises like
    ``ensure``."""
    header = read_header(history)
    writer = ColumnarWriter(out, header, source="converted")
    end = 0
    if header is not None:
        with open(history, "rb") as fh:
            end = len(fh.readline())
    try:
        for lineno, op, end in scan_history(history):
            writer.add(op, lineno)
        return writer.close(history, size=end)
    except BaseException:
        writer.abandon()
        raise


class _Buffer:
    """Column lists of one table, flushed as a row group."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.cols: list[list] = [[] for _ in schema.names]
        self.rows = 0
        self._writer = pq.ParquetWriter(path, schema)

    def flush(self) -> None:
        if self.cols[0]:
            arrays = [pa.array(c, type=f.type) for c, f in zip(self.cols, self.schema)]
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
            self.rows += len(self.cols[0])
            self.cols = [[] for _ in self.schema.names]

    def close(self) -> None:
        self.flush()
        self._writer.close()

    def discard(self) -> None:
        """Close the file without writing the rows still buffered (the copy is dropped)."""
        try:
            self._writer.close()
        except Exception:  # already closed, or its disk failed: the directory goes anyway
            pass


class ColumnarWriter:
    """Builds the columnar copy from ops given in history order (``add``), validating each.

    Args:
        out: the copy's directory, created (it must not exist).
        header: the format-2 header (``format`` included), or None for format 1.
        source: ``recorder`` or ``converted``, kept in the meta.
        background: add ops on a thread of their own (the live recorder: an op's caller does
            not wait for its rows); errors then surface in ``close``.

    Not thread-safe: one caller adds ops in index order.
    """

    def __init__(self, out: Path, header: dict | None, *, source: str = "recorder",
                 background: bool = False) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True)
        self.header = header
        self.format = 1 if header is None else 2
        self.source = source
        self._validator = LineValidator(self.format)
        self._buffers = {name: _Buffer(self.out / f"{name}.parquet", schema)
                         for name, schema in SCHEMAS.items()}
        self._pending_ops = 0
        self._pending_records = 0
        self._records = 0
        self._counts: dict[str, dict[str, int]] = {}
        self._sends_by_key: dict[int, int] = {}
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._drain, name="history-columnar",
                                            daemon=True)
            self._thread.start()

    # -- adding ops --------------------------------------------------------------------------

    def add(self, op: Op, lineno: int | None = None) -> None:
        """Add the next op (line ``lineno``, default: from its index and the format).

        Raises ``HistoryError`` for an op that does not validate (not in background mode,
        where the first error is kept in ``error`` and later ops are dropped)."""
        if self._queue is not None:
            self._queue.put((op, lineno))
            return
        self._add(op, lineno)

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self._add(*item)
                except BaseException as exc:  # kept for close(); the JSONL is still written
                    self.error = exc

    def _add(self, op: Op, lineno: int | None) -> None:
        if lineno is None:
            lineno = op.index + (2 if self.format == 2 else 1)
        invoke = self._validator.add(lineno, op)
        self._pending_ops += 1
        if invoke is not None:
            self._pair(invoke, op)
        if (self._pending_ops >= ROW_GROUP_OPS
                or self._pending_records >= ROW_GROUP_RECORDS):
            self._flush()

    def _flush(self) -> None:
        for buf in self._buffers.values():
            buf.flush()
        self._pending_ops = self._pending_records = 0

    # -- finishing ---------------------------------------------------------------------------

    def close(self, history: Path, size: int | None = None) -> dict[str, Any]:
        """Finish the copy: ops still open become ``pending`` rows, files are closed and
        ``meta.json`` is written, fingerprinting the first ``size`` bytes of ``history``
        (default: the whole file) as what the copy was made from. Returns the meta.

        Raises the error that stopped a background writer (``HistoryError`` for an op that
        did not validate), after removing the incomplete copy.
        """
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        if self.error is not None:
            self.abandon()
            raise self.error
        for invoke in self._validator.open:
            self._pair(invoke, None)
        for buf in self._buffers.values():
            buf.close()
        meta = {"layout": LAYOUT, "format": self.format, "ops": self._validator.ops,
                "header": self.header, "source": self.source,
                "rows": {name: buf.rows for name, buf in self._buffers.items()},
                "op_counts": self._counts, "records": self._records,
                "sends_by_key": {str(k): n for k, n in sorted(self._sends_by_key.items())},
                "jsonl": fingerprint(history, size)}
        tmp = self.out / ".meta.json.tmp"
        tmp.write_bytes(orjson.dumps(meta))
        tmp.rename(self.out / "meta.json")
        return meta

    def abandon(self) -> None:
        """Stop and remove the incomplete copy (a background thread is stopped first)."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        for buf in self._buffers.values():
            buf.discard()
        shutil.rmtree(self.out, ignore_errors=True)

    # -- rows --------------------------------------------------------------------------------

    def _pair(self, inv: Op, done: Op | None) -> None:
        """The rows of one op: its invoke and completion (None: pending)."""
        typ = "pending" if done is None else done.type.value
        client = inv.process not in SYSTEM_PROCESSES
        if client:
            by_type = self._counts.setdefault(inv.f, {})
            by_type[typ] = by_type.get(typ, 0) + 1
        micro = client and inv.f in (MOP_FS if self.format == 2 else ("send", "poll"))
        final = False
        if micro:
            if self.format == 2:
                final = self._mops(inv, done, typ)
            else:
                final = self._v1(inv, done, typ)
        cols = self._buffers["ops"].cols
        for col, x in zip(cols, (
                inv.index, None if done is None else done.index, str(inv.process),
                inv.process if client else None, inv.f, typ,
                None if done is None else done.error, inv.time,
                None if done is None else done.time,
                None if micro else orjson.dumps(inv.value).decode(),
                None if micro or done is None else orjson.dumps(done.value).decode(), final)):
            col.append(x)

    def _mops(self, inv: Op, done: Op | None, typ: str) -> bool:
        known = done is not None and done.value not in (None, [])
        mops = done.value if known else inv.value
        op, proc, f = inv.index, inv.process, inv.f
        index = None if done is None else done.index
        sends = self._buffers["sends"].cols
        by_key = self._sends_by_key
        final = False
        for pos, mop in enumerate(mops):
            kind = mop[0]
            if kind == "send":
                by_key[mop[1]] = by_key.get(mop[1], 0) + 1
                res = mop[2]
                if type(res) is list:
                    value, offset, ack = res[1], res[0], res[2] if len(res) == 3 else None
                else:
                    value, offset, ack = res, None, None
                for col, x in zip(sends, (op, index, proc, f, typ, pos, mop[1], value, offset,
                                          ack)):
                    col.append(x)
            elif kind == "poll":
                if len(mop) < 2:
                    continue
                meta = mop[2] if len(mop) == 3 else None
                is_final = bool(meta and meta.get("final"))
                self._reads(op, proc, f, typ, is_final, pos, mop[1])
                if is_final and typ == "ok":
                    final = True
                    ranges = self._buffers["ranges"].cols
                    eof = bool(meta.get("eof"))
                    for k, (start, end) in meta.get("range", {}).items():
                        for col, x in zip(ranges, (op, int(k), start, end, eof)):
                            col.append(x)
            else:
                events = self._buffers["events"].cols
                pairs = ([(k, None) for k in mop[1]] if kind in _REBALANCE
                         else [(int(k), o) for k, o in mop[1].items()])
                for key, offset in pairs:
                    for col, x in zip(events, (proc, op, typ, pos, kind, key, offset)):
                        col.append(x)
        return final

    def _reads(self, op: int, proc: int, f: str, typ: str, final: bool, pos: int,
               by_key: dict[str, list]) -> None:
        cols = self._buffers["reads"].cols
        for k, recs in by_key.items():
            if not recs:
                continue
            for col, x in zip(cols, (op, proc, f, typ, final, pos, int(k),
                                     [r[0] for r in recs], [r[1] for r in recs])):
                col.append(x)
            self._pending_records += len(recs)
            self._records += len(recs)

    def _v1(self, inv: Op, done: Op | None, typ: str) -> bool:
        """Format 1: a send is a one-send op; an ok final read a poll of ``[0, end_offset)``."""
        i = inv.value
        d = done.value if done is not None and done.type is OpType.OK else None
        if inv.f == "send":
            offset = d.get("offset") if d else None
            row = (inv.index, None if done is None else done.index, inv.process, "send", typ, 0,
                   i["key"], i["value"], offset if offset is not None and offset >= 0 else None,
                   None)
            for col, x in zip(self._buffers["sends"].cols, row):
                col.append(x)
            self._sends_by_key[i["key"]] = self._sends_by_key.get(i["key"], 0) + 1
            return False
        if d is None:
            return False
        final = bool(d.get("final"))
        records = d.get("records") or []
        self._reads(inv.index, inv.process, "poll", typ, final, 0, {str(i["key"]): records})
        if not final:
            return False
        end = d.get("end_offset")
        if end is None:
            end = max((r[0] for r in records), default=-1) + 1
        for col, x in zip(self._buffers["ranges"].cols, (inv.index, i["key"], 0, end, True)):
            col.append(x)
        return True


def iter_table_rows(copy: Copy, name: str) -> Iterator[dict[str, Any]]:
    """Rows of one table as dicts, row group by row group (tests and small tools)."""
    f = pq.ParquetFile(copy.table(name))
    for i in range(f.num_row_groups):
        yield from f.read_row_group(i).to_pylist()


__all__ = ["LAYOUT", "SCHEMAS", "TABLES", "Copy", "ColumnarWriter", "HistoryError", "convert",
           "copy_dir", "cache_dir", "cache_root", "current", "ensure", "fingerprint", "read_meta",
           "iter_table_rows"]
