"""The one cluster interface every backend implements, plus optional abilities.

Shaped after Jepsen's ``jepsen.db`` (required ``setup!``/``teardown!``; ``Kill`` and ``Pause`` as
separate optional protocols) and ``jepsen.control`` (one ``execute!`` whatever the transport).
Nemeses ask ``isinstance(cluster, Pausable)`` etc. instead of assuming an ability.

Required methods of ``Cluster``: ``setup``, ``teardown``, ``start``, ``stop``, ``is_running``,
``exec``, ``log_files``. Optional abilities: ``Killable.kill``, ``Pausable.pause/resume``,
``Partitionable.drop/heal_network``.
"""

from __future__ import annotations

import abc
import dataclasses
import os
from pathlib import Path

from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.clusters.security import ClientSecurity


@dataclasses.dataclass(frozen=True)
class Node:
    """One Kafka process host.

    Attributes:
        node_id: Kafka ``node.id`` (brokers 1..N, dedicated controllers N+1..N+C).
        name: short stable name used in logs and histories, e.g. ``"n1"``.
        host: the address peers and this machine's clients use: listeners bind to it,
            brokers advertise it and partitions cut it (an IP of the cluster's own network).
        roles: ``("broker", "controller")``, ``("broker",)`` or ``("controller",)``.
        broker_port, controller_port: TCP ports of the broker listener (``PLAINTEXT``) and the
            KRaft controller listener (``CONTROLLER``) on ``host``.
    """

    node_id: int
    name: str
    host: str
    roles: tuple[str, ...]
    broker_port: int = 9092
    controller_port: int = 9093

    @property
    def client_endpoint(self) -> str:
        """``host:port`` of the broker listener, e.g. ``"10.77.0.11:9092"``."""
        return f"{self.host}:{self.broker_port}"

    @property
    def is_broker(self) -> bool:
        """True if ``process.roles`` includes ``broker``."""
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        """True if ``process.roles`` includes ``controller`` (a KRaft quorum voter)."""
        return "controller" in self.roles


@dataclasses.dataclass(frozen=True)
class ExecResult:
    """Outcome of ``Cluster.exec``: exit code and decoded output."""

    exit: int
    out: str
    err: str


