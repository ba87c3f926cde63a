"""The cluster-state monitor: what the cluster was doing while the faults ran.

Every ``period_s`` (500 ms by default) and right before and after every nemesis op, the
monitor samples the cluster and records the sample in the history as an op of process
``"monitor"``, ``f = "cluster-state"``: an ``invoke`` ``{"trigger": "period" |
"before <nemesis f>" | "after <nemesis f>" | ...}``
and an ``ok`` whose value is::

    {"answering": {"<node id>": bool, ...},
     "partitions": {"<topic>": [{"partition": 0, "leader": 1, "leader_epoch": 3,
                                 "replicas": [1, 2, 3], "isr": [1, 2], "elr": [3] | null,
                                 "last_known_elr": [] | null, "offline": [],
                                 "hw": 812, "lso": 790}, ...]} | null,
     "controller": {"leader": 4, "epoch": 2, "high_watermark": 812,
                    "voters": {"4": 812, ...}, "observers": {"1": 805, ...}} | null,
     "epochs": {"<broker id>": {"<topic>": {"<partition>": 3, ...}}},
     "took_ms": 12}

and, in a share-group run, ``"share": {"<topic>": [{"partition": 0, "start_offset": 412,
"leader_epoch": 1, "lag": 30, "error": 0}, ...]}``: the share group's share-partition start
offsets and lags as its coordinator reports them (``DescribeShareGroupOffsets``, KIP-932,
``clusters.share_state``), or ``{"error": why}`` when it did not answer.

``answering``: the node's Kafka process replied to ``ApiVersions`` within 300 ms (a paused or
killed node does not, a node cut from its peers still does: the monitor reaches every node
from this host). ``partitions``: ``DescribeTopicPartitions`` (KIP-966) asked of every
answering broker, per partition the answer with the highest leader epoch (a broker cut from
the controllers keeps an old view) and among those the answer of the broker whose metadata
log reaches furthest (``controller``'s log end offsets: a broker slow to apply the metadata
keeps an old ISR in the same epoch), ``null`` when no broker answered; ``elr`` is ``null``
when the cluster keeps no eligible leader replicas; ``hw`` and ``lso`` (the high watermark
and the last stable offset, ``wire.end_offsets``) are what the leader answered, absent when
it did not.
``epochs``: each answering broker's own view of each partition's leader epoch (the
metadata checks: an epoch never goes back on a broker). ``controller``: the KRaft quorum as
its leader (the active controller) reports it through ``DescribeQuorum`` (its voters' and
observers' metadata log end offsets; ``high_watermark`` -1 while a new leader does not know
it), ``null`` when no controller answered as
leader (a cluster without known controller nodes, an external one, is asked through its
brokers). Every request connects as ``cluster.security`` says (TLS, SASL). Sources:
``clusters.wire``.

Later analyses explain anomalies from these samples (which election or truncation lost a
write); scenarios wait on them (``Monitor.wait_for``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from kafka_chaos.clusters import share_state, wire
from kafka_chaos.history import MONITOR, HistoryWriter, OpType
from kafka_chaos.nemesis.targets import quorum_endpoints

#: Seconds between samples (the issue asks for at most 500 ms).
PERIOD_S = 0.5


def _endpoint(node) -> str:
    return node.client_endpoint if node.is_broker else f"{node.host}:{node.controller_port}"


class Monitor:
    """Samples ``cluster`` on a background thread and on demand (``sample``); thread-safe.

    Args:
        cluster: the cluster (its ``nodes``; brokers answer on their broker listener,
            dedicated controllers on their controller listener).
        history: where samples are recorded (process ``"monitor"``).
        topics: the topics whose partitions are described.
        period_s: seconds between periodic samples.
        share: ``(share group, {topic: partition count})`` whose share-partitions every
            sample also describes, or None.
    """

    def __init__(self, cluster, history: HistoryWriter, topics: list[str],
                 period_s: float = PERIOD_S,
                 share: tuple[str, dict[str, int]] | None = None) -> None:
        self.cluster = cluster
        self.history = history
        self.topics = list(topics)
        self.share = share
        self.period_s = period_s
        self.latest: dict[str, Any] | None = None
        self.samples = 0
        #: (topic, partition) -> the highest high watermark a sample has shown of it, and
        #: how many samples showed one below the highest before them (the log truncated
        #: below records consumers could read: a scenario's ``truncated`` condition)
        self._hw_peak: dict[tuple[str, int], int] = {}
        self.hw_drops: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max(1, len(cluster.nodes)), thread_name_prefix="ping")
        self._sampler = ThreadPoolExecutor(1, thread_name_prefix="sample")
        self._thread = threading.Thread(target=self._loop, daemon=True, name="monitor")

    def start(self) -> None:
        """Start periodic sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; returns once no sample is in flight (the history has no open
        monitor op). Idempotent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        with self._lock:  # a sample(...) from another thread may still be running
            self._closed = True
            self._pool.shutdown(wait=True)
        self._sampler.shutdown(wait=True)  # outside the lock: a queued sample takes it

    def _loop(self) -> None:
        # the first sample at once: the record must see the partitions from the first write
        # on (analysis.evidence counts what comes before it as unseen)
        wait = 0.0
        while not self._stop.wait(wait):
            wait = self.period_s
            try:
                self.sample("period")
            except ValueError:
                return  # the history was closed under us: the run is over

    def sample(self, trigger: str) -> dict[str, Any] | None:
        """Observe the cluster now and record it; returns the state (None once stopped).
        Raises ``ValueError`` if the history is closed.

        Called from the main thread (a scenario step, after a nemesis op), the sample is taken
        on a thread of its own: Ctrl-C interrupts the main thread between any two bytecodes,
        and an op left invoked and never completed makes the history invalid (the next
        sample's invoke is refused by validation). ``stop`` waits for that sample."""
        if threading.current_thread() is threading.main_thread():
            try:
                return self._sampler.submit(self._sample, trigger).result()
            except RuntimeError:  # the sampler is shut down: stopped
                if self._closed:
                    return None
                raise
        return self._sample(trigger)

    def record(self, f: str, value: Any, observe: Callable[[], Any]) -> Any:
        """Record one more monitor op ``f``, invoked with ``value``, whose ``ok`` completion
        is what ``observe()`` returns, between two samples (a process has one op open at a
        time). Returns it; raises what ``observe`` raised once the op is ``info``, and
        ``ValueError`` once the monitor is stopped."""
        with self._lock:
            if self._closed:
                raise ValueError("the monitor is stopped")
            self.history.append(MONITOR, OpType.INVOKE, f, value)
            try:
                done = observe()
            except BaseException as exc:  # the op must complete, whatever happened
                self.history.append(MONITOR, OpType.INFO, f, None,
                                    f"{type(exc).__name__}: {exc}"[:200])
                raise
            self.history.append(MONITOR, OpType.OK, f, done)
        return done

    def _sample(self, trigger: str) -> dict[str, Any] | None:
        with self._lock:
            if self._closed:  # stopped: nothing may be appended any more
                return None
            self.history.append(MONITOR, OpType.INVOKE, "cluster-state", {"trigger": trigger})
            try:
                state = self._observe()
            except BaseException as exc:  # the op must complete, whatever happened
                self.history.append(MONITOR, OpType.INFO, "cluster-state", None,
                                    f"{type(exc).__name__}: {exc}")
                raise
            self.history.append(MONITOR, OpType.OK, "cluster-state", state)
        with self._changed:
            for topic, parts in (state.get("partitions") or {}).items():
                for p in parts:
                    hw, tp = p.get("hw"), (topic, p["partition"])
                    if not isinstance(hw, int):
                        continue
                    if hw < self._hw_peak.get(tp, hw):
                        self.hw_drops[tp] = self.hw_drops.get(tp, 0) + 1
                    else:
                        self._hw_peak[tp] = hw
            self.latest = state
            self.samples += 1
            self._changed.notify_all()
        return state

    def _observe(self) -> dict[str, Any]:
        start = time.monotonic()
        share = self._pool.submit(self._share) if self.share else None
        nodes = list(self.cluster.nodes)
        sec = self.cluster.security
        up = dict(zip([n.node_id for n in nodes],
                      self._pool.map(lambda n: wire.answers(_endpoint(n), security=sec), nodes)))
        brokers = [n for n in nodes if n.is_broker and up[n.node_id]]
        views = [(n.node_id, v) for n, v in zip(brokers, self._pool.map(self._describe, brokers))
                 if v is not None]
        controller, metadata = None, {}
        for node, endpoint in quorum_endpoints(nodes):
            if not up[node.node_id]:
                continue
            try:
                quorum = wire.describe_quorum(endpoint, security=sec)
            except wire.WireError:
                continue  # not the quorum leader, or cut from it
            controller = {**quorum, **{k: {str(i): v for i, v in quorum[k].items()}
                                       for k in ("voters", "observers")}}
            metadata = {**quorum["observers"], **quorum["voters"]}
            break
        partitions = _freshest(views, metadata) if views else None
        epochs = {str(b): {t: {str(p["partition"]): p["leader_epoch"] for p in parts}
                           for t, parts in view.items()} for b, view in views}
        if partitions:
            self._end_offsets(partitions, {n.node_id: n for n in brokers})
        out = {"answering": {str(k): v for k, v in up.items()}, "partitions": partitions,
               "controller": controller, "epochs": epochs}
        if share is not None:
            out["share"] = share.result()
        return {**out, "took_ms": round((time.monotonic() - start) * 1000)}

    def _share(self) -> dict[str, Any]:
        assert self.share is not None
        group, counts = self.share
        try:
            found = share_state.start_offsets(
                self.cluster.bootstrap_servers, group,
                {t: list(range(n)) for t, n in counts.items()}, timeout_s=1.0,
                security=self.cluster.security)
        except wire.WireError as exc:
            return {"error": str(exc)[:200]}
        out: dict[str, Any] = {}
        for (topic, partition), state in sorted(found.items()):
            out.setdefault(topic, []).append({"partition": partition, **state})
        return out

    def _end_offsets(self, partitions: dict[str, list[dict]], up: dict[int, Any]) -> None:
        """Adds ``hw`` and ``lso`` to each partition of ``partitions`` whose leader (one of
        the answering brokers ``up``) told them (``wire.end_offsets``)."""
        led: dict[int, dict[str, list[int]]] = {}
        for topic, parts in partitions.items():
            for p in parts:
                if p.get("leader") in up:
                    led.setdefault(p["leader"], {}).setdefault(topic, []).append(p["partition"])

        def ask(leader: int) -> dict:
            try:
                return wire.end_offsets(up[leader].client_endpoint, led[leader],
                                        security=self.cluster.security)
            except wire.WireError:
                return {}

        found = {tp: v for got in self._pool.map(ask, list(led)) for tp, v in got.items()}
        for topic, parts in partitions.items():
            for p in parts:
                p.update(found.get((topic, p["partition"]), {}))

    def _describe(self, node) -> dict | None:
        try:
            return wire.describe_topic_partitions(node.client_endpoint, self.topics,
                                                  security=self.cluster.security)
        except wire.WireError:
            return None

    def wait_for(self, condition: Callable[[dict[str, Any]], bool], timeout_s: float,
                 stop: threading.Event) -> dict[str, Any] | None:
        """Block until a sample satisfies ``condition`` (a function of one sample's state);
        return that state, or None after ``timeout_s`` seconds or once ``stop`` is set."""
        deadline = time.monotonic() + timeout_s
        seen = -1
        while not stop.is_set() and time.monotonic() < deadline:
            with self._changed:
                if self.samples == seen:
                    self._changed.wait(min(self.period_s, max(0.0, deadline - time.monotonic())))
                state, seen = self.latest, self.samples
            if state is not None and condition(state):
                return state
        return None


