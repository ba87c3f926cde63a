"""Partitions for backends whose every node has a network namespace of its own (a Linux
namespace of the local backend, a container's namespace): iptables rules in that namespace's
INPUT and OUTPUT chains, run through ``Cluster.exec``. Nothing else lives in those chains, so
healing flushes them."""

from __future__ import annotations

from kafka_chaos.clusters.base import Node, Partitionable
from kafka_chaos.clusters.errors import CommandFailed


def drop_rules(peer: Node, port: int | None, inbound_only: bool = False) -> list[list[str]]:
    """The ``iptables -A`` argv tails that cut ``peer`` off (both directions, or only what
    arrives from it), or only TCP to and from ``port`` on either side."""
    chains = (("INPUT", "-s"),) if inbound_only else (("INPUT", "-s"), ("OUTPUT", "-d"))
    if port is None:
        return [[chain, side, peer.host, "-j", "DROP"] for chain, side in chains]
    return [[chain, side, peer.host, "-p", "tcp", f"--{p}", str(port), "-j", "DROP"]
            for chain, side in chains for p in ("dport", "sport")]


class NamespaceIptables(Partitionable):
    """``Partitionable`` for a ``Cluster`` whose ``exec`` runs in the node's own namespace."""

    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False) -> None:
        for peer in peers:
            for rule in drop_rules(peer, port, inbound_only):
                res = self.exec(node, ["iptables", "-A", *rule])
                if res.exit != 0:
                    raise CommandFailed(f"iptables on {node.name} failed: {res.err.strip()}", res)

    def heal_network(self) -> None:
        # a node that is down has no rules to remove (a container's namespace went with it)
        for node in self.nodes:
            self.exec(node, ["iptables", "-F", "INPUT"])
            self.exec(node, ["iptables", "-F", "OUTPUT"])

    def rules_left(self) -> list[str]:
        left = []
        for node in self.nodes:
            if not self.is_running(node):
                continue
            for chain in ("INPUT", "OUTPUT"):
                res = self.exec(node, ["iptables", "-S", chain])
                left += [f"{node.name}: {line}" for line in res.out.splitlines()
                         if line.startswith("-A ")]
        return left
