"""Request faults: what the proxy does to the requests a fault matches (docs/proxy.md).

A fault is data (``RequestFault``): which requests it matches (API keys, client ids, brokers,
a probability) and what it does to each one it applies to:

- ``delay``: forward it ``delay_ms`` (plus up to ``jitter_ms``) late. The connection's later
  requests wait behind it, as behind a slow TCP segment; a request still waiting when its
  client has gone is forwarded all the same (an EndTxn arriving after its client gave up,
  KAFKA-17754);
- ``hold``: forward it when the fault ends (the same queue);
- ``drop-request``: never forward it: the client sees a timeout and the broker nothing;
- ``drop-response``: forward it and swallow its reply: it took effect, the client sees a
  timeout;
- ``duplicate``: forward it twice, the copy under a correlation id of the proxy's, whose
  reply is swallowed (a Produce without idempotence is then written twice);
- ``reorder``: keep it until the connection's next request is forwarded (at most
  ``reorder_wait_ms``), so the broker sees the two in swapped order;
- ``bandwidth``: pace it, and its reply, so that the requests (and, apart, the replies) of
  the fault on each broker's link pass at ``bytes_per_s`` at most.
- ``forget-leader-epoch``: forward an OffsetCommit or TxnOffsetCommit with every
  partition's ``committed_leader_epoch`` set to -1, as a client without KIP-320 commits:
  the group's offset is then stored without the leader epoch a consumer needs to detect a
  truncation below it (KAFKA-20507); other requests pass unchanged (counted apart).

With ``apis: ["*"]`` and probability 1 a ``delay`` is a link's latency (each request
``delay_ms`` late, pipelined: those behind it are not delayed further) and a ``bandwidth``
its capacity: network shaping without ``tc netem``.

``Applied`` is one fault while it is active: its own seeded random stream for the
probability, and the record of what it did (``report``), timed on the run's history clock.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Literal

from kio.schema.index import api_key_map
from pydantic import BaseModel, ConfigDict, Field, field_validator


#: ``apis: ["*"]``: every request (shaping a whole link).
EVERY = "*"
#: How many of a fault's requests its report lists one by one (every one is counted).
MAX_LISTED = 200
#: How many record values a fault's report lists (those of the Produce requests it applied
#: to); past it, the partitions it applied to are listed without their values.
MAX_VALUES = 100_000
_BY_NAME = {name.replace("_", ""): key for key, name in api_key_map.items()}


def api_key(name: str | int) -> int:
    """The API key of ``name``: Kafka's request name in any case, with or without
    underscores (``EndTxn``, ``end_txn``, ``ENDTXN``), or the key itself; ``-1`` for
    ``EVERY``. Raises ``ValueError`` naming an unknown one."""
    if name == EVERY:
        return -1
    if isinstance(name, int) or str(name).isdigit():
        key = int(name)
        if key in api_key_map:
            return key
    else:
        key = _BY_NAME.get(str(name).replace("_", "").replace("-", "").lower())
        if key is not None:
            return key
    raise ValueError(f"{name!r} is no Kafka API (e.g. Produce, Fetch, EndTxn, "
                     "AddPartitionsToTxn, TxnOffsetCommit, OffsetCommit, JoinGroup, "
                     "ConsumerGroupHeartbeat, ShareAcknowledge, or an API key)")


def api_name(key: int) -> str:
    """Kafka's name of API ``key`` (``EndTxn``), or the key as text for an unknown one."""
    name = api_key_map.get(key)
    return str(key) if name is None else "".join(p.capitalize() for p in name.split("_"))


class RequestFault(BaseModel):
    """One request fault (module docstring). ``apis``: names or keys (``api_key``);
    ``probability``: of applying to each matching request; ``delay_ms``, ``jitter_ms``: the
    ``delay`` fault's fixed part and the upper bound of its uniform random part (ms);
    ``clients``: client ids it matches (``kc-p3``; empty: every client); ``brokers``: node
    ids whose listener it matches (empty: every broker); ``reorder_wait_ms``: how long a
    ``reorder`` waits for the next request (ms); ``bytes_per_s``: a ``bandwidth``'s rate per
    broker link and direction (bytes/s, frames with their size prefix). Raises pydantic's
    ``ValidationError`` naming the field."""

    model_config = ConfigDict(extra="forbid")

    fault: Literal["delay", "hold", "drop-request", "drop-response", "duplicate", "reorder",
                   "bandwidth", "forget-leader-epoch"]
    apis: list[str | int] = Field(["Produce"], min_length=1)
    probability: float = Field(1.0, gt=0, le=1)
    delay_ms: int = Field(1000, ge=0)
    jitter_ms: int = Field(0, ge=0)
    clients: list[str] = []
    brokers: list[int] = []
    reorder_wait_ms: int = Field(1000, gt=0)
    bytes_per_s: int = Field(1_000_000, gt=0)

    @field_validator("apis")
    @classmethod
    def _known(cls, apis: list[str | int]) -> list[str | int]:
        for name in apis:
            api_key(name)
        return apis

    @property
    def keys(self) -> frozenset[int] | None:
        """The API keys it matches; None: every API (``EVERY``)."""
        keys = frozenset(api_key(a) for a in self.apis)
        return None if -1 in keys else keys