class Cluster(abc.ABC):
    """A Kafka cluster under test. ``setup`` brings every node up; ``teardown`` removes all of it.

    Guarantees: ``teardown`` is idempotent and never raises for already-removed parts; ``stop``
    and ``kill`` on a node that is not running silently do nothing.
    """

    nodes: list[Node]
    #: How clients reach the brokers (TLS, SASL): a cluster of ours listens in plaintext;
    #: an attached one as its client properties file says (``clusters.security``).
    security: ClientSecurity | None = None
    #: Whether the tool created this cluster (and may format, remove and reconfigure it).
    owned: bool = True
    #: Whether its brokers stamp their logs (``<run dir>/nodes/<name>/logs/server.log``,
    #: with the zone in each time) by this machine's wall clock: their log is then evidence
    #: on the history's clock (``analysis.kafka_log``).
    host_clock: bool = False

    @property
    def brokers(self) -> list[Node]:
        """The nodes that serve clients, in ``node.id`` order."""
        return [n for n in self.nodes if n.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's client listener (``Node.client_endpoint``)."""
        return ",".join(n.client_endpoint for n in self.brokers)

    def node(self, node_id: int) -> Node:
        """The node with ``node.id`` ``node_id``; ``KeyError`` if none."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)

    @abc.abstractmethod
    def setup(self) -> None:
        """Create, format and start every node (does not wait for readiness)."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop every process and remove everything ``setup`` created."""

    @abc.abstractmethod
    def start(self, node: Node) -> None:
        """Start the Kafka process of ``node`` if it is not running."""

    @abc.abstractmethod
    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        """SIGTERM, wait up to ``timeout_s`` for exit, then SIGKILL."""

    @abc.abstractmethod
    def is_running(self, node: Node) -> bool:
        """True if the node's Kafka process is alive (paused counts as alive)."""

    @abc.abstractmethod
    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        """Run ``argv`` on the node (its namespace, container or host)."""

    @abc.abstractmethod
    def log_files(self, node: Node) -> list[Path]:
        """Local paths of the node's log files (downloaded first where remote)."""


class Killable(abc.ABC):
    """Ability: SIGKILL a node's process (Jepsen ``db/Kill``)."""

    @abc.abstractmethod
    def kill(self, node: Node) -> None:
        """SIGKILL the node's Kafka process and wait until it is gone."""


#: Seconds ``Pausable.pause`` waits for the process to be frozen before it raises.
FREEZE_WAIT_S = 5.0


def freeze_script(pid: str) -> str:
    """A POSIX shell script that sends SIGSTOP to ``pid`` (a number or ``$p``) and exits 0
    once the kernel reports the process stopped (``State: T`` in ``/proc/PID/status``), or 1
    after ``FREEZE_WAIT_S`` when it never is (a zombie, a pid that is gone, a process whose
    threads do not all stop): ``pause`` over SSH means what it means on the local backend."""
    tenths = int(FREEZE_WAIT_S * 10)
    return (f'kill -STOP {pid} || exit 1; n=0; while ! grep -q "^State:.T" /proc/{pid}/status '
            f"2>/dev/null; do [ $n -ge {tenths} ] && exit 1; sleep 0.1; n=$((n+1)); done; "
            "exit 0")


class Pausable(abc.ABC):
    """Ability: freeze and thaw a node's process (Jepsen ``db/Pause``)."""

    @abc.abstractmethod
    def pause(self, node: Node) -> None:
        """SIGSTOP the node's Kafka process and return once it is frozen (``is_paused``);
        nothing when it is not running. Raises ``ClusterError`` when it is still not frozen
        after ``FREEZE_WAIT_S`` (the pause op then ends ``info``: it may have taken effect
        later), never returns as if it had paused."""

    @abc.abstractmethod
    def resume(self, node: Node) -> None:
        """SIGCONT the node's Kafka process."""

    @abc.abstractmethod
    def is_paused(self, node: Node) -> bool:
        """Whether the node's Kafka process is frozen now: how a heal is verified, not
        assumed (a frozen process still counts as running)."""


class Partitionable(abc.ABC):
    """Ability: drop traffic between nodes with iptables rules on the nodes themselves."""

    @abc.abstractmethod
    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False, loss: float | None = None) -> None:
        """Drop traffic between ``node`` and each of ``peers`` (both directions, rules on ``node``).

        With ``port``, only TCP connections to that port on either side are cut (e.g. the
        broker listener ``Node.broker_port``, leaving the controller listener intact). With
        ``inbound_only``, only what ``node`` receives from the peers is dropped (a one-way
        partition: ``node`` still sends to them; TCP needs both ways, so connections fail in
        both directions, while datagrams from ``node`` still arrive). With ``loss`` (a
        probability), each packet is dropped with that probability (``netfaults.drop_rules``):
        packet loss, which TCP answers with retransmissions and timeouts.
        """

    @abc.abstractmethod
    def heal_network(self) -> None:
        """Remove every rule ``drop`` added, on every node."""

    @abc.abstractmethod
    def client_host(self) -> str:
        """The address the nodes see this machine's clients (workload, monitor) connect from,
        e.g. ``"10.77.0.1"``: what a client-broker partition cuts."""

    @abc.abstractmethod
    def rules_left(self) -> list[str]:
        """The rules of ours still in place on running nodes, as ``"<name>: <rule>"`` (empty
        once ``heal_network`` worked): how a heal is verified, not assumed."""


class LosesUnsynced(abc.ABC):
    """Ability: a node's power loss: its process dies and every write its filesystem was not
    asked to fsync is gone (``clusters.lossyfs``; Jepsen's ``lazyfs`` idea, wired to Kafka)."""

    @abc.abstractmethod
    def lose_unsynced(self, node: Node) -> dict:
        """SIGKILL ``node``'s process, then truncate each of its files to the length it had at
        its last fsync. Returns ``{"files": {path: [synced_bytes, lost_bytes]}, "lost_bytes":
        int}`` (paths relative to the data directory). Raises ``ClusterError`` when the cluster
        was set up without the lossy filesystem."""


class DiskFaults(abc.ABC):
    """Ability: a node's data disk made full or slow under its running broker
    (``clusters.lossyfs``: a write that grows a file fails with ENOSPC; each write and fsync
    waits)."""

    @abc.abstractmethod
    def set_disk(self, node: Node, command: str) -> dict:
        """Send ``command`` (``full``, ``free``, ``slow <ms>``, ``fast``: ``Lossy.disk``) to
        ``node``'s data filesystem. Returns its state ``{"full": bool, "slow_ms": int,
        "refused": n, "delayed": n}`` (``Lossy.disk_state``: writes the full disk refused,
        writes and fsyncs the slow disk delayed).
        Raises ``ClusterError`` when the cluster was set up without the lossy filesystem or
        it does not answer."""


