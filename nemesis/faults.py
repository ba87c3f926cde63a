"""Process and network faults: ``kill``/``start``, ``pause``/``resume``, ``partition``/``heal``.

Targets are data, as in Jepsen's ``nemesis/combined``: ``{"target": "one"|"leader"|"minority"|
"all"}`` for processes; ``{"target": "isolate-one"|"halves"|"leader-replication"}`` for the network.
"""

from __future__ import annotations

import time
from typing import Any

from clusters import admin
from clusters.base import Killable, Node, Partitionable, Pausable
from clusters.errors import ClusterError
from nemesis.base import Nemesis, NemesisError


def leader_of(cluster, topic: str, partition: int) -> Node | None:
    """The broker currently leading ``topic``-``partition``, or None if unknown/offline."""
    try:
        states = admin.partitions(admin.client(cluster.bootstrap_servers, 3.0), topic, 3.0)
    except Exception:
        return None
    for s in states:
        if s.partition == partition and s.leader >= 0:
            return cluster.node(s.leader)
    return None


class ProcessNemesis(Nemesis):
    """SIGKILL / SIGSTOP broker processes and bring them back.

    fs: ``kill`` -> ``start``; ``pause`` -> ``resume``. ``value`` is ``{"target": "one"|"leader"|
    "minority"|"all", "topic": str, "partition": int}`` ("leader" needs topic and partition).
    Raises ``NemesisError`` when the cluster lacks the ability.
    """

    fs = frozenset({"kill", "start", "pause", "resume"})

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        self.killed: set[int] = set()
        self.paused: set[int] = set()

    def _targets(self, value: dict) -> list[Node]:
        live = [n for n in self.cluster.nodes
                if n.node_id not in self.killed | self.paused and self.cluster.is_running(n)]
        target = (value or {}).get("target", "one")
        if target == "leader":
            node = leader_of(self.cluster, value["topic"], value.get("partition", 0))
            return [node] if node is not None and node in live else []
        if not live:
            return []
        if target == "one":
            return [self.rng.choice(live)]
        if target == "minority":
            return self.rng.sample(live, max(1, (len(self.cluster.nodes) - 1) // 2))
        if target == "all":
            return live
        raise NemesisError(f"unknown target {target!r}")

    def invoke(self, f: str, value: Any) -> Any:
        if f in ("kill", "start") and not isinstance(self.cluster, Killable):
            raise NemesisError("this cluster backend cannot kill nodes")
        if f in ("pause", "resume") and not isinstance(self.cluster, Pausable):
            raise NemesisError("this cluster backend cannot pause nodes")
        if f == "kill":
            nodes = self._targets(value)
            for n in nodes:
                self.cluster.kill(n)
                self.killed.add(n.node_id)
            return {"killed": [n.name for n in nodes]}
        if f == "pause":
            nodes = self._targets(value)
            for n in nodes:
                self.cluster.pause(n)
                self.paused.add(n.node_id)
            return {"paused": [n.name for n in nodes]}
        if f == "resume":
            nodes = [self.cluster.node(i) for i in sorted(self.paused)]
            for n in nodes:
                self.cluster.resume(n)
            self.paused.clear()
            return {"resumed": [n.name for n in nodes]}
        # start: bring back every killed node (and any node found dead)
        nodes = [n for n in self.cluster.nodes if not self.cluster.is_running(n)]
        for n in nodes:
            self.cluster.start(n)
        self.killed.clear()
        return {"started": [n.name for n in nodes]}

    def teardown(self) -> Any:
        return {"resume": self.invoke("resume", None), "start": self.invoke("start", None)}


class PartitionNemesis(Nemesis):
    """Network partitions with iptables rules on the nodes (the host/clients stay connected).

    fs: ``partition`` -> ``heal``. ``value["target"]``:
      - ``isolate-one``: one random node loses every other node;
      - ``halves``: nodes shuffled and split in two groups that cannot talk;
      - ``leader-replication``: only the broker listener (``Node.broker_port``) between the leader of
        ``value["topic"]``-``value["partition"]`` and the other brokers is cut, so the controller
        quorum still reaches everyone and the leader can shrink its ISR through the controller.
    """

    fs = frozenset({"partition", "heal"})

    def invoke(self, f: str, value: Any) -> Any:
        if not isinstance(self.cluster, Partitionable):
            raise NemesisError("this cluster backend cannot partition the network")
        if f == "heal":
            self.cluster.heal_network()
            return {"healed": True}
        nodes = list(self.cluster.nodes)
        target = (value or {}).get("target", "isolate-one")
        if target == "leader-replication":
            leader = leader_of(self.cluster, value["topic"], value.get("partition", 0))
            if leader is None:
                raise NemesisError("partition has no leader to isolate")
            others = [n for n in self.cluster.brokers if n != leader]
            self.cluster.drop(leader, others, port=leader.broker_port)
            return {"isolated": [[leader.name], [n.name for n in others]],
                    "port": leader.broker_port}
        if target == "isolate-one":
            lone = self.rng.choice(nodes)
            groups = [[lone], [n for n in nodes if n != lone]]
        elif target == "halves":
            self.rng.shuffle(nodes)
            half = len(nodes) // 2
            groups = [nodes[:half], nodes[half:]]
        else:
            raise NemesisError(f"unknown partition target {target!r}")
        for a in groups[0]:
            self.cluster.drop(a, groups[1])
        for b in groups[1]:
            self.cluster.drop(b, groups[0])
        return {"isolated": [[n.name for n in g] for g in groups]}

    def teardown(self) -> Any:
        return self.invoke("heal", None)


#: Seconds an unclean-on/off may take: measured on the docker backend, brokers forwarded config
#: changes to the controller again only ~25 s after the active controller's container was killed
#: (its address stays silent instead of refusing connections).
ALTER_TIMEOUT_S = 30.0


class UncleanElectionNemesis(Nemesis):
    """Toggles ``unclean.leader.election.enable`` on a topic at runtime and forces elections.

    fs: ``unclean-on``, ``unclean-off`` (dynamic topic config, KIP-339 IncrementalAlterConfigs),
    ``elect-unclean`` (KIP-460 ElectLeaders with type UNCLEAN on every partition that has no
    leader). KRaft controllers only re-check offline partitions for unclean election every
    ``unclean.leader.election.interval.ms``, hence the explicit election. ``value`` is
    ``{"topic": str}``. A toggle completes ``ok`` only when the value the brokers report
    (DescribeConfigs) is the one asked for, recorded as ``read_back``; a lost reply to a change
    that was applied still counts. ``teardown`` restores ``restore_value``.
    """

    fs = frozenset({"unclean-on", "unclean-off", "elect-unclean"})

    def __init__(self, cluster, rng, topic: str, restore_value: bool) -> None:
        super().__init__(cluster, rng)
        self.topic = topic
        self.restore_value = restore_value
        self.toggled = False

    def _admin(self, timeout_s: float = 5.0):
        # only live brokers: a killed container's or host's address does not refuse, it stays
        # silent, and a request routed there times out (seen on the docker backend)
        live = [n.client_endpoint for n in self.cluster.brokers if self.cluster.is_running(n)]
        return admin.client(",".join(live) or self.cluster.bootstrap_servers, timeout_s)

    def _set_and_read_back(self, key: str, want: str) -> str:
        """Set topic config ``key`` to ``want`` and return the value brokers then report;
        retried for up to ``ALTER_TIMEOUT_S`` s, then the last error is raised."""
        deadline = time.monotonic() + ALTER_TIMEOUT_S
        while True:
            # SET is idempotent, so retrying is safe; a change may also be applied while its
            # reply is lost (the active controller died): the value the brokers report
            # decides. A fresh client each time: it looks for the controller anew.
            a = self._admin(10.0)
            try:
                admin.set_topic_config(a, self.topic, {key: want}, timeout_s=10.0)
            except ClusterError as exc:
                error = exc
            try:
                effective = admin.topic_config(a, self.topic, key, timeout_s=5.0)
                if effective == want:
                    return effective
                error = ClusterError(f"{key} of {self.topic} reads back {effective}")
            except ClusterError as exc:
                error = exc
            if time.monotonic() > deadline:
                raise error
            time.sleep(1.0)

    def invoke(self, f: str, value: Any) -> Any:
        if f in ("unclean-on", "unclean-off"):
            key, want = "unclean.leader.election.enable", str(f == "unclean-on").lower()
            self.toggled = True
            effective = self._set_and_read_back(key, want)
            return {"topic": self.topic, key: want == "true", "read_back": effective}
        a = self._admin()
        offline = [s.partition for s in admin.partitions(a, self.topic) if s.leader < 0]
        if not offline:
            return {"elected": {}, "offline": []}
        return {"offline": offline, "elected": {str(p): err or "OK" for p, err in
                                                admin.elect_unclean(a, self.topic, offline).items()}}

    def teardown(self) -> Any:
        if not self.toggled:
            return None
        return self.invoke("unclean-on" if self.restore_value else "unclean-off", None)
