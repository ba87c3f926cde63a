"""Partitions by iptables. The rules that cut a peer off (``drop_rules``); for namespaces of
the tool's own (the local backend's, its containers'), rules straight in INPUT and OUTPUT,
run through ``Cluster.exec`` and flushed by the heal, since nothing else lives there
(``NamespaceIptables``); for namespaces and hosts that are not the tool's (attached
containers, ssh hosts), rules in chains of its own that the heal removes
(``OwnChainIptables``, ``chains_script``)."""

from __future__ import annotations

import shlex

from kafka_chaos.clusters.base import Node, Partitionable
from kafka_chaos.clusters.errors import CommandFailed


def own_chains(prefix: str = "kc") -> dict[str, str]:
    """Built-in chain -> the tool's own chain jumped to from it (``kc-chaos-in``,
    ``kc-chaos-out``): where partitions go on namespaces and hosts the tool did not make."""
    return {"INPUT": f"{prefix}-chaos-in", "OUTPUT": f"{prefix}-chaos-out"}


def chains_script(prefix: str, action: str) -> str:
    """A ``sh`` script for the tool's chains (``own_chains``) and the jumps to them on a host:
    ``"reset"`` makes them, emptied; ``"ensure"`` makes what is missing and keeps the rules
    in place; ``"delete"`` removes jumps and chains and echoes each chain it deleted."""
    q = shlex.quote
    parts = []
    for builtin, chain in own_chains(prefix).items():
        jump = f"{builtin} -j {q(chain)}"
        make = (f"{{ iptables -N {q(chain)} 2>/dev/null || iptables -F {q(chain)}; }}"
                if action == "reset" else
                f"{{ iptables -S {q(chain)} >/dev/null 2>&1 || iptables -N {q(chain)}; }}")
        if action == "delete":
            parts.append(f"while iptables -D {jump} 2>/dev/null; do :; done; "
                         f"iptables -F {q(chain)} 2>/dev/null; iptables -X {q(chain)} "
                         f"2>/dev/null && echo {q('iptables chain ' + chain)}")
        else:
            parts.append(f"{make} && {{ iptables -C {jump} 2>/dev/null || iptables -I {jump}; }}")
    return ("; " if action == "delete" else " && ").join(parts)


def drop_rules(peer: Node, port: int | None, inbound_only: bool = False,
               loss: float | None = None) -> list[list[str]]:
    """The ``iptables -A`` argv tails that cut ``peer`` off (both directions, or only what
    arrives from it), or only TCP to and from ``port`` on either side. With ``loss`` (a
    probability in (0, 1)), each packet is dropped with that probability instead of every
    one: iptables' ``statistic`` match in ``random`` mode, drawn per packet by the kernel
    (``iptables-extensions(8)``); the packet loss ``tc netem`` would give, where netem is
    not available.

    Raises ``ValueError`` for a ``loss`` outside (0, 1)."""
    chains = (("INPUT", "-s"),) if inbound_only else (("INPUT", "-s"), ("OUTPUT", "-d"))
    drop = ["-j", "DROP"]
    if loss is not None:
        if not 0 < loss < 1:
            raise ValueError(f"loss must be a probability between 0 and 1, not {loss!r}")
        drop = ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.6f}", *drop]
    if port is None:
        return [[chain, side, peer.host, *drop] for chain, side in chains]
    return [[chain, side, peer.host, "-p", "tcp", f"--{p}", str(port), *drop]
            for chain, side in chains for p in ("dport", "sport")]


class NamespaceIptables(Partitionable):
    """``Partitionable`` for a ``Cluster`` whose ``exec`` runs in the node's own namespace."""

    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False, loss: float | None = None) -> None:
        for peer in peers:
            for rule in drop_rules(peer, port, inbound_only, loss):
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


class OwnChainIptables(NamespaceIptables):
    """``Partitionable`` for namespaces that are not the tool's (an attached container's):
    every rule goes into chains of ours (``own_chains``), jumped to from the top of
    ``INPUT``/``OUTPUT``; healing removes the jumps and the chains and nothing else, so
    rules the owner keeps in those namespaces stay as they were."""

    CHAINS = own_chains()

    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False, loss: float | None = None) -> None:
        for builtin, chain in self.CHAINS.items():
            self.exec(node, ["iptables", "-N", chain])  # fails harmlessly when it exists
            if self.exec(node, ["iptables", "-C", builtin, "-j", chain]).exit != 0:
                self._must(node, ["iptables", "-I", builtin, "1", "-j", chain])
        for peer in peers:
            for builtin, *rule in drop_rules(peer, port, inbound_only, loss):
                self._must(node, ["iptables", "-A", self.CHAINS[builtin], *rule])

    def _must(self, node: Node, argv: list[str]) -> None:
        res = self.exec(node, argv)
        if res.exit != 0:
            raise CommandFailed(f"iptables on {node.name} failed: {res.err.strip()}", res)

    def heal_network(self) -> None:
        for node in self.nodes:
            if not self.is_running(node):
                continue  # a stopped container's namespace went with it
            for builtin, chain in self.CHAINS.items():
                while self.exec(node, ["iptables", "-D", builtin, "-j", chain]).exit == 0:
                    pass
                self.exec(node, ["iptables", "-F", chain])
                self.exec(node, ["iptables", "-X", chain])

    def rules_left(self) -> list[str]:
        left = []
        for node in self.nodes:
            if not self.is_running(node):
                continue
            for builtin, chain in self.CHAINS.items():
                res = self.exec(node, ["iptables", "-S", builtin])
                left += [f"{node.name}: {line}" for line in res.out.splitlines()
                         if line.endswith(f"-j {chain}")]
                res = self.exec(node, ["iptables", "-S", chain])
                left += [f"{node.name}: {line}" for line in res.out.splitlines()
                         if line.startswith("-A ")]
        return left