class FileAccess(abc.ABC):
    """Reads and changes the files of a node's Kafka directories, wherever they are: on this
    host (``LocalFiles``) or over SFTP (``clusters.remote.SftpFiles``). Paths are POSIX path
    strings on the node's host. A change reaches that host's disk (fsync) before it returns.
    Errors are ``OSError`` (also for a file that is gone)."""

    @abc.abstractmethod
    def listdir(self, path: str) -> list[str]:
        """The names of the regular files in directory ``path``, sorted; ``[]`` when there is
        no such directory."""

    @abc.abstractmethod
    def size(self, path: str) -> int | None:
        """The size of regular file ``path``, bytes; None when there is no such file."""

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The whole content of ``path``."""

    @abc.abstractmethod
    def write_at(self, path: str, offset: int, data: bytes) -> None:
        """Overwrite ``data`` at byte ``offset`` of ``path`` in place (the file stays the one
        the broker has open)."""

    @abc.abstractmethod
    def truncate(self, path: str, length: int) -> None:
        """Cut ``path`` to ``length`` bytes in place."""


class LocalFiles(FileAccess):
    """Files of this host (the local backend's node directories, the docker backend's bind
    mounts)."""

    def listdir(self, path: str) -> list[str]:
        try:
            with os.scandir(path) as entries:
                return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def size(self, path: str) -> int | None:
        return os.stat(path).st_size if os.path.isfile(path) else None

    def read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        self._change(path, lambda fd: os.pwrite(fd, data, offset))

    def truncate(self, path: str, length: int) -> None:
        self._change(path, lambda fd: os.ftruncate(fd, length))

    @staticmethod
    def _change(path: str, change) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            change(fd)
            os.fsync(fd)
        finally:
            os.close(fd)


class NodeFiles(abc.ABC):
    """Ability: the tool can read and change a node's Kafka log directory (the local
    backend's node directories and the docker backend's bind mounts on this host, the ssh
    backend's over SFTP), so a file fault can damage its files (``nemesis.files``)."""

    @abc.abstractmethod
    def data_dir(self, node: Node) -> Path | str:
        """The node's ``log.dirs`` on its host: its partitions' directories and checkpoint
        files (and, in combined mode, ``__cluster_metadata-0``)."""

    def metadata_dir(self, node: Node) -> Path | str:
        """The node's ``metadata.log.dir`` (``__cluster_metadata-0`` is in it): ``data_dir``
        unless the cluster gives the metadata log a directory of its own."""
        return self.data_dir(node)

    def files(self, node: Node) -> FileAccess:
        """How to read and change the files under ``data_dir``: those of this host unless
        the backend says otherwise."""
        return LocalFiles()


class DynamicQuorum(abc.ABC):
    """Ability: the KRaft quorum was formatted dynamic (KIP-853, Kafka 3.9+: its voters are in
    the metadata log, changed by ``AddRaftVoter``/``RemoveRaftVoter``, ``clusters.raft``), and
    a controller's storage can be wiped and formatted anew, so a voter can be replaced
    (remove, wipe, add back: the procedure of Kafka's operations docs, "Controller membership
    changes")."""

    #: False when the cluster was set up with a static quorum (``controller.quorum.voters``).
    dynamic_quorum: bool = False

    def check_wipeable(self, node: Node) -> None:
        """Raises ``ClusterError`` while ``node`` runs or when the quorum is static: what
        ``reformat`` checks before it wipes anything."""
        if self.is_running(node):  # type: ignore[attr-defined]  (a Cluster's)
            raise ClusterError(f"{node.name} runs: stop it before wiping its storage")
        if not self.dynamic_quorum:
            raise ClusterError("this cluster's quorum is static: set it up with dynamic_quorum")

    @abc.abstractmethod
    def reformat(self, node: Node) -> str:
        """Delete the stopped ``node``'s metadata log directory (``metadata.log.dir``; a
        combined node keeps its partitions) and format it again with the cluster's id and
        ``--no-initial-controllers``: started, it joins the quorum as an observer under a new
        directory id, which is returned (base64 Kafka ``Uuid``). Raises
        ``ClusterError`` while the node runs, ``CommandFailed`` when formatting fails."""


class Skewable(abc.ABC):
    """Ability: move a node's wall clock (``clusters.faketime``: libfaketime under the broker
    JVM; the monotonic clock, the kernel and other processes keep true time)."""

    @abc.abstractmethod
    def set_clock(self, node: Node, offset_s: float) -> None:
        """Make ``node``'s Kafka process read wall-clock time ``offset_s`` seconds ahead
        (negative: behind); 0 resets it. Raises ``ClusterError`` when the cluster was set up
        without clock control."""

    @abc.abstractmethod
    def clock_offset(self, node: Node) -> float:
        """The offset ``node``'s process reads now, seconds (0.0 without clock control)."""
