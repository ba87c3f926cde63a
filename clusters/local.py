"""The embedded default backend: one Kafka JVM per Linux network namespace on one machine.

Every part it creates (namespaces, veths, a bridge, host iptables rules, JVMs) is recorded in a
state file under ``state_dir()`` as soon as it exists, so ``kafka-chaos cluster down`` (or the
next run) can remove what a crashed or SIGKILLed run left behind.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from kafka_chaos.clusters import faketime, kafka_cds, lossymount, netns
from kafka_chaos.clusters.base import (FREEZE_WAIT_S, Cluster, DiskFaults, DynamicQuorum,
                                       ExecResult, NodeFiles, Killable, LosesUnsynced, Node,
                                       Pausable, Skewable)
from kafka_chaos.clusters.dist import KafkaDist, check_java
from kafka_chaos.clusters.errors import ClusterError, CommandFailed
from kafka_chaos.clusters.kafka_config import (LOG4J1, LOG4J2, quorum_format_args,
                                               server_properties)
from kafka_chaos.clusters.netfaults import NamespaceIptables
from kafka_chaos.waiting import WaitTimeout, wait_until

DEFAULT_PREFIX = "kc"
#: Options of every broker and storage-tool JVM (the heap aside): the client compiler only
#: (much less JIT CPU on small machines, a faster start) and the serial collector.
JVM_OPTIONS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               "-Djava.net.preferIPv4Stack=true"]


def state_dir() -> Path:
    """``$XDG_STATE_HOME/kafka-chaos`` (default ``~/.local/state/kafka-chaos``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kafka-chaos"


def _state_file(prefix: str) -> Path:
    return state_dir() / f"local-{prefix}.json"


def _is_kafka_pid(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline


def kafka_uuid() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (``Uuid.toString``).

    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-``: command-line parsers (the
    StorageTool's ``-t`` included) would take such an id for an option.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class LocalCluster(Cluster, Killable, Pausable, NamespaceIptables, LosesUnsynced, Skewable,
                   NodeFiles, DynamicQuorum, DiskFaults):
    """N brokers (KRaft) in network namespaces, optionally with C dedicated controllers.

    Args:
        dist: the Kafka distribution to run.
        work_dir: where node directories go (``<work_dir>/<name>/{server.properties,data,logs}``).
        brokers: number of broker nodes (``node.id`` 1..N).
        controllers: 0 for combined mode (``process.roles=broker,controller`` on every broker),
            else C controller-only nodes (``node.id`` N+1..N+C).
        broker_config: server properties overriding ``kafka_config.TEST_DEFAULTS``.
        prefix: names of namespaces/bridge/veths start with it; one live cluster per prefix.
        heap_mb: JVM heap per node in MiB.
        lossy_fs: mount ``clusters.lossyfs`` on each node's ``data/`` (``lose_unsynced``).
        clock: run each JVM under libfaketime, its offset in ``<node>/faketime`` (``set_clock``).
        dynamic_quorum: format a dynamic KRaft quorum (KIP-853; Kafka 3.9+), whose voters the
            membership faults change, instead of a static one.
    Raises:
        EnvironmentUnsupported: not root / no namespaces / no iptables (from ``setup``).
        DistributionError: Java missing or too old.
        ClusterError: a cluster with the same prefix is recorded as live (run ``cluster down``).
    """

    host_clock = True  # one kernel: every JVM here reads this machine's clock

    def __init__(self, dist: KafkaDist, work_dir: Path, brokers: int = 3, controllers: int = 0,
                 broker_config: dict[str, str] | None = None, prefix: str = DEFAULT_PREFIX,
                 heap_mb: int = 512, lossy_fs: bool = False, clock: bool = False,
                 dynamic_quorum: bool = False) -> None:
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        self.dist = dist
        self.work_dir = Path(work_dir).resolve()
        self.prefix = prefix
        self.broker_config = dict(broker_config or {})
        self.heap_mb = heap_mb
        self.lossy_fs = lossy_fs
        self.clock = clock
        self.dynamic_quorum = dynamic_quorum
        self._cluster_id = ""
        broker_roles = ("broker",) if controllers else ("broker", "controller")
        self.nodes = [Node(i, f"n{i}", f"{netns.SUBNET}.{10 + i}", broker_roles)
                      for i in range(1, brokers + 1)]
        self.nodes += [Node(brokers + j, f"c{j}", f"{netns.SUBNET}.{10 + brokers + j}",
                            ("controller",)) for j in range(1, controllers + 1)]
        self._procs: dict[int, subprocess.Popen] = {}
        self._host_rules: list[list[str]] = []
        self._mounts: list[str] = []
        self._created = False

    # -- state ---------------------------------------------------------------------------
    def _save_state(self) -> None:
        state = {
            "prefix": self.prefix,
            "work_dir": str(self.work_dir),
            "host_rules": self._host_rules,
            "pids": {str(nid): p.pid for nid, p in self._procs.items()},
            "mounts": self._mounts,
            "nodes": [{"node_id": n.node_id, "name": n.name, "host": n.host, "roles": list(n.roles)}
                      for n in self.nodes],
            "bootstrap_servers": self.bootstrap_servers,
        }
        path = _state_file(self.prefix)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(path)

    def node_dir(self, node: Node) -> Path:
        """``<work_dir>/<name>``: the node's ``server.properties``, ``data/`` and ``logs/``."""
        return self.work_dir / node.name

    def data_dir(self, node: Node) -> Path:
        return self.node_dir(node) / "data"

    def metadata_dir(self, node: Node) -> Path:
        """The node's ``__cluster_metadata`` log directory: ``data/`` (the first of its
        ``log.dirs``), or under a dynamic quorum ``<name>/metadata`` of its own, so that
        ``reformat`` wipes a combined node's metadata and keeps its partitions (outside the
        lossy filesystem: a power loss there loses no metadata)."""
        return self.node_dir(node) / ("metadata" if self.dynamic_quorum else "data")

    # -- lifecycle -----------------------------------------------------------------------
    def setup(self) -> None:
        """Bridge, one namespace per node, ``StorageTool format`` with one new cluster id, start.

        Raises ``EnvironmentUnsupported``, ``DistributionError``, ``ClusterError`` (a live
        cluster with this prefix) or ``CommandFailed`` (formatting failed; output included).
        """
        netns.check_environment()
        if self.lossy_fs:
            lossymount.check_environment()
        if self.clock:
            faketime.check_environment()
        java = check_java()
        state = recorded_state(self.prefix)
        if state is not None and any(state["alive"].values()):
            raise ClusterError(f"a local cluster '{self.prefix}' is already running "
                               f"({state.get('work_dir')}): stop it with `kafka-chaos cluster down`")
        cleanup_leftovers(self.prefix)  # what a crashed run left: dead pids, namespaces, rules
        self._created = True
        self._save_state()
        self._host_rules = netns.create_bridge(self.prefix)
        self._save_state()
        self._cluster_id = cluster_id = kafka_uuid()
        for index, node in enumerate(self.nodes, start=1):
            netns.add_host(self.prefix, node.name, index)
            d = self.node_dir(node)
            (d / "logs").mkdir(parents=True, exist_ok=True)
            if self.lossy_fs:
                self._mounts.append(str(d / "data"))
                self._save_state()
                lossymount.mount(d / "data.disk", d / "data", d / "logs" / "lossyfs.log")
            (d / "server.properties").write_text(
                server_properties(node, self.nodes, str(d / "data"), self.broker_config,
                                  dynamic=self.dynamic_quorum,
                                  metadata_dir=str(self.metadata_dir(node))
                                  if self.dynamic_quorum else None))
            (d / "log4j2.properties").write_text(LOG4J2)
            (d / "log4j.properties").write_text(LOG4J1)
            if self.clock:
                faketime.write_offset(d / "faketime", 0.0)
        kafka_cds.ensure(self.dist, java, JVM_OPTIONS, kafka_uuid())
        self._format(java, cluster_id)
        for node in self.nodes:
            self.start(node)

    def _format(self, java: str, cluster_id: str) -> None:
        """``StorageTool format`` of every node's storage with ``cluster_id``, the nodes side by
        side: each is a JVM start of about 1.3 s, which one after another made a third of
        the cluster's bring-up. Raises ``CommandFailed`` naming the first node that failed."""
        quorum: dict[int, list[str]] = {}
        if self.dynamic_quorum:
            quorum = quorum_format_args(self.nodes, {n.node_id: kafka_uuid() for n in self.nodes})
        formats = {node: self._format_one(java, node, cluster_id, quorum.get(node.node_id, []))
                   for node in self.nodes}
        outputs = {node: proc.communicate()[0] for node, proc in formats.items()}
        for node, proc in formats.items():
            if proc.returncode != 0:
                raise CommandFailed(f"formatting storage of {node.name} failed: "
                                    f"{outputs[node].strip()[-2000:]}",
                                    subprocess.CompletedProcess(proc.args, proc.returncode,
                                                                outputs[node], ""))
            if self.lossy_fs:  # the formatted storage counts as on disk
                lossymount.command(self.node_dir(node) / "data", "sync")

    def _format_one(self, java: str, node: Node, cluster_id: str,
                    quorum: list[str]) -> subprocess.Popen:
        return subprocess.Popen(
            [java, *JVM_OPTIONS, *kafka_cds.java_options(self.dist, java),
             *self._jvm_props(node), "-cp", self.dist.classpath,
             "kafka.tools.StorageTool", "format", "-t", cluster_id,
             "-c", str(self.node_dir(node) / "server.properties"), "--ignore-formatted",
             *quorum], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def reformat(self, node: Node) -> str:
        self.check_wipeable(node)
        shutil.rmtree(self.metadata_dir(node), ignore_errors=True)
        java = shutil.which("java") or "java"
        proc = self._format_one(java, node, self._cluster_id, ["--no-initial-controllers"])
        out = proc.communicate()[0]
        if proc.returncode != 0:
            raise CommandFailed(f"formatting storage of {node.name} failed: {out.strip()[-2000:]}",
                                subprocess.CompletedProcess(proc.args, proc.returncode, out, ""))
        return directory_id(self.metadata_dir(node))

    def teardown(self) -> None:
        if not self._created:
            return  # setup refused before creating anything: leave others' clusters alone
        # SIGKILL, as Jepsen's teardowns do: nothing reads the brokers after this but their
        # files, and their logs are flushed line by line (immediateFlush, log4j's default). A
        # clean shutdown one node after another took 7 s of each run, the last nodes waiting
        # out their timeout for a controller quorum already gone.
        running = [p for p in self._procs.values() if p.poll() is None]
        for proc in running:
            proc.kill()
        for proc in running:
            proc.wait()
        cleanup_leftovers(self.prefix)
        self._procs.clear()
        self._mounts.clear()

    def _jvm_props(self, node: Node) -> list[str]:
        d = self.node_dir(node)
        return [f"-Dkafka.logs.dir={d / 'logs'}",
                f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}",
                f"-Dlog4j.configuration=file:{d / 'log4j.properties'}"]

    def start(self, node: Node) -> None:
        if self.is_running(node):
            return
        d = self.node_dir(node)
        java = shutil.which("java") or "java"
        argv = ["ip", "netns", "exec", netns.ns_name(self.prefix, node.name),
                java, f"-Xms{self.heap_mb // 2}m", f"-Xmx{self.heap_mb}m", *JVM_OPTIONS,
                *kafka_cds.java_options(self.dist, java), *self._jvm_props(node),
                "-cp", self.dist.classpath, "kafka.Kafka", str(d / "server.properties")]
        env = {**os.environ, **faketime.env(d / "faketime")} if self.clock else None
        with open(d / "server.out", "ab") as out:
            # own session: a Ctrl-C to the runner must not reach the brokers before teardown
            self._procs[node.node_id] = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self._save_state()

    def _wait_exit(self, node: Node, timeout_s: float) -> bool:
        proc = self._procs.get(node.node_id)
        if proc is None:
            return True
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        if not self.is_running(node):
            return
        proc = self._procs[node.node_id]
        proc.send_signal(signal.SIGTERM)
        if not self._wait_exit(node, timeout_s):
            proc.kill()
            proc.wait()

    def kill(self, node: Node) -> None:
        if not self.is_running(node):
            return
        proc = self._procs[node.node_id]
        proc.kill()
        proc.wait()

    def client_host(self) -> str:
        return f"{netns.SUBNET}.1"  # the host's address on the bridge

    def lose_unsynced(self, node: Node) -> dict:
        if not self.lossy_fs:
            raise ClusterError("this cluster has no lossy filesystem: set it up with "
                               "lossy_fs (the lose-unfsynced fault)")
        self.kill(node)  # the process first: nothing may write after the loss
        return lossymount.command(self.node_dir(node) / "data", "lose")

    def set_disk(self, node: Node, command: str) -> dict:
        if not self.lossy_fs:
            raise ClusterError("this cluster has no lossy filesystem: set it up with "
                               "lossy_fs (the disk fault)")
        report = lossymount.command(self.node_dir(node) / "data", command)
        return {k: report.get(k) for k in ("full", "slow_ms", "refused", "delayed")}

    def set_clock(self, node: Node, offset_s: float) -> None:
        if not self.clock:
            raise ClusterError("this cluster's brokers do not run under libfaketime: set it "
                               "up with clock (the clock fault)")
        faketime.write_offset(self.node_dir(node) / "faketime", offset_s)

    def clock_offset(self, node: Node) -> float:
        if not self.clock:
            return 0.0
        return faketime.read_offset(self.node_dir(node) / "faketime")

    def pid(self, node: Node) -> int | None:
        """The process id of ``node``'s broker JVM (``ip netns exec`` execs it, so the
        process started is the JVM), or None when it is not running."""
        return self._procs[node.node_id].pid if self.is_running(node) else None

    def pause(self, node: Node) -> None:
        if (pid := self.pid(node)) is not None:
            os.kill(pid, signal.SIGSTOP)
            # the stop reaches every thread of the JVM a moment later: pause returns once the
            # process is frozen, so what follows sees it so
            try:
                wait_until(lambda: self.is_paused(node), FREEZE_WAIT_S, 0.01,
                           f"{node.name} frozen")
            except WaitTimeout as exc:
                raise ClusterError(f"pausing {node.name}: SIGSTOP sent, but {exc}") from None

    def resume(self, node: Node) -> None:
        if (pid := self.pid(node)) is not None:
            os.kill(pid, signal.SIGCONT)

    def is_paused(self, node: Node) -> bool:
        if (pid := self.pid(node)) is None:
            return False
        status = Path(f"/proc/{pid}/status")
        try:
            return any(line.startswith("State:\tT") for line in status.read_text().splitlines())
        except OSError:  # exited meanwhile
            return False

    def is_running(self, node: Node) -> bool:
        proc = self._procs.get(node.node_id)
        return proc is not None and proc.poll() is None

    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        proc = netns.run(["ip", "netns", "exec", netns.ns_name(self.prefix, node.name), *argv],
                         check=False, timeout_s=timeout_s)
        return ExecResult(proc.returncode, proc.stdout, proc.stderr)

    def log_files(self, node: Node) -> list[Path]:
        d = self.node_dir(node)
        return [p for p in (d / "logs" / "server.log", d / "server.out") if p.exists()]


def directory_id(log_dir: Path) -> str:
    """The ``directory.id`` of the formatted log directory ``log_dir`` (its
    ``meta.properties``, KIP-858). Raises ``ClusterError`` when it has none."""
    try:
        text = (Path(log_dir) / "meta.properties").read_text()
    except OSError as exc:
        raise ClusterError(f"{log_dir}: no meta.properties ({exc})") from None
    return directory_id_in(text, str(log_dir))


def directory_id_in(meta_properties: str, where: str) -> str:
    """The ``directory.id`` in the text of a ``meta.properties`` (of directory ``where``, for
    the error). Raises ``ClusterError`` when it names none."""
    for line in meta_properties.splitlines():
        if line.startswith("directory.id="):
            return line.split("=", 1)[1].strip()
    raise ClusterError(f"{where}/meta.properties names no directory.id")


def recorded_state(prefix: str = DEFAULT_PREFIX) -> dict | None:
    """The state file of the cluster ``prefix`` with each pid's liveness, or None if none."""
    path = _state_file(prefix)
    try:
        state = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    state["alive"] = {nid: _is_kafka_pid(pid) for nid, pid in (state.get("pids") or {}).items()}
    return state


def cleanup_leftovers(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Remove everything a local cluster with ``prefix`` left: JVMs, namespaces, bridge, rules.

    Found through the recorded state file (and namespace/bridge names). Never raises; returns
    what was removed, for the user.
    """
    removed: list[str] = []
    path = _state_file(prefix)
    state = {}
    if path.exists():
        try:
            state = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            state = {}
    for nid, pid in (state.get("pids") or {}).items():
        if _is_kafka_pid(pid):
            os.kill(pid, signal.SIGKILL)
            try:
                wait_until(lambda: not _is_kafka_pid(pid), 5.0, 0.05, f"process {pid} gone")
            except WaitTimeout:
                pass  # a zombie the kernel reaps later; the namespace goes all the same
            removed.append(f"broker process {pid} (node {nid})")
    removed += netns.remove_all(prefix, state.get("host_rules") or [])
    removed += [f"lossy filesystem at {m}" for m in state.get("mounts") or []
                if lossymount.unmount(Path(m))]
    path.unlink(missing_ok=True)
    return removed
