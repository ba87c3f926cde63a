"""A tiny builder of hand-made format-2 histories (micro-op lists) for tests.

    path = (Q().assign(0, [0, 1])
               .send(1, [(0, 10), (1, 11)])            # acked at the next offsets
               .poll(0, {0: [(0, 10)]})
               .read_all(9)                            # final reads of every key
               .write(tmp_path / "history.jsonl"))

Each op records an invoke and, unless ``type="pending"``, its completion right after it;
``invoke``/``complete`` add single lines for interleavings. ``write`` goes through
``history.HistoryWriter`` with a header holding ``config``, so index and time are assigned as
in a real run.
"""

from __future__ import annotations

from typing import Any, Iterable

from tests.builder import Lines

#: The configuration hand-made histories claim by default: the strictest promises (idempotent
#: producer, acks=all, min.insync.replicas=2, no unclean election, assign, read_committed).
STRICT = {"acks": "all", "idempotence": True, "txn": False, "retries": 2147483647,
          "max_in_flight": 5, "min_insync_replicas": 2, "replication_factor": 3,
          "unclean_leader_election": False, "isolation_level": "read_committed",
          "sub_via": "assign", "auto_commit": False, "auto_offset_reset": "earliest"}
Recs = Iterable[tuple[int, int]]


class Q(Lines):
    """An in-memory format-2 history; every method but ``write`` returns ``self``."""

    nemesis_type = "ok"

    def __init__(self, config: dict | None = None, **overrides: Any) -> None:
        self.config = {**(STRICT if config is None else config), **overrides}
        super().__init__(header={"config": self.config})
        self._next: dict[int, int] = {}
        self._acked: dict[int, list[tuple[int, int]]] = {}

    def ack(self, key: int, value: int, offset: int | None) -> int:
        """Note ``value`` acknowledged at ``offset`` of ``key`` (the key's next offset when
        None), for the final reads; returns the offset."""
        if offset is None:
            offset = self._next.get(key, 0)
        self._next[key] = max(self._next.get(key, 0), offset + 1)
        self._acked.setdefault(key, []).append((offset, value))
        return offset

    def _sends(self, sends, offsets, acked) -> list[list]:
        out = []
        for i, (k, v) in enumerate(sends):
            if acked is not None and not acked[i]:
                out.append(["send", k, [None, v]])
                continue
            off = offsets[i] if offsets is not None else None
            out.append(["send", k, [self.ack(k, v, off), v]])
        return out

    def write(self, path):
        """``Lines.write``, the header naming a partition of topic ``t`` for every key the
        history uses (key k: ``["t", k]``) unless it names its own ``keys``."""
        if "keys" not in self.header:
            self.header["keys"] = {str(k): ["t", k] for k in sorted(self._keys())}
        return super().write(path)

    def _keys(self) -> set[int]:
        keys: set[int] = set()
        for _, _, f, value, _ in self.lines:
            if f in ("send", "poll", "txn") and isinstance(value, list):
                for m in value:
                    if m and m[0] == "send":
                        keys.add(int(m[1]))
                    elif m and m[0] == "poll" and len(m) > 1 and isinstance(m[1], dict):
                        keys.update(int(k) for k in m[1])
        return keys

    def send(self, process: int, sends: list[tuple[int, int]], *, type: str = "ok",
             offsets: list[int | None] | None = None, acked: list[bool] | None = None,
             error: str | None = None) -> "Q":
        """A send op of ``(key, value)`` pairs. Acked sends get ``offsets`` (default: the next
        offset of their key); ``acked`` marks which were acknowledged (default: all for ``ok``
        and ``info``, none for ``fail``)."""
        self.invoke(process, "send", [["send", k, v] for k, v in sends])
        if type == "pending":
            return self
        if type == "fail" and acked is None:
            acked = [False] * len(sends)
        return self.complete(process, type, "send", self._sends(sends, offsets, acked), error)

    def poll(self, process: int, read: dict[int, Recs], *, type: str = "ok",
             events: list[list] | None = None) -> "Q":
        """A poll op of one poll mop returning ``read`` (key -> (offset, value) pairs), with
        ``events`` (e.g. ``["assigned", [0]]``) before it."""
        self.invoke(process, "poll", [["poll"]])
        if type == "pending":
            return self
        mop = ["poll", {str(k): [[o, v] for o, v in recs] for k, recs in read.items()}]
        return self.complete(process, type, "poll", [*(events or []), mop])

    def txn(self, process: int, mops: list[tuple], *, type: str = "ok",
            offsets: list[int | None] | None = None, error: str | None = None,
            events: list[list] | None = None) -> "Q":
        """A transaction: ``("send", k, v)`` and ``("poll", {k: recs})`` micro-ops in order;
        sends are acked at ``offsets`` (default: next offsets); ``events`` appended last."""
        self.invoke(process, "txn", [["send", m[1], m[2]] if m[0] == "send" else ["poll"]
                                     for m in mops])
        if type == "pending":
            return self
        sends = [(m[1], m[2]) for m in mops if m[0] == "send"]
        done_sends = iter(self._sends(sends, offsets, None))
        done = [next(done_sends) if m[0] == "send" else
                ["poll", {str(k): [[o, v] for o, v in recs] for k, recs in m[1].items()}]
                for m in mops]
        return self.complete(process, type, "txn", done + (events or []), error)

    def assign(self, process: int, keys: list[int], seek: str = "beginning") -> "Q":
        """An ok assign op."""
        value = {"keys": keys, "seek": seek}
        return self.invoke(process, "assign", value).complete(process, "ok", "assign", value)

    def subscribe(self, process: int, keys: list[int], group: str = "kc-group") -> "Q":
        """An ok subscribe op."""
        value = {"keys": keys, "group": group}
        return self.invoke(process, "subscribe", value).complete(process, "ok", "subscribe", value)

    def commit(self, process: int, offsets: dict[int, int], *, type: str = "ok",
               error: str | None = None, epochs: dict[int, int] | None = None) -> "Q":
        """A manual commit op of ``key -> next offset`` (``error``: a failed one's;
        ``epochs``: key -> the leader epoch it completes with, -1 none)."""
        value = {"offsets": {str(k): o for k, o in offsets.items()}}
        done = value if epochs is None else {
            **value, "epochs": {str(k): e for k, e in epochs.items()}}
        return self.invoke(process, "commit", value).complete(process, type, "commit", done,
                                                              error)

    def share(self, process: int, records: list[tuple], *, acks: dict[int, str] | None = None,
              hold: bool = False, type: str = "ok", drained: bool = False,
              group: str = "kc-share") -> "Q":
        """A share-group op (``workloads.share``) delivering ``(key, offset, value,
        delivery_count, ack)`` records; ``acks`` (key -> result) defaults to ``ok`` for every
        key with an acknowledged record; ``drained``: the final drain's quiet last op."""
        inv = {"group": group, **({"hold": True} if hold else {}),
               **({"final": True} if drained else {})}
        self.invoke(process, "share", inv)
        if acks is None:
            acks = {r[0]: "ok" for r in records if r[4] is not None}
        done = {"group": group, "records": [list(r) for r in records],
                "acks": {str(k): v for k, v in acks.items()},
                **({"drained": True} if drained else {})}
        return self.complete(process, type, "share", done)

    def crash(self, process: int) -> "Q":
        """A crash op (completion ``info``)."""
        return self.invoke(process, "crash", None).complete(process, "info", "crash", None,
                                                            "CRASHED")

    def final(self, process: int, key: int, records: Recs, *, start: int = 0,
              end: int | None = None, type: str = "ok", eof: bool = True) -> "Q":
        """One final-read op of ``key`` covering ``[start, end)`` (default: past the last
        record); ``eof``: it reached the end of the partition."""
        recs = [[o, v] for o, v in records]
        if end is None:
            end = max((o for o, _ in recs), default=start - 1) + 1
        self.invoke(process, "poll", [["poll"]])
        if type != "ok":
            return self.complete(process, type, "poll", [], "TIMEOUT")
        return self.complete(process, "ok", "poll", [[
            "poll", {str(key): recs} if recs else {},
            {"final": True, "range": {str(key): [start, end]}, "eof": eof}]])

    def read_all(self, process: int, keys: Iterable[int] = ()) -> "Q":
        """Final reads returning every send acked so far, of those keys and of ``keys``."""
        for key in sorted(set(self._acked) | set(keys)):
            self.final(process, key, sorted(self._acked.get(key, [])), end=self._next.get(key, 0))
        return self
