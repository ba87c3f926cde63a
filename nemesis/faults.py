"""Process and network faults: ``kill``/``stop``/``start``, ``pause``/``resume``,
``partition``/``heal``.

Targets are data, as in Jepsen's ``nemesis/combined``: ``{"target": "one"|"leader"|"controller"|
"follower"|"minority"|"majority"|"all"|[node id, ...]}`` for processes (``nemesis.targets``);
``{"target": <one of PARTITION_TARGETS>}`` for the network.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_chaos.catalogue.faults import PARTITION_TARGETS
from kafka_chaos.clusters import admin, wire
from kafka_chaos.clusters.base import Killable, LosesUnsynced, Node, Partitionable, Pausable
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import (LAG_S, LAGGING_LEADER, LONE_HOLD_S, LONE_LEADER,
                                        LONE_POLL_S, LONE_WAIT_S, active_controller, leader_of,
                                        partition_of, pick)
from kafka_chaos.waiting import WaitTimeout, wait_until


class ProcessNemesis(Nemesis):
    """SIGKILL, SIGTERM or SIGSTOP Kafka processes and bring them back.

    fs: ``kill`` (SIGKILL), ``stop`` (SIGTERM, a clean shutdown) and ``lose-unfsynced`` (a
    power loss: SIGKILL, then every write the node's filesystem was not asked to fsync is
    dropped; ``clusters.base.LosesUnsynced``) -> ``start``; ``pause`` -> ``resume``. ``value``
    is ``{"target": see pick(), "topic": str, "partition": int}``; ``start`` with a list
    target starts those nodes only, else every node found dead. ``lose-unfsynced`` completes
    with ``{"lost": {name: {"truncated_files": n, "logs": {"<topic>-<p>/<segment>.log":
    bytes lost}, "sole_in_sync_replica_of": ["<topic>-<p>", ...]}}}`` (every file truncated is
    counted, but only segment data is listed: index files are preallocated and rebuilt by
    recovery; the partitions of ``value["topic"]`` whose ISR was that node alone just before).
    ``kill`` of target ``lagging-leader``, ``kill`` or ``lose-unfsynced`` of ``lone-leader``:
    the leader's replication cut first, for ``LAG_S`` s or until its ISR is itself alone,
    then the network healed (``_cut_leader``).
    ``roll``: a rolling restart of the targets (``"all"`` by default), one at a time: SIGTERM,
    start, and wait until every broker is registered and every partition of ``value["topic"]``
    has its full ISR again before the next; ok ``{"rolled": [names], "waited_s": {name: s}}``.
    Raises ``NemesisError`` when the
    cluster lacks the ability.
    """

    fs = frozenset({"kill", "stop", "start", "pause", "resume", "lose-unfsynced", "roll"})
    name = "process"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        self.killed: set[int] = set()
        self.paused: set[int] = set()

    def _targets(self, value: dict) -> list[Node]:
        live = [n for n in self.cluster.nodes
                if n.node_id not in self.killed | self.paused and self.cluster.is_running(n)]
        return pick(self.cluster, self.rng, live, value)

    def invoke(self, f: str, value: Any) -> Any:
        if f == "kill" and not isinstance(self.cluster, Killable):
            raise NemesisError("this cluster backend cannot kill nodes")
        if f in ("pause", "resume") and not isinstance(self.cluster, Pausable):
            raise NemesisError("this cluster backend cannot pause nodes")
        if f == "lose-unfsynced":
            if not (isinstance(self.cluster, LosesUnsynced) and getattr(self.cluster,
                                                                        "lossy_fs", False)):
                raise NemesisError("this cluster has no filesystem that can lose un-fsynced "
                                   "writes (the local backend, set up for lose-unfsynced)")
            if (value or {}).get("target") == LONE_LEADER:
                return self._cut_leader(f, value)
            return self._lose(self._targets(value), (value or {}).get("topic"))
        if f == "roll":
            return self._roll(value or {})
        if f == "kill" and (value or {}).get("target") in (LAGGING_LEADER, LONE_LEADER):
            return self._cut_leader(f, value)
        if f in ("kill", "stop"):
            nodes = self._targets(value)
            for n in nodes:
                if f == "kill":
                    self.cluster.kill(n)
                else:
                    self.cluster.stop(n)
                self.killed.add(n.node_id)
            return {"killed" if f == "kill" else "stopped": [n.name for n in nodes]}
        if f == "pause":
            nodes = self._targets(value)
            for n in nodes:
                # before the SIGSTOP: a pause that raises may still take effect, and the
                # heal must thaw it
                self.paused.add(n.node_id)
                self.cluster.pause(n)
            return {"paused": [n.name for n in nodes]}
        if f == "resume":
            nodes = [self.cluster.node(i) for i in sorted(self.paused)]
            for n in nodes:
                self.cluster.resume(n)
            self.paused.clear()
            return {"resumed": [n.name for n in nodes]}
        # start: bring back the given nodes, or every killed node (and any node found dead)
        chosen = (value or {}).get("target")
        nodes = [n for n in self.cluster.nodes if not self.cluster.is_running(n)
                 and (not isinstance(chosen, list) or n.node_id in chosen)]
        for n in nodes:
            self.cluster.start(n)
            self.killed.discard(n.node_id)
        return {"started": [n.name for n in nodes]}

    def _lose(self, nodes: list[Node], topic: str | None) -> dict:
        lost = {}
        for n in nodes:
            sole = self._sole_in_sync(n, topic)
            before = self.clock() if self.clock is not None else None
            report = self.cluster.lose_unsynced(n)
            self.killed.add(n.node_id)
            lost[n.name] = {"truncated_files": len(report["files"]), "logs": {
                path.lstrip("/"): gone for path, (_, gone) in report["files"].items()
                if path.endswith(".log")}, "sole_in_sync_replica_of": sole}
            if before is not None:  # the node died and lost its bytes within this span
                lost[n.name]["cut_ns"] = [before, self.clock()]
        return {"lost": lost}

    def _cut_leader(self, f: str, value: dict) -> dict:
        """``kill`` or ``lose-unfsynced`` (``f``) of the leader of ``value``'s partition after
        cutting its broker listener from the other brokers: for ``LAG_S`` s
        (``lagging-leader``: its followers lag but stay in the ISR), or until the metadata
        shows the ISR shrunk to the leader alone (``lone-leader``: polled every
        ``LONE_POLL_S`` s for at most ``LONE_WAIT_S`` s, then held ``LONE_HOLD_S`` s; the op
        blocks that long, about ``replica.lag.time.max.ms``). The network is healed after
        (every rule: a schedule runs one fault at a time). ok: ``kill``'s or
        ``lose-unfsynced``'s own value plus ``"isolated": [[name], [names]], "port": p`` and
        ``"lagged_s": s`` or ``"alone_after_s": s``; nothing done (``{"killed": []}``,
        ``{"lost": {}}``) when the partition has no live leader, and for a lone leader whose
        ISR did not shrink to it alone, with ``"alone_after_s": None`` and the ``"isr"`` last
        read (the fault's precondition failed, and the record says so), also when the run
        ended (``end()``) while it waited, with ``"run_ended": true``."""
        if not isinstance(self.cluster, Partitionable):
            raise NemesisError("this cluster backend cannot cut replication")
        none = {"killed": []} if f == "kill" else {"lost": {}}
        topic, p = value["topic"], value.get("partition", 0)
        leader = leader_of(self.cluster, topic, p)
        if (leader is None or leader.node_id in self.killed | self.paused
                or not self.cluster.is_running(leader)):
            return none
        peers = [n for n in self.cluster.nodes if n != leader and n.is_broker]
        cut = {"isolated": [[leader.name], [n.name for n in peers]], "port": leader.broker_port}
        self.cluster.drop(leader, peers, port=leader.broker_port)
        try:
            if value["target"] == LAGGING_LEADER:
                time.sleep(LAG_S)
                cut["lagged_s"] = LAG_S
            else:
                start, seen = time.monotonic(), []

                def alone_or_moved() -> bool:
                    state = partition_of(self.cluster, topic, p)
                    seen.append(None if state is None else list(state.isr))
                    # a leadership the controller moved is not this fault's case either
                    return state is not None and (state.leader != leader.node_id
                                                  or seen[-1] == [leader.node_id])
                try:
                    # up to a replica.lag.time.max.ms and more: a run that ends meanwhile
                    # would otherwise wait that long for a fault it no longer wants
                    wait_until(lambda: alone_or_moved() or self.ending.is_set(), LONE_WAIT_S,
                               LONE_POLL_S, f"the ISR of {topic}-{p} shrunk to its leader",
                               sleep=self.ending.wait)
                except WaitTimeout:
                    pass
                isr = seen[-1]
                if isr != [leader.node_id]:
                    ended = {"run_ended": True} if self.ending.is_set() else {}
                    return {**none, **cut, "alone_after_s": None, "isr": isr, **ended}
                cut["alone_after_s"] = round(time.monotonic() - start, 2)
                time.sleep(LONE_HOLD_S)  # writes it acknowledges alone
            if f == "kill":
                self.cluster.kill(leader)
                self.killed.add(leader.node_id)
                return {"killed": [leader.name], **cut}
            return {**self._lose([leader], topic), **cut}
        finally:
            self.cluster.heal_network()

    def _roll(self, value: dict) -> dict:
        nodes = self._targets({"target": "all", **value})
        waited = {}
        for n in nodes:
            self.cluster.stop(n)
            self.cluster.start(n)
            try:
                waited[n.name] = round(admin.wait_ready(
                    self.cluster.bootstrap_servers, len(self.cluster.brokers),
                    [value["topic"]] if value.get("topic") else [], timeout_s=60.0,
                    security=self.cluster.security), 2)
            except ClusterError as exc:
                raise NemesisError(f"rolling restart stopped at {n.name}: {exc}") from None
        return {"rolled": [n.name for n in nodes], "waited_s": waited}

    def _sole_in_sync(self, node: Node, topic: str | None) -> list[str]:
        """The partitions of ``topic`` whose ISR is ``node`` alone, as the metadata reports
        them just before the fault (the power loss then takes every in-sync copy)."""
        if not topic:
            return []
        try:
            client = admin.client(self.cluster.bootstrap_servers, 3.0, self.cluster.security)
            states = admin.partitions(client, topic, 3.0)
        except Exception:
            return []
        return [f"{topic}-{s.partition}" for s in states if list(s.isr) == [node.node_id]]

    def teardown(self) -> Any:
        return {"resume": self.invoke("resume", None), "start": self.invoke("start", None)}


class PartitionNemesis(Nemesis):
    """Network partitions with iptables rules on the nodes (this host, where the clients and
    the monitor run, stays connected to every node).

    fs: ``partition`` -> ``heal``. ``value["target"]``:
      - a list of node ids (a scenario's marks): those nodes lose every other node;
      - ``isolate-one``: one random node loses every other node;
      - ``halves``: nodes shuffled and split in two groups that cannot talk;
      - ``isolate-leader``: the leader of ``value["topic"]``-``value["partition"]`` loses every
        other node;
      - ``isolate-controller``: the active KRaft controller loses every other node;
      - ``bridge``: two halves that cannot talk, and one node that talks to both (Jepsen's
        ``bridge``);
      - ``majorities-ring``: nodes in a shuffled ring; each receives only from itself and the
        next ``n // 2`` nodes of the ring: every node hears a majority, no two the same one
        (Jepsen's ``majorities-ring``, made of one-way drops);
      - ``one-way``: what one random node sends to the others is dropped; what they send to it
        still arrives;
      - ``leader-replication``: only the broker listener (``Node.broker_port``) between the
        leader and the other brokers is cut, so the controller quorum still reaches everyone
        and the leader can shrink its ISR through the controller;
      - ``zombie-leader``: only the controller listener (``Node.controller_port``) between the
        leader and the controllers is cut: the quorum fences it and elects another leader,
        while clients (and followers, until they learn of the new leader) still reach it;
      - ``clients-leader``, ``clients-one``: the broker listener of the leader (or of one
        random broker) is cut from the clients' machine (``Partitionable.client_host``: this
        one, where the workload, the monitor and the final reads run); brokers still reach each
        other, so the leader stays leader with its ISR whole while clients cannot reach it.
    The ``ok`` value: ``{"isolated": [[names], [names]], "port": int}`` (``port`` only for
    port cuts); ``bridge`` adds ``"bridge": name``; ``one-way`` is ``{"dropped": [[from],
    [to, ...]]}``, ``majorities-ring`` ``{"hears": {name: [names]}}`` (one-way drops), and
    the client cuts ``{"isolated": [["clients"], [name]], "port": int, "clients": address}``.

    ``loss`` (-> ``heal``) makes the same shapes lossy instead of cut: each packet those
    rules match is dropped with probability ``value["loss"]`` (``LOSS``: 0.3 by default;
    iptables' ``statistic`` match, ``netfaults.drop_rules``); its ``ok`` value is the
    partition's plus ``"loss": p``. Unlike the proxy's faults it reaches every link of the
    shape, replication and controller links included.
    """

    fs = frozenset({"partition", "loss", "heal"})
    name = "partition"
    #: The packet loss probability of ``loss`` when ``value`` gives none.
    LOSS = 0.3

    def invoke(self, f: str, value: Any) -> Any:
        if not isinstance(self.cluster, Partitionable):
            raise NemesisError("this cluster backend cannot partition the network")
        if f == "heal":
            self.cluster.heal_network()
            return {"healed": True}
        value = value or {}
        if f == "partition":
            return self._shape(value, None)
        p = float(value.get("loss", self.LOSS))
        if not 0 < p < 1:
            raise NemesisError(f"loss must be a probability between 0 and 1, not {p}")
        return {**self._shape(value, p), "loss": p}

    def _shape(self, value: dict, loss: float | None) -> dict:
        """Cut (``loss`` None) or make lossy the links of ``value["target"]``'s shape."""
        cluster = self.cluster

        def cut(node: Node, peers: list[Node], **how: Any) -> None:
            cluster.drop(node, peers, loss=loss, **how)

        nodes = list(cluster.nodes)
        target = value.get("target", "isolate-one")
        if isinstance(target, list):  # a scenario's marks: those nodes cut from the others
            groups = [[n for n in nodes if n.node_id in target],
                      [n for n in nodes if n.node_id not in target]]
            if not groups[0] or not groups[1]:
                raise NemesisError(f"partition target {target}: no nodes to cut off")
            for a, b in (groups, groups[::-1]):
                for n in a:
                    cut(n, b)
            return {"isolated": [[n.name for n in g] for g in groups]}
        if target in ("leader-replication", "zombie-leader", "isolate-leader", "clients-leader"):
            lone = leader_of(cluster, value["topic"], value.get("partition", 0))
            if lone is None:
                raise NemesisError("the partition has no leader to cut off")
        elif target == "isolate-controller":
            lone = active_controller(cluster)
            if lone is None:
                raise NemesisError("no active controller to cut off")
        elif target == "clients-one":
            lone = self.rng.choice(cluster.brokers)
        else:
            lone = self.rng.choice(nodes)
        if target in ("clients-leader", "clients-one"):
            host = cluster.client_host()
            cut(lone, [Node(0, "clients", host, ())], port=lone.broker_port)
            return {"isolated": [["clients"], [lone.name]], "port": lone.broker_port,
                    "clients": host}
        if target in ("leader-replication", "zombie-leader"):
            port_of = "broker_port" if target == "leader-replication" else "controller_port"
            peers = [n for n in nodes if n != lone
                     and (n.is_broker if target == "leader-replication" else n.is_controller)]
            port = getattr(lone, port_of)
            cut(lone, peers, port=port)
            return {"isolated": [[lone.name], [n.name for n in peers]], "port": port}
        if target == "one-way":
            others = [n for n in nodes if n != lone]
            for n in others:
                cut(n, [lone], inbound_only=True)
            return {"dropped": [[lone.name], [n.name for n in others]]}
        if target == "majorities-ring":
            self.rng.shuffle(nodes)
            hears = {}
            for i, n in enumerate(nodes):
                window = [nodes[(i + k) % len(nodes)] for k in range(len(nodes) // 2 + 1)]
                deaf = [p for p in nodes if p not in window]
                if deaf:
                    cut(n, deaf, inbound_only=True)
                hears[n.name] = sorted(p.name for p in window)
            return {"hears": hears}
        extra = {}
        if target in ("isolate-one", "isolate-leader", "isolate-controller"):
            groups = [[lone], [n for n in nodes if n != lone]]
        elif target in ("halves", "bridge"):
            self.rng.shuffle(nodes)
            if target == "bridge":
                extra["bridge"] = nodes.pop().name  # it keeps every link
            half = len(nodes) // 2
            groups = [nodes[:half], nodes[half:]]
        else:
            raise NemesisError(f"unknown partition target {target!r}; choose from "
                               f"{', '.join(PARTITION_TARGETS)}")
        for a in groups[0]:
            cut(a, groups[1])
        for b in groups[1]:
            cut(b, groups[0])
        return {"isolated": [[n.name for n in g] for g in groups], **extra}

    def teardown(self) -> Any:
        return self.invoke("heal", None)


#: Seconds an unclean-on/off may take: measured on the docker backend, brokers forwarded config
#: changes to the controller again only ~25 s after the active controller's container was killed
#: (its address stays silent instead of refusing connections).
ALTER_TIMEOUT_S = 30.0


class UncleanElectionNemesis(Nemesis):
    """Toggles ``unclean.leader.election.enable`` at runtime and forces elections.

    fs: ``unclean-on``, ``unclean-off`` (KIP-339 IncrementalAlterConfigs) with ``value``
    ``{"target": "topic" | "cluster"}``: the topic's own config, or the cluster-wide dynamic
    broker default (which a topic override still overrides); ``elect-unclean`` (KIP-460
    ElectLeaders with type UNCLEAN on every partition that has no leader). KRaft controllers
    re-check leaderless partitions every ``unclean.leader.election.interval.ms`` once allowed;
    the forced election does not wait for that. A toggle completes ``ok`` only when the value
    a broker then reports (DescribeConfigs of the topic, or of a live broker for the cluster)
    is the one asked for, recorded as ``read_back``; a lost reply to a change that was applied
    still counts. ``teardown`` restores ``restore_value`` at every scope toggled.
    """

    fs = frozenset({"unclean-on", "unclean-off", "elect-unclean"})
    name = "unclean"
    KEY = "unclean.leader.election.enable"

    def __init__(self, cluster, rng, topic: str, restore_value: bool) -> None:
        super().__init__(cluster, rng)
        self.topic = topic
        self.restore_value = restore_value
        self.toggled: set[str] = set()

    def _live(self) -> list[Node]:
        # only live brokers: a killed container's or host's address does not refuse, it stays
        # silent, and a request routed there times out (seen on the docker backend)
        return [n for n in self.cluster.brokers if self.cluster.is_running(n)]

    def _admin(self, timeout_s: float = 5.0):
        live = ",".join(n.client_endpoint for n in self._live())
        return admin.client(live or self.cluster.bootstrap_servers, timeout_s,
                            self.cluster.security)

    def _set_and_read_back(self, scope: str, want: str) -> str:
        """Set the config at ``scope`` to ``want`` and return the value a broker then reports;
        retried for up to ``ALTER_TIMEOUT_S`` s, then the last error is raised."""
        errors: list[Exception] = []

        def attempt() -> str | None:
            # SET is idempotent, so retrying is safe; a change may also be applied while its
            # reply is lost (the active controller died): the value the brokers report
            # decides. A fresh client each time: it looks for the controller anew.
            a = self._admin(10.0)
            try:
                if scope == "cluster":
                    live = self._live() or self.cluster.brokers
                    wire.set_cluster_default(live[0].client_endpoint, {self.KEY: want},
                                             security=self.cluster.security)
                else:
                    admin.set_topic_config(a, self.topic, {self.KEY: want}, timeout_s=10.0)
            except (ClusterError, wire.WireError) as exc:
                errors.append(exc)
            try:
                live = self._live()
                effective = (admin.broker_config(a, live[0].node_id, self.KEY, timeout_s=5.0)
                             if scope == "cluster" and live else
                             admin.topic_config(a, self.topic, self.KEY, timeout_s=5.0))
                if effective == want:
                    return effective
                errors.append(ClusterError(f"{self.KEY} ({scope}) reads back {effective}"))
            except ClusterError as exc:
                errors.append(exc)
            return None

        try:
            return wait_until(attempt, ALTER_TIMEOUT_S, 1.0, f"{self.KEY} ({scope}) {want}")
        except WaitTimeout:
            raise errors[-1] from None

    def invoke(self, f: str, value: Any) -> Any:
        if f in ("unclean-on", "unclean-off"):
            scope = (value or {}).get("target") or "topic"
            if scope not in ("topic", "cluster"):
                raise NemesisError(f"unknown target {scope!r} of {f}: choose topic or cluster")
            want = str(f == "unclean-on").lower()
            self.toggled.add(scope)
            effective = self._set_and_read_back(scope, want)
            return {"target": scope, "topic": self.topic, self.KEY: want == "true",
                    "read_back": effective}
        a = self._admin()
        offline = [s.partition for s in admin.partitions(a, self.topic) if s.leader < 0]
        if not offline:
            return {"elected": {}, "offline": []}
        return {"offline": offline, "elected": {str(p): err or "OK" for p, err in
                                                admin.elect_unclean(a, self.topic, offline).items()}}

    def teardown(self) -> Any:
        f = "unclean-on" if self.restore_value else "unclean-off"
        return {scope: self.invoke(f, {"target": scope}) for scope in sorted(self.toggled)} or None
