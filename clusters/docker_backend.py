"""The Docker backend: one container per node on a user-defined network of its own (docker SDK).

Every container and the network carry the label ``kafka-chaos.prefix=<prefix>``, so
``cluster down`` finds what a crashed run left without any state file. Each node's directory
(``server.properties``, logging config, ``data/``, ``logs/``) is a bind mount at ``/kafka``, so
data and logs stay in the run directory. Partitions are iptables rules in the container's
network namespace, entered from the host (``nsenter -t <pid> -n``): images need neither
iptables nor ``NET_ADMIN``. Clients on the host reach the containers' addresses directly.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from kafka_chaos.clusters import netns
from kafka_chaos.clusters.base import (Cluster, DynamicQuorum, ExecResult, Killable, Node,
                                       NodeFiles, Pausable)
from kafka_chaos.clusters.dist import KafkaDist
from kafka_chaos.clusters.errors import ClusterError, CommandFailed, EnvironmentUnsupported
from kafka_chaos.clusters.kafka_config import (LOG4J1, LOG4J2, quorum_format_args,
                                               server_properties)
from kafka_chaos.clusters.netfaults import NamespaceIptables

DEFAULT_PREFIX = "kc"
LABEL = "kafka-chaos.prefix"
SUBNET = "10.78.0"


def _client():
    try:
        import docker
    except ImportError:
        raise EnvironmentUnsupported("the docker backend needs the docker package: "
                                     "pip install docker") from None
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise EnvironmentUnsupported(f"no Docker daemon answers ({exc}): start dockerd") from None
    return client


def check_environment() -> None:
    """Raise ``EnvironmentUnsupported`` unless a Docker daemon answers and we are root with
    ``nsenter`` and ``iptables`` (partitions are made from the host)."""
    netns.require_root("docker", "iptables in the containers' network namespaces",
                       {"nsenter": "util-linux", "iptables": "iptables"})
    _client()


def check_image(image: str) -> None:
    """Raise ``EnvironmentUnsupported`` (naming the ways to get one) unless ``image`` is here."""
    import docker.errors

    try:
        _client().images.get(image)
    except docker.errors.ImageNotFound:
        raise EnvironmentUnsupported(
            f"image {image} is not here: `docker pull {image}`, or build one without a "
            "registry with `kafka-chaos cluster image`, pass it as --image") from None


class ContainerControl(Killable, Pausable):
    """Start, stop, kill, pause and enter the container of a node (docker SDK; ``nsenter``
    into its network namespace), for any class whose ``_container(node)`` finds that
    container (None: gone). Listed before ``Cluster`` among a class's bases, so that these
    methods, not its abstract ones, are found first."""

    def _container(self, node: Node):
        raise NotImplementedError

    def start(self, node: Node) -> None:
        c = self._container(node)
        if c is not None and not self.is_running(node):
            c.start()

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        c = self._container(node)
        if c is not None and self.is_running(node):
            self._thaw(c)
            c.stop(timeout=int(timeout_s))  # SIGTERM, SIGKILL after the timeout

    def kill(self, node: Node) -> None:
        c = self._container(node)
        if c is not None and self.is_running(node):
            self._thaw(c)
            c.kill()
            c.wait()

    @staticmethod
    def _thaw(container) -> None:
        # dockerd refuses to signal a frozen container (409), as pause + kill nemeses may meet
        if container.status == "paused":
            container.unpause()

    def pause(self, node: Node) -> None:
        import docker.errors

        c = self._container(node)
        if c is not None and self.is_running(node):
            try:
                c.pause()  # the cgroup freezer: dockerd answers once the cgroup is frozen
            except docker.errors.APIError as exc:
                raise ClusterError(f"pausing {node.name}: {exc}") from None
            if not self.is_paused(node):
                raise ClusterError(f"pausing {node.name}: dockerd answered, but the container "
                                   "is not paused")

    def resume(self, node: Node) -> None:
        c = self._container(node)
        if c is not None:
            self._thaw(c)

    def is_paused(self, node: Node) -> bool:
        c = self._container(node)
        return c is not None and c.status == "paused"

    def is_running(self, node: Node) -> bool:
        c = self._container(node)
        return c is not None and c.status in ("running", "paused")

    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        """Run host command ``argv`` in the node's network namespace (as ``ip netns exec``
        does for the local backend), so any image works: none needs iptables or
        ``NET_ADMIN``."""
        c = self._container(node)
        pid = c.attrs["State"]["Pid"] if c is not None else 0
        if not pid:
            return ExecResult(1, "", f"{node.name} is not running")
        proc = subprocess.run(["nsenter", "-t", str(pid), "-n", *argv], capture_output=True,
                              text=True, timeout=timeout_s)
        return ExecResult(proc.returncode, proc.stdout, proc.stderr)


#: The JVM properties of every Java the containers run: logs and log4j configs in ``/kafka``.
_PROPS = ("-Dkafka.logs.dir=/kafka/logs -Dlog4j2.configurationFile=/kafka/log4j2.properties "
          "-Dlog4j.configuration=file:/kafka/log4j.properties")


class DockerCluster(ContainerControl, Cluster, NamespaceIptables, NodeFiles, DynamicQuorum):
    """N brokers (KRaft), optionally C dedicated controllers, one container each.

    Args:
        dist: the Kafka version to run (the image must hold the same jars).
        work_dir: node directories, mounted at ``/kafka`` in the containers.
        brokers, controllers, broker_config: as for ``LocalCluster``.
        image: an image with ``java`` 17+ and ``sh`` on PATH and the jars in
            ``/opt/kafka/libs``; default ``apache/kafka:<version>``.
        prefix: container names ``<prefix>-n1``…, network ``<prefix>-net``, label value.
        heap_mb: JVM heap per node in MiB.
        dynamic_quorum: format a dynamic KRaft quorum (KIP-853; Kafka 3.9+), each node's
            metadata log in ``/kafka/metadata`` of its own so that ``reformat`` can wipe it.
    Raises:
        EnvironmentUnsupported: no daemon, not root, no nsenter/iptables (from ``setup``).
        ClusterError: a cluster with this prefix is running (run ``cluster down``).
    """

    host_clock = True  # one kernel: every JVM here reads this machine's clock

    def __init__(self, dist: KafkaDist, work_dir: Path, brokers: int = 3, controllers: int = 0,
                 broker_config: dict[str, str] | None = None, image: str | None = None,
                 prefix: str = DEFAULT_PREFIX, heap_mb: int = 512,
                 dynamic_quorum: bool = False) -> None:
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        self.dist = dist
        self.work_dir = Path(work_dir).resolve()
        self.broker_config = dict(broker_config or {})
        self.image = image or f"apache/kafka:{dist.version}"
        self.prefix = prefix
        self.heap_mb = heap_mb
        self.dynamic_quorum = dynamic_quorum
        self._cluster_id = ""
        roles = ("broker",) if controllers else ("broker", "controller")
        self.nodes = [Node(i, f"n{i}", f"{SUBNET}.{10 + i}", roles) for i in range(1, brokers + 1)]
        self.nodes += [Node(brokers + j, f"c{j}", f"{SUBNET}.{10 + brokers + j}", ("controller",))
                       for j in range(1, controllers + 1)]
        self._docker = None
        self._created = False

    @property
    def docker(self):
        if self._docker is None:
            self._docker = _client()
        return self._docker

    def _name(self, node: Node) -> str:
        return f"{self.prefix}-{node.name}"

    def _container(self, node: Node):
        import docker.errors

        try:
            return self.docker.containers.get(self._name(node))
        except docker.errors.NotFound:
            return None

    def node_dir(self, node: Node) -> Path:
        """``<work_dir>/<name>``, mounted at ``/kafka`` in the node's container."""
        return self.work_dir / node.name

    def data_dir(self, node: Node) -> Path:
        return self.node_dir(node) / "data"  # /kafka/data in the container (log.dirs)

    def metadata_dir(self, node: Node) -> Path:
        """``data``, or under a dynamic quorum ``metadata`` of its own beside it (mounted at
        ``/kafka/metadata``), which ``reformat`` wipes (a combined node keeps its partitions)."""
        return self.node_dir(node) / ("metadata" if self.dynamic_quorum else "data")

    def _format_command(self, quorum: list[str]) -> str:
        """The container's ``StorageTool format`` of ``/kafka`` (formatted directories left
        as they are), with ``quorum``: a dynamic quorum's voter arguments."""
        return (f"java {_PROPS} -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format -t "
                f"{self._cluster_id} -c /kafka/server.properties --ignore-formatted "
                + " ".join(map(shlex.quote, quorum)))

    def reformat(self, node: Node) -> str:
        import docker.errors

        from kafka_chaos.clusters.local import directory_id

        self.check_wipeable(node)
        shutil.rmtree(self.metadata_dir(node), ignore_errors=True)
        # a container of its own: the node's would also format with --initial-controllers
        # and start Kafka; this one formats the new directory as an observer's and ends
        try:
            self.docker.containers.run(
                self.image, ["sh", "-c", self._format_command(["--no-initial-controllers"])],
                user="0", volumes={str(self.node_dir(node)): {"bind": "/kafka", "mode": "rw"}},
                network_mode="none", entrypoint=[], remove=True, stdout=True, stderr=True)
        except docker.errors.ContainerError as exc:
            raise CommandFailed(f"formatting storage of {node.name} failed: "
                                f"{(exc.stderr or b'').decode(errors='replace')[-2000:]}",
                                ExecResult(exc.exit_status, "", str(exc))) from None
        return directory_id(self.metadata_dir(node))

    # -- lifecycle -----------------------------------------------------------------------
    def setup(self) -> None:
        """Network, one formatted-and-started container per node (does not wait for readiness)."""
        import docker

        from kafka_chaos.clusters.local import kafka_uuid

        check_environment()
        if status(self.prefix) is not None:
            raise ClusterError(f"a docker cluster '{self.prefix}' exists: remove it with "
                               "`kafka-chaos cluster down --backend docker`")
        check_image(self.image)
        self._created = True
        labels = {LABEL: self.prefix}
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
            subnet=f"{SUBNET}.0/24", gateway=f"{SUBNET}.1")])
        network = self.docker.networks.create(f"{self.prefix}-net", driver="bridge", ipam=ipam,
                                              labels=labels)
        self._cluster_id = kafka_uuid()
        quorum: dict[int, list[str]] = {}
        if self.dynamic_quorum:
            quorum = quorum_format_args(self.nodes, {n.node_id: kafka_uuid() for n in self.nodes})
        for node in self.nodes:
            d = self.node_dir(node)
            (d / "logs").mkdir(parents=True, exist_ok=True)
            (d / "server.properties").write_text(server_properties(
                node, self.nodes, "/kafka/data", self.broker_config, dynamic=self.dynamic_quorum,
                metadata_dir="/kafka/metadata" if self.dynamic_quorum else None))
            (d / "log4j2.properties").write_text(LOG4J2)
            (d / "log4j.properties").write_text(LOG4J1)
            # every start formats what is not formatted yet (the first one: everything)
            script = (f"{self._format_command(quorum.get(node.node_id, []))} && exec java "
                      f"-Xms{self.heap_mb // 2}m -Xmx{self.heap_mb}m -XX:+UseSerialGC "
                      f"-XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true {_PROPS} "
                      "-cp '/opt/kafka/libs/*' kafka.Kafka /kafka/server.properties")
            container = self.docker.containers.create(
                self.image, ["sh", "-c", script], name=self._name(node), hostname=node.name,
                user="0", labels={**labels, "kafka-chaos.node": node.name},
                volumes={str(d): {"bind": "/kafka", "mode": "rw"}}, network=network.name,
                entrypoint=[])
            network.disconnect(container)  # re-attached with the node's fixed address
            network.connect(container, ipv4_address=node.host)
        for node in self.nodes:
            self.start(node)

    def teardown(self) -> None:
        if not self._created:
            return  # setup refused before creating anything: leave others' clusters alone
        for node in self.nodes:
            self._save_output(node)
        cleanup_leftovers(self.prefix)

    def _save_output(self, node: Node) -> None:
        c = self._container(node)
        if c is not None:
            (self.node_dir(node) / "server.out").write_bytes(c.logs())

    def client_host(self) -> str:
        return f"{SUBNET}.1"  # the network's gateway: this machine, where clients run

    def log_files(self, node: Node) -> list[Path]:
        self._save_output(node)
        d = self.node_dir(node)
        return [p for p in (d / "logs" / "server.log", d / "server.out") if p.exists()]


