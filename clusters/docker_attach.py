"""The ``docker-attach`` backend: the containers of a running Docker cluster the tool did not
create (a Compose project, found by its ``com.docker.compose.project`` label, or containers
named one by one), faulted in place.

Which container is which broker comes from the cluster itself: each broker of a Metadata
answer is the container whose address, name, host name or network alias is the broker's
advertised host. Kill, stop and pause go through dockerd, and ``start``/``resume`` bring the
same containers back; partitions are iptables rules in chains of the tool's own inside each
container's network namespace (``netfaults.OwnChainIptables``, entered from the host with
``nsenter``). Nothing is created, formatted, uploaded or removed; a fault that would leave no
broker running is refused.
"""

from __future__ import annotations

import socket
from pathlib import Path

from kafka_chaos.clusters import external
from kafka_chaos.clusters.base import Cluster, Node
from kafka_chaos.clusters.docker_backend import ContainerControl, _client
from kafka_chaos.clusters.errors import ClusterError, EnvironmentUnsupported
from kafka_chaos.clusters.netfaults import OwnChainIptables
from kafka_chaos.clusters.security import ClientSecurity

PROJECT_LABEL = "com.docker.compose.project"


def containers(project: str | None, names: list[str]) -> list:
    """The containers of Compose project ``project``, or those named ``names``. Raises
    ``EnvironmentUnsupported`` when none (or a named one) is there."""
    import docker.errors

    client = _client()
    if project:
        found = client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={project}"})
        if not found:
            raise EnvironmentUnsupported(f"--compose-project {project}: no container has the "
                                         f"label {PROJECT_LABEL}={project}")
        return sorted(found, key=lambda c: c.name)
    out = []
    for name in names:
        try:
            out.append(client.containers.get(name))
        except docker.errors.NotFound:
            raise EnvironmentUnsupported(f"--containers: no container {name}") from None
    return out


def _names(container) -> dict[str, str]:
    """Every name and address the container answers to -> the network it has it on
    (``""`` for names that are not per network)."""
    out = {container.name: "", container.attrs["Config"].get("Hostname", ""): ""}
    for net, settings in (container.attrs["NetworkSettings"].get("Networks") or {}).items():
        for alias in [settings.get("IPAddress"), *(settings.get("Aliases") or [])]:
            if alias:
                out[alias] = net
    return out


def match(brokers: list[Node], found: list) -> dict[int, object]:
    """``{node id: container}``: each broker's advertised host (or the address it resolves
    to) among a container's names (``_names``). Raises ``ClusterError`` naming a broker no
    container answers to: the run cannot fault what it cannot find."""
    out = {}
    for node in brokers:
        try:
            address = socket.gethostbyname(node.host)
        except OSError:
            address = node.host
        hits = [c for c in found if {node.host, address} & set(_names(c))]
        if len(hits) != 1:
            raise ClusterError(f"broker {node.node_id} at {node.client_endpoint} is "
                               f"{'no' if not hits else 'more than one'} container of "
                               f"{', '.join(c.name for c in found)}")
        out[node.node_id] = hits[0]
    return out


class AttachedDockerCluster(ContainerControl, Cluster, OwnChainIptables):
    """The brokers of a running cluster, in containers the tool found (``containers``).

    Args:
        bootstrap, security: how the tool's clients reach the brokers.
        work_dir: the run's node directories (each container's output is saved there).
        project: a Compose project; or ``names``: the containers.
    """

    owned = False
    #: refuse a fault that would leave no broker serving (``external.spare_last_broker``)
    spare_last_broker = True

    def __init__(self, bootstrap: str, security: ClientSecurity | None, work_dir: Path,
                 project: str | None = None, names: list[str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.work_dir = Path(work_dir)
        self.project = project
        self.names = list(names or [])
        self.nodes: list[Node] = []
        self._ids: dict[int, str] = {}
        self._gateway = ""
        self._docker = None

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def setup(self) -> None:
        """Check the way in (``external.preflight``), learn the brokers and find each one's
        container. Raises ``Refused``, ``ClusterError``, ``EnvironmentUnsupported``."""
        external.preflight(self.bootstrap, self.security)
        self.nodes = external.discover(self.bootstrap, self.security)
        found = match(self.nodes, containers(self.project, self.names))
        self._ids = {node_id: c.id for node_id, c in found.items()}
        first = next(iter(found.values()))
        networks = first.attrs["NetworkSettings"].get("Networks") or {}
        self._gateway = next((n.get("Gateway") for n in networks.values() if n.get("Gateway")),
                             "")

    def teardown(self) -> None:
        """Save each container's output; remove nothing."""
        for node in self.nodes:
            self._save_output(node)

    def _container(self, node: Node):
        import docker.errors

        if self._docker is None:
            self._docker = _client()
        try:
            return self._docker.containers.get(self._ids[node.node_id])
        except (KeyError, docker.errors.NotFound):
            return None

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        external.spare_last_broker(self, node, "stop")
        super().stop(node, timeout_s)

    def kill(self, node: Node) -> None:
        external.spare_last_broker(self, node, "kill")
        super().kill(node)

    def pause(self, node: Node) -> None:
        external.spare_last_broker(self, node, "pause")
        super().pause(node)

    def client_host(self) -> str:
        """The gateway of the brokers' network: where this host's clients come from."""
        return self._gateway

    def _save_output(self, node: Node) -> Path | None:
        c = self._container(node)
        if c is None:
            return None
        path = self.work_dir / node.name / "server.out"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(c.logs())
        return path

    def log_files(self, node: Node) -> list[Path]:
        """The container's output (``docker logs``), saved under the run directory."""
        path = self._save_output(node)
        return [path] if path else []


def undo(project: str | None, names: list[str]) -> list[str]:
    """What ``cluster down`` does to attached containers: removes the tool's iptables chains
    and thaws paused containers (the tool's pause faults), nothing else; returns what it
    did. Never raises."""
    try:
        found = containers(project, names)
    except (ClusterError, OSError) as exc:
        return [f"NOT cleaned: {exc}"]
    done = []
    for c in found:
        if c.status == "paused":
            c.unpause()
            c.reload()
            done.append(f"the pause of container {c.name}")
        probe = _Probe(c)
        if c.status == "running" and probe.rules_left():
            probe.heal_network()
            done.append(f"the tool's iptables chains in container {c.name}")
    return done


class _Probe(ContainerControl, OwnChainIptables):
    """One container, for ``undo``: its namespace's chains of ours."""

    def __init__(self, container) -> None:
        self.c = container
        self.nodes = [Node(0, container.name, "", ("broker",))]

    def _container(self, node: Node):
        return self.c

    def client_host(self) -> str:
        return ""  # never cut: undo only removes chains
