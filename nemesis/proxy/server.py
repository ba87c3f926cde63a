"""The Kafka protocol proxy: one listener per broker, between the workload's clients and the
brokers, keeping the clients behind it.

A client reaches broker N only through listener N: every reply that names brokers has their
addresses replaced by the proxy's (``codec``), and a broker first named in a reply gets a
listener of its own then. A generic TCP proxy cannot do this: the brokers' advertised
listeners send clients around it (Shopify/toxiproxy#171). The proxy runs an asyncio loop on
a thread of its own; what it saw is in ``counts()``. The monitor and the checker's final
reads never go through it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import random
import struct
import threading
import time
from typing import Any, Callable

from kafka_chaos.clusters.base import Cluster
from kafka_chaos.errors import ProxyError
from kafka_chaos.nemesis.proxy import codec
from kafka_chaos.nemesis.proxy.faults import Applied, RequestFault, api_name

#: Seconds ``start`` and ``stop`` wait for the proxy's loop.
LOOP_WAIT_S = 10.0
#: Seconds a connection whose client has gone stays open after a late request (a fault's)
#: was forwarded on it: the broker is to read it whole and answer it.
LATE_REPLY_S = 5.0


class KafkaProxy:
    """A proxy for the brokers ``upstream`` (``{node id: (host, port)}``, the brokers'
    client listeners), listening on ``listen_host`` (a port per broker, chosen by the
    kernel). ``bootstrap`` (after ``start``) is what the clients are given instead of the
    brokers' addresses. Plaintext listeners only: a TLS listener would need the proxy to end
    TLS, which this version does not do."""

    def __init__(self, upstream: dict[int, tuple[str, int]], listen_host: str = "127.0.0.1",
                 clock: Callable[[], int] = time.monotonic_ns, seed: int = 0) -> None:
        self._upstream = dict(upstream)
        self._clock = clock
        self._seed = seed
        self._faults: dict[int, tuple[Applied, asyncio.Event]] = {}
        self._fault_ids = 0
        self._own_correlation = 0  # the duplicates' correlation ids: -1, -2, ...
        self._topics: dict[Any, str] = {}  # topic id -> name, from Metadata replies
        # (client id, API key) -> when the proxy last forwarded such a request (clock ns)
        self._forwarded: dict[tuple[str | None, int], int] = {}
        self.listen_host = listen_host
        self._listeners: dict[int, tuple[asyncio.AbstractServer, int]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="kafka-proxy")
        # the connections' tasks, held here because the loop keeps only weak references
        # (``_close`` cancels every task of the loop, these among them)
        self._tasks: set[asyncio.Task] = set()
        self._counts: dict[str, Any] = {
            "connections": collections.Counter(), "requests": collections.Counter(),
            "rewritten": collections.Counter(), "unparsed": collections.Counter(),
            "upstream_failures": 0, "errors": collections.Counter(), "capped": {},
            "client_ids": set(),
        }

    @classmethod
    def for_cluster(cls, cluster: Cluster, clock: Callable[[], int] = time.monotonic_ns,
                    seed: int = 0) -> KafkaProxy:
        """A proxy for the client listeners of ``cluster``'s brokers (not started), timing
        its faults' requests with ``clock`` (ns; the run's history clock) and drawing their
        probabilities from streams seeded by ``seed``."""
        upstream = {}
        for node in cluster.brokers:
            host, _, port = node.client_endpoint.rpartition(":")
            upstream[node.node_id] = (host, int(port))
        return cls(upstream, clock=clock, seed=seed)

    # -- life ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Listen for every broker of ``upstream``. Raises ``ProxyError`` (having stopped
        what it started)."""
        self._thread.start()
        try:
            for node in sorted(self._upstream):
                self._call(self._listen(node))
        except ProxyError:
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the listeners of the brokers given to the constructor."""
        return ",".join(f"{self.listen_host}:{self._listeners[n][1]}"
                        for n in sorted(self._listeners))

    def stop(self) -> None:
        """Close every listener and connection, then end the loop (never raises)."""
        if not self._thread.is_alive():
            return
        try:
            self._call(self._close())
        except ProxyError:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(LOOP_WAIT_S)

    def counts(self) -> dict:
        """What the proxy saw: ``connections`` accepted per broker, ``requests`` per API key,
        replies ``rewritten`` and left ``unparsed`` (naming a broker, but kio could not decode
        them: a client may then reach that broker directly) per API key, ``upstream_failures``
        (a broker that refused the proxy's connection), ``errors`` (connections the proxy
        itself ended on an exception, by its type), ``capped`` ApiVersions entries
        (``{api key: [broker's max, kio's max]}``), the ``client_ids`` seen, and each
        broker's ``listeners`` (``{node id: "host:port"}``). JSON-ready."""
        c = self._counts
        return {"connections": {str(k): v for k, v in sorted(c["connections"].items())},
                "requests": {str(k): v for k, v in sorted(c["requests"].items())},
                "rewritten": {str(k): v for k, v in sorted(c["rewritten"].items())},
                "unparsed": {str(k): v for k, v in sorted(c["unparsed"].items())},
                "upstream_failures": c["upstream_failures"],
                "errors": dict(sorted(c["errors"].items())),
                "capped": {str(k): list(v) for k, v in sorted(c["capped"].items())},
                "client_ids": sorted(c["client_ids"]),
                "listeners": {str(n): f"{self.listen_host}:{port}"
                              for n, (_, port) in sorted(self._listeners.items())}}

    def _call(self, coro, timeout_s: float = LOOP_WAIT_S) -> Any:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ProxyError(f"the Kafka proxy: {exc}") from exc

    async def _listen(self, node: int) -> None:
        if node in self._listeners:
            return
        server = await asyncio.start_server(
            lambda r, w: self._track(self._serve(node, r, w)), self.listen_host, 0)
        self._listeners[node] = (server, server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        for server, _ in self._listeners.values():
            server.close()
        # the connections, and a call its caller stopped waiting for (an ``end_faults`` cut
        # short by Ctrl-C): a task left pending when the loop stops is destroyed pending
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _track(self, coro) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- request faults ------------------------------------------------------------------------
    def add_fault(self, spec: RequestFault) -> int:
        """Apply ``spec`` to the requests it matches from now on; returns its id. Raises
        ``ProxyError``."""
        return self._call(self._add(spec))

    def active_faults(self) -> list[int]:
        """The ids of the faults applied now."""
        return sorted(self._faults)

    def end_faults(self, fault_id: int | None = None) -> list[dict[str, Any]]:
        """End fault ``fault_id`` (every active fault when None): the requests it holds are
        forwarded, and what it delayed, and the leaders' answers to the Produce requests its
        report lists, are waited for (at most its longest delay and ``LOOP_WAIT_S`` more).
        Returns their reports (``Applied.report``), oldest first. Raises ``ProxyError``."""
        ending = [self._faults[i][0] for i in ([fault_id] if fault_id is not None
                                               else sorted(self._faults)) if i in self._faults]
        wait_s = max([(a.spec.delay_ms + a.spec.jitter_ms) / 1000 for a in ending], default=0)
        return self._call(self._end(fault_id, wait_s), LOOP_WAIT_S + wait_s)

    async def _add(self, spec: RequestFault) -> int:
        self._fault_ids += 1
        fid = self._fault_ids
        self._faults[fid] = (Applied(spec, fid, random.Random(f"{self._seed}-{fid}"),
                                     self._clock()), asyncio.Event())
        return fid

    async def _end(self, fault_id: int | None, wait_s: float) -> list[dict[str, Any]]:
        ids = [fault_id] if fault_id is not None else sorted(self._faults)
        ended = [self._faults.pop(i) for i in ids if i in self._faults]
        for _, released in ended:
            released.set()
        ended_ns = self._clock()
        deadline = self._loop.time() + wait_s + 1.0
        # the report says what the leaders answered to the Produce requests it lists
        while ((any(a.waiting for a, _ in ended) or any(
                "errors" not in q and q.get("forwarded_ns") is not None
                for a, _ in ended for q in a.requests if q["api"] == "Produce"))
               and self._loop.time() < deadline):
            await asyncio.sleep(0.05)
        return [a.report(ended_ns) for a, _ in ended]

    def _fault_for(self, api: int, client: str | None, broker: int
                   ) -> tuple[Applied, asyncio.Event] | None:
        for applied, released in self._faults.values():
            if applied.matches(api, client, broker) and applied.draw():
                return applied, released
        return None

    # -- one client connection -----------------------------------------------------------------
    async def _serve(self, node: int, client_r: asyncio.StreamReader,
                     client_w: asyncio.StreamWriter) -> None:
        self._counts["connections"][node] += 1
        host, port = self._upstream[node]
        try:
            broker_r, broker_w = await asyncio.open_connection(host, port)
        except OSError:
            self._counts["upstream_failures"] += 1
            client_w.close()
            return
        conn = _Connection(node)
        reader = self._loop.create_task(self._requests(client_r, conn))
        sender = self._loop.create_task(self._send(conn, broker_w))
        replies = self._loop.create_task(self._replies(broker_r, client_w, conn))
        try:
            await asyncio.wait([reader, replies], return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not replies.done():
                # the client has gone: what a fault still keeps is forwarded all the same (a
                # late EndTxn, KAFKA-17754), and a forwarded one's reply awaited a moment, so
                # that the broker reads it whole before the connection closes
                conn.out.put_nowait(None)
                await asyncio.wait([sender, replies], return_when=asyncio.FIRST_COMPLETED)
                if conn.late:
                    await asyncio.wait([replies], timeout=LATE_REPLY_S)
        finally:
            for side in (reader, sender, replies):
                side.cancel()
            for w in (client_w, broker_w):
                w.close()
        # a side that raised (a frame kio or the header reader refused) ended the connection:
        # counted, so that it shows in run.json rather than in asyncio's log alone
        for result in await asyncio.gather(reader, sender, replies, return_exceptions=True):
            if isinstance(result, Exception):
                self._counts["errors"][type(result).__name__] += 1

    async def _requests(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                conn.gone = True
                conn.release_held()
                return
            header = codec.request_header(frame)
            self._counts["requests"][header.api_key] += 1
            if header.client_id:
                self._counts["client_ids"].add(header.client_id)
            replied = not (header.api_key == codec.PRODUCE
                           and codec.produce_acks(frame, header) == 0)
            found = self._fault_for(header.api_key, header.client_id, conn.node)
            if found is None:
                if replied:
                    conn.pending[header.correlation] = (header.api_key, header.version, False,
                                                        None, None)
                conn.put(_Item(frame, header.api_key, header.client_id))
                continue
            applied, released = found
            kind = applied.spec.fault
            writes = {}
            if header.api_key == codec.PRODUCE:
                read = codec.produce_partitions(frame, header.version, self._topics)
                applied.undecoded += read is None
                writes = read or {}
            entry = applied.note(header.api_key, header.client_id, conn.node, self._clock(),
                                 writes)
            if kind == "drop-request":
                continue
            if kind == "forget-leader-epoch":
                rewritten = codec.forget_leader_epochs(frame, header.api_key, header.version)
                if rewritten is None:
                    applied.unchanged += 1
                else:
                    frame, epochs = rewritten
                    for epoch in epochs:
                        applied.forgotten[epoch] = applied.forgotten.get(epoch, 0) + 1
            if entry is not None and header.api_key == codec.PRODUCE and not replied:
                entry["errors"] = None  # acks=0: no answer comes
            if replied:
                conn.pending[header.correlation] = (
                    header.api_key, header.version, kind == "drop-response",
                    applied if kind == "bandwidth" else None,
                    entry if header.api_key == codec.PRODUCE else None)
            item = _Item(frame, header.api_key, header.client_id, entry=entry, applied=applied)
            if kind == "delay":
                item.at = self._loop.time() + applied.delay_s()
            elif kind == "bandwidth":
                item.paced = True
            elif kind == "hold":
                item.gate = released
            if kind == "reorder" and conn.held is None:
                conn.hold(item, self._loop.call_later(applied.spec.reorder_wait_ms / 1000,
                                                      conn.release_held))
                continue
            conn.put(item)
            if kind == "duplicate":
                self._own_correlation -= 1
                if replied:
                    conn.pending[self._own_correlation] = (header.api_key, header.version, True,
                                                           None, None)
                conn.put(_Item(codec.with_correlation(frame, self._own_correlation),
                               header.api_key, header.client_id))

    async def _send(self, conn: _Connection, writer: asyncio.StreamWriter) -> None:
        """Forward the connection's requests in order, each when its fault lets it go."""
        while True:
            item = await conn.out.get()
            if item is None:
                return
            if item.applied is not None:
                item.applied.waiting += 1
            try:
                if item.gate is not None:
                    await item.gate.wait()
                if item.at is not None:
                    await asyncio.sleep(max(0.0, item.at - self._loop.time()))
                if item.paced:
                    done = item.applied.pace(conn.node, "request", len(item.frame) + 4,
                                             self._loop.time())
                    await asyncio.sleep(max(0.0, done - self._loop.time()))
                conn.late |= conn.gone
                if not await _write(writer, item.frame):
                    return
                now = self._clock()
                if item.entry is not None:
                    item.entry["forwarded_ns"] = now
                    # the client's later requests that reached a broker before this one: an
                    # EndTxn overtaken by the next transaction's first request (KAFKA-17754)
                    item.entry["overtaken_by"] = {
                        api_name(api): at for (client, api), at in sorted(
                            self._forwarded.items(), key=lambda kv: kv[0][1])
                        if client == item.client and at > item.entry["received_ns"]}
                self._forwarded[(item.client, item.api)] = now
            finally:
                if item.applied is not None:
                    item.applied.waiting -= 1

    async def _replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       conn: _Connection) -> None:
        hosts = {h.encode() for h, _ in self._upstream.values()}
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            asked = conn.pending.pop(codec.response_correlation(frame), None)
            if asked is not None:
                api, version, swallow, paced, entry = asked
                if entry is not None:  # what the leader did with a Produce a fault acted on
                    entry["errors"] = codec.produce_errors(frame, version, self._topics)
                if swallow:  # a drop-response fault's, or the reply to a duplicate
                    continue
                frame = await self._rewrite(frame, api, version, hosts)
                hosts = {h.encode() for h, _ in self._upstream.values()}
                if paced is not None:
                    done = paced.pace(conn.node, "reply", len(frame) + 4, self._loop.time())
                    await asyncio.sleep(max(0.0, done - self._loop.time()))
            if not writer.is_closing():  # else the client has gone: replies are still read
                await _write(writer, frame)

    async def _rewrite(self, frame: bytes, api_key: int, version: int,
                       hosts: set[bytes]) -> bytes:
        if api_key == codec.API_VERSIONS:
            frame, capped = codec.cap_api_versions(frame, version)
            self._counts["capped"].update(capped)
            return frame
        if api_key not in codec.REWRITTEN or not any(h in frame for h in hosts):
            return frame  # names no broker: nothing to decode
        found = codec.broker_endpoints(frame, api_key, version)
        if found is None:
            self._counts["unparsed"][api_key] += 1
            return frame
        decoded, brokers = found
        if api_key == codec.METADATA:
            self._topics.update(codec.metadata_topics(decoded))
        for node, host, port in brokers:
            self._upstream[node] = (host, port)  # a broker may move; the reply is the truth
            await self._listen(node)
        self._counts["rewritten"][api_key] += 1
        return codec.rewrite(decoded, lambda node, h, p: (self.listen_host,
                                                           self._listeners[node][1]))


@dataclasses.dataclass
class _Item:
    """A request (``api`` key, from ``client``) on its way to the broker: forwarded at loop
    time ``at`` (a delay), once ``gate`` is set (a hold); ``entry``: its line in
    ``applied``'s report."""

    frame: bytes
    api: int
    client: str | None
    at: float | None = None
    gate: asyncio.Event | None = None
    entry: dict[str, Any] | None = None
    applied: Applied | None = None
    paced: bool = False  # by ``applied``, a bandwidth fault


class _Connection:
    """One client connection's state: the ``out`` queue of requests to forward (None ends
    it), the ``pending`` replies (correlation id -> (API key, version, swallow, the
    bandwidth fault that paces it or None, the listed entry of a Produce a fault acted on
    or None)), the request a ``reorder`` ``held``, whether the
    client has ``gone`` and whether a request was forwarded after that (``late``)."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.out: asyncio.Queue[_Item | None] = asyncio.Queue()
        self.pending: dict[int, tuple[int, int, bool, Applied | None, dict | None]] = {}
        self.held: tuple[_Item, asyncio.TimerHandle] | None = None
        self.gone = False
        self.late = False

    def put(self, item: _Item) -> None:
        """Queue ``item``, then the request a reorder held (now behind it)."""
        self.out.put_nowait(item)
        if self.held is not None:
            held, timer = self.held
            timer.cancel()
            self.held = None
            if held.entry is not None:
                held.entry["reordered"] = True
            self.out.put_nowait(held)

    def hold(self, item: _Item, timer: asyncio.TimerHandle) -> None:
        """Keep ``item`` until the next request is queued, or until ``timer`` fires."""
        if item.entry is not None:
            item.entry["reordered"] = False
        self.held = (item, timer)

    def release_held(self) -> None:
        """Queue the held request in its own place: no next request came."""
        if self.held is not None:
            held, timer = self.held
            timer.cancel()
            self.held = None
            self.out.put_nowait(held)


async def _write(writer: asyncio.StreamWriter, frame: bytes) -> bool:
    """Send one frame with its size; False when the peer has reset the connection (its
    own doing, not the proxy's: not counted as an error)."""
    try:
        writer.write(struct.pack(">i", len(frame)) + frame)
        await writer.drain()
    except ConnectionError:
        return False
    return True


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame without its size; None at the end of the stream."""
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