@dataclasses.dataclass
class Applied:
    """A fault while it is active in the proxy: ``spec``, its ``id``, ``rng`` (seeded by the
    proxy), ``started_ns`` on the history clock, the counts of requests it ``matched`` and
    ``applied`` to, and ``requests``: the first ``MAX_LISTED`` it applied to, each
    ``{"api", "client", "broker", "received_ns", "forwarded_ns", "partitions",
    "overtaken_by"}`` (``forwarded_ns`` None: never forwarded; ``partitions``: ``["topic-p",
    ...]`` of a Produce; ``overtaken_by``: ``{API name: ns}``, for each API of which a
    request of the same client received after it was forwarded before it, when the last
    such was forwarded; ``reordered`` for a reorder; ``errors``: ``{"topic-p": error name}``
    of a Produce's reply, ``"none"`` where the leader appended the batch, once it came)."""

    spec: RequestFault
    id: int
    rng: random.Random
    started_ns: int
    matched: int = 0
    applied: int = 0
    requests: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: "topic-p" -> [first received_ns, last received_ns, Produce requests] it applied to
    partitions: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    #: "topic-p" -> the decimal record values of those requests; None once one could not be
    #: read (compressed, another format, not a number) or past ``MAX_VALUES``
    values: dict[str, set[int] | None] = dataclasses.field(default_factory=dict)
    #: how many values ``values`` took in (against ``MAX_VALUES``)
    value_count: int = 0
    by_api: dict[str, int] = dataclasses.field(default_factory=dict)
    #: requests of it queued in the proxy and not yet forwarded
    waiting: int = 0
    #: Produce requests it applied to whose partitions kio could not read
    undecoded: int = 0
    #: ``forget-leader-epoch``: epoch -> partitions whose committed offset it took it out of
    #: (-1: the client had set none), and the requests it passed unchanged (no such field,
    #: or undecoded)
    forgotten: dict[int, int] = dataclasses.field(default_factory=dict)
    unchanged: int = 0
    #: (broker, direction) -> loop time at which a ``bandwidth`` link is free again
    next_free: dict[tuple[int, str], float] = dataclasses.field(default_factory=dict)

    def matches(self, api: int, client: str | None, broker: int) -> bool:
        """Whether a request of ``api`` from ``client`` to ``broker`` is one of its kind;
        if so, counted as matched."""
        s = self.spec
        keys = s.keys
        hit = ((keys is None or api in keys) and (not s.clients or client in s.clients)
               and (not s.brokers or broker in s.brokers))
        self.matched += hit
        return hit

    def draw(self) -> bool:
        """Whether it applies to the request it just matched (its probability)."""
        return self.spec.probability >= 1 or self.rng.random() < self.spec.probability

    def delay_s(self) -> float:
        """The delay of one request (s): ``delay_ms`` plus a uniform draw of ``jitter_ms``."""
        jitter = self.rng.uniform(0, self.spec.jitter_ms) if self.spec.jitter_ms else 0.0
        return (self.spec.delay_ms + jitter) / 1000

    def pace(self, broker: int, direction: str, size: int, now: float) -> float:
        """When (loop time, s) a frame of ``size`` bytes (``direction``: ``request`` or
        ``reply``) on ``broker``'s link has passed at ``bytes_per_s``, the frames before it
        on that link and direction first (a token bucket without burst)."""
        key = (broker, direction)
        done = max(now, self.next_free.get(key, now)) + size / self.spec.bytes_per_s
        self.next_free[key] = done
        return done

    def note(self, api: int, client: str | None, broker: int, at_ns: int,
             writes: dict[str, list[bytes | None] | None]) -> dict[str, Any] | None:
        """Count one request it applies to (``writes``: a Produce's record values per
        partition, ``codec.produce_partitions``; empty for other APIs); returns its listed
        entry (to be given its ``forwarded_ns``), or None beyond ``MAX_LISTED``."""
        self.applied += 1
        name = api_name(api)
        self.by_api[name] = self.by_api.get(name, 0) + 1
        partitions = sorted(writes)
        for tp, values in writes.items():
            first, _, n = self.partitions.get(tp, (at_ns, at_ns, 0))
            self.partitions[tp] = [first, at_ns, n + 1]
            known = self.values.setdefault(tp, set())
            if known is None:
                continue
            if (values is None or any(v is None or not v.isdigit() for v in values)
                    or self.value_count + len(values) > MAX_VALUES):
                self.values[tp] = None
            else:
                known.update(int(v) for v in values)
                self.value_count += len(values)
        if len(self.requests) >= MAX_LISTED:
            return None
        entry = {"api": name, "client": client, "broker": broker, "received_ns": at_ns,
                 "forwarded_ns": None, "partitions": partitions}
        self.requests.append(entry)
        return entry

    def report(self, ended_ns: int) -> dict[str, Any]:
        """What it did, JSON-ready: its spec, ``id``, ``started_ns``, ``ended_ns``,
        ``matched``, ``applied``, ``by_api``, ``partitions``, ``values`` (``{"topic-p":
        [value, ...] or None}``, as ``values``), ``undecoded``, ``requests``; for a
        ``forget-leader-epoch``, ``forgotten`` (``{epoch: partitions committed with it}``)
        and ``unchanged``."""
        return {"id": self.id, **self.spec.model_dump(mode="json"),
                "started_ns": self.started_ns, "ended_ns": ended_ns, "matched": self.matched,
                "applied": self.applied, "by_api": dict(self.by_api),
                "partitions": {tp: list(v) for tp, v in sorted(self.partitions.items())},
                "values": {tp: None if v is None else sorted(v)
                           for tp, v in sorted(self.values.items())},
                "undecoded": self.undecoded,
                **({"forgotten": {str(e): n for e, n in sorted(self.forgotten.items())},
                    "unchanged": self.unchanged}
                   if self.spec.fault == "forget-leader-epoch" else {}),
                "requests": list(self.requests)}