def _freshest(views: list[tuple[int, dict[str, list[dict]]]],
              metadata: dict[int, int] | None = None) -> dict[str, list[dict]]:
    """Per partition, the view with the highest leader epoch among ``(broker id, view)``
    pairs, and among those the one of the broker whose metadata log reaches furthest
    (``metadata``: broker id -> its metadata log end offset, as the quorum's leader reports
    it; the first such view without it), plus ``stale_leaders``: ``[[broker id, its
    epoch], ...]`` of the brokers whose own view names themselves leader in an older epoch
    (absent when none does)."""
    # Each broker answers from its own copy of the metadata; one cut from the controllers
    # (a zombie leader) still names itself leader, and may acknowledge acks=1 writes that
    # the newer leader never gets: the analysis needs to see it (analysis.evidence).
    # An ISR change keeps the leader epoch: a broker slow to apply the metadata log (a slow
    # disk) still shows the ISR from before it, in the same epoch as the others.
    reach = metadata or {}
    out: dict[str, list[dict]] = {}
    for topic in views[0][1]:
        parts: dict[int, dict] = {}
        rank: dict[int, tuple[int, int]] = {}
        for broker, view in views:
            for p in view.get(topic, []):
                mine = (p["leader_epoch"], reach.get(broker, -1))
                if p["partition"] not in parts or mine > rank[p["partition"]]:
                    parts[p["partition"]], rank[p["partition"]] = p, mine
        out[topic] = []
        for n, p in sorted(parts.items()):
            best = {k: v for k, v in p.items() if k != "error" or v}
            stale = sorted([node, q["leader_epoch"]] for node, view in views
                           for q in view.get(topic, []) if q["partition"] == n
                           and q.get("leader") == node and q["leader_epoch"] < p["leader_epoch"])
            if stale:
                best["stale_leaders"] = stale
            out[topic].append(best)
    return out


def partition_state(state: dict[str, Any], topic: str, partition: int) -> dict[str, Any] | None:
    """The sampled state of ``topic``-``partition`` in a monitor ``state``, or None."""
    for p in (state.get("partitions") or {}).get(topic, []):
        if p["partition"] == partition:
            return p
    return None
