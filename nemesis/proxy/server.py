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
import struct
import threading
from typing import Any

from kafka_chaos.clusters.base import Cluster
from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.nemesis.proxy import codec

#: Seconds ``start`` and ``stop`` wait for the proxy's loop.
LOOP_WAIT_S = 10.0


class ProxyError(KafkaChaosError, RuntimeError):
    """The proxy could not listen, or its loop did not answer."""


class KafkaProxy:
    """A proxy for the brokers ``upstream`` (``{node id: (host, port)}``, the brokers'
    client listeners), listening on ``listen_host`` (a port per broker, chosen by the
    kernel). ``bootstrap`` (after ``start``) is what the clients are given instead of the
    brokers' addresses. Plaintext listeners only: a TLS listener would need the proxy to end
    TLS, which this version does not do."""

    def __init__(self, upstream: dict[int, tuple[str, int]], listen_host: str = "127.0.0.1"
                 ) -> None:
        self._upstream = dict(upstream)
        self.listen_host = listen_host
        self._listeners: dict[int, tuple[asyncio.AbstractServer, int]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="kafka-proxy")
        self._tasks: set[asyncio.Task] = set()
        self._counts: dict[str, Any] = {
            "connections": collections.Counter(), "requests": collections.Counter(),
            "rewritten": collections.Counter(), "unparsed": collections.Counter(),
            "upstream_failures": 0, "errors": collections.Counter(), "capped": {},
            "client_ids": set(),
        }

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> KafkaProxy:
        """A proxy for the client listeners of ``cluster``'s brokers (not started)."""
        upstream = {}
        for node in cluster.brokers:
            host, _, port = node.client_endpoint.rpartition(":")
            upstream[node.node_id] = (host, int(port))
        return cls(upstream)

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

    def _call(self, coro) -> Any:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result(LOOP_WAIT_S)
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
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _track(self, coro) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        sides = [self._loop.create_task(self._requests(client_r, broker_w, pending)),
                 self._loop.create_task(self._replies(broker_r, client_w, pending))]
        try:
            await asyncio.wait(sides, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for side in sides:
                side.cancel()
            for w in (client_w, broker_w):
                w.close()
        # a side that raised (a frame kio or the header reader refused) ended the connection:
        # counted, so that it shows in run.json rather than in asyncio's log alone
        for result in await asyncio.gather(*sides, return_exceptions=True):
            if isinstance(result, Exception):
                self._counts["errors"][type(result).__name__] += 1

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        pending: dict[int, tuple[int, int]]) -> None:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            header = codec.request_header(frame)
            self._counts["requests"][header.api_key] += 1
            if header.client_id:
                self._counts["client_ids"].add(header.client_id)
            if not (header.api_key == codec.PRODUCE and codec.produce_acks(frame, header) == 0):
                pending[header.correlation] = (header.api_key, header.version)
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()

    async def _replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       pending: dict[int, tuple[int, int]]) -> None:
        hosts = {h.encode() for h, _ in self._upstream.values()}
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            asked = pending.pop(codec.response_correlation(frame), None)
            if asked is not None:
                frame = await self._rewrite(frame, *asked, hosts)
                hosts = {h.encode() for h, _ in self._upstream.values()}
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()

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
        for node, host, port in brokers:
            self._upstream[node] = (host, port)  # a broker may move; the reply is the truth
            await self._listen(node)
        self._counts["rewritten"][api_key] += 1
        return codec.rewrite(decoded, lambda node, h, p: (self.listen_host,
                                                           self._listeners[node][1]))


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame without its size; None at the end of the stream."""
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