def status(prefix: str = DEFAULT_PREFIX) -> dict | None:
    """The labelled containers of cluster ``prefix`` (``Backend.status`` shape), or None."""
    client = _client()
    containers = client.containers.list(all=True, filters={"label": f"{LABEL}={prefix}"})
    if not containers:
        return None
    nodes, alive, endpoints = [], {}, []
    for c in sorted(containers, key=lambda c: c.name):
        name = c.labels.get("kafka-chaos.node", c.name)
        props = _props(c)
        node_id = props.get("node.id", "?")
        host = props.get("listeners", "").split("//")[-1].split(":")[0]
        nodes.append({"node_id": node_id, "name": name, "host": host,
                      "roles": props.get("process.roles", "").split(",")})
        alive[str(node_id)] = c.status in ("running", "paused")
        if "advertised.listeners" in props:
            endpoints.append(props["advertised.listeners"].split("//")[-1])
    return {"nodes": nodes, "alive": alive, "bootstrap_servers": ",".join(endpoints)}


def _props(container) -> dict[str, str]:
    for mount in container.attrs.get("Mounts", []):
        if mount.get("Destination") == "/kafka":
            path = Path(mount["Source"]) / "server.properties"
            if path.is_file():
                return dict(line.split("=", 1) for line in path.read_text().splitlines()
                            if "=" in line)
    return {}


def cleanup_leftovers(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Remove the labelled containers and network of cluster ``prefix``; returns what went."""
    try:
        client = _client()
    except EnvironmentUnsupported:
        return []
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}={prefix}"}):
        if c.status == "paused":
            c.unpause()
        c.remove(force=True)
        removed.append(f"container {c.name}")
    for n in client.networks.list(filters={"label": f"{LABEL}={prefix}"}):
        n.remove()
        removed.append(f"network {n.name}")
    return removed

