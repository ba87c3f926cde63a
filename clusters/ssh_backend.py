"""The ssh backend: Kafka nodes on hosts the user already has, driven over SSH (paramiko).

Each node gets ``<work_dir>/<prefix>-<name>/`` on its host (``server.properties``, logging
config, ``data/``, ``logs/``, ``server.out`` and ``kafka.pid``); the broker runs as the SSH user
under ``nohup setsid``, its pid recorded in ``kafka.pid``. Kafka comes from ``kafka_home`` on the
host or is uploaded from the Maven cache to ``<work_dir>/kafka-<version>/libs`` (kept as a cache
between runs; files already there with the same size are not sent again).

Partitions are rules in two iptables chains of the tool's own, ``<prefix>-chaos-in`` and
``<prefix>-chaos-out``, jumped to from ``INPUT``/``OUTPUT``: healing flushes only them and
teardown deletes them; no other chain is ever flushed. SSH itself is never cut: rules name the
peers' Kafka addresses only.

A state file (``state_dir()/ssh-<prefix>.json``) lists the hosts and any host key accepted on
opt-in, so ``cluster down`` after a crash reaches the same hosts with the same key checks and
removes processes (by their remote pid files), chains and node directories.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from kafka_chaos.clusters import faketime
from kafka_chaos.clusters.base import (FREEZE_WAIT_S, Cluster, DynamicQuorum, ExecResult,
                                       FileAccess, freeze_script, Killable, Node, NodeFiles,
                                       Partitionable, Pausable, Skewable)
from kafka_chaos.clusters.dist import KafkaDist, check_java_version
from kafka_chaos.clusters.errors import (ClusterError, CommandFailed, DistributionError,
                             EnvironmentUnsupported)
from kafka_chaos.clusters.inventory import SshHost
from kafka_chaos.clusters.kafka_config import (LOG4J1, LOG4J2, quorum_format_args,
                                               server_properties)
from kafka_chaos.clusters.local import directory_id_in, kafka_uuid, state_dir
from kafka_chaos.clusters.netfaults import chains_script, drop_rules, own_chains as _chains
from kafka_chaos.clusters.remote import Remote, SftpFiles, SshError

DEFAULT_PREFIX = "kc"
q = shlex.quote


def _state_file(prefix: str) -> Path:
    return state_dir() / f"ssh-{prefix}.json"


def _node_dir(h: SshHost, prefix: str) -> str:
    return f"{h.work_dir}/{prefix}-{h.node.name}"


def _pid_script(pidfile: str, action: str) -> str:
    """A script with ``$p`` = the recorded pid and ``alive`` true while it is a live Kafka
    broker (a zombie's or a reused pid's ``cmdline`` does not name ``kafka.Kafka``)."""
    return (f"p=$(cat {q(pidfile)} 2>/dev/null); "
            'alive() { [ -n "$p" ] && grep -qaF kafka.Kafka /proc/$p/cmdline 2>/dev/null; }; '
            f"{action}")


def _wait_dead(tenths: int) -> str:
    return f'n=0; while alive && [ $n -lt {tenths} ]; do sleep 0.1; n=$((n+1)); done; '


_KILL = "alive || exit 0; kill -KILL $p; " + _wait_dead(100) + "alive && exit 1; exit 0"


class SshCluster(Cluster, Killable, Pausable, Partitionable, Skewable, NodeFiles,
                 DynamicQuorum):
    """Kafka on the hosts of an inventory (``clusters.inventory``), one node per host.

    Args:
        dist: the Kafka version (uploaded, or checked against each ``kafka_home``).
        work_dir: local directory for copies of each node's config and logs.
        hosts: the inventory.
        broker_config: server properties overriding ``kafka_config.TEST_DEFAULTS``.
        accept_unknown_host_keys: accept and log host keys ``known_hosts`` lacks.
        prefix: names remote node directories, chains and the state file.
        dynamic_quorum: format a dynamic KRaft quorum (KIP-853; Kafka 3.9+), each node's
            metadata log in ``metadata/`` of its own so that ``reformat`` can wipe it alone.
    Raises (from ``setup``):
        SshError: a host is unreachable, refuses the key, or its host key is unknown/changed
            (before anything is created anywhere).
        DistributionError: no or too old Java on a host, or ``kafka_home`` of another version.
        ClusterError: a cluster with this prefix is recorded as running.
    """

    def __init__(self, dist: KafkaDist, work_dir: Path, hosts: list[SshHost],
                 broker_config: dict[str, str] | None = None,
                 accept_unknown_host_keys: bool = False, prefix: str = DEFAULT_PREFIX,
                 clock: bool = False, dynamic_quorum: bool = False) -> None:
        self.dist = dist
        self.clock = clock
        self.dynamic_quorum = dynamic_quorum
        self._cluster_id = ""
        self._faketime: dict[int, str] = {}  # node id -> libfaketime's path on its host
        self.work_dir = Path(work_dir).resolve()
        self.hosts = {h.node.node_id: h for h in hosts}
        self.nodes = [h.node for h in hosts]
        self.broker_config = dict(broker_config or {})
        self.accept_unknown = accept_unknown_host_keys
        self.prefix = prefix
        self._remotes: dict[int, Remote] = {}
        self._created = False

    def _remote(self, node: Node) -> Remote:
        return self._remotes[node.node_id]

    def _dir(self, node: Node) -> str:
        return _node_dir(self.hosts[node.node_id], self.prefix)

    def _libs(self, h: SshHost) -> str:
        if h.kafka_home == "upload":
            return f"{h.work_dir}/kafka-{self.dist.version}/libs"
        return f"{h.kafka_home}/libs"

    def node_dir(self, node: Node) -> Path:
        """Local ``<work_dir>/<name>``: the node's config and the logs fetched back."""
        return self.work_dir / node.name

    def data_dir(self, node: Node) -> str:
        """``<host's work_dir>/<prefix>-<name>/data`` on the node's host (``log.dirs``)."""
        return f"{self._dir(node)}/data"

    def metadata_dir(self, node: Node) -> str:
        """``data`` (the first of ``log.dirs``), or under a dynamic quorum ``metadata`` of its
        own beside it, which ``reformat`` wipes (a combined node keeps its partitions)."""
        return f"{self._dir(node)}/{'metadata' if self.dynamic_quorum else 'data'}"

    def files(self, node: Node) -> FileAccess:
        return SftpFiles(self._remote(node))

    def _save_state(self) -> None:
        state = {"prefix": self.prefix, "work_dir": str(self.work_dir),
                 "hosts": [h.as_record() for h in self.hosts.values()],
                 "host_keys": {str(nid): r.accepted_key for nid, r in self._remotes.items()
                               if r.accepted_key},
                 "bootstrap_servers": self.bootstrap_servers}
        path = _state_file(self.prefix)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(path)

    # -- lifecycle -----------------------------------------------------------------------
    def setup(self) -> None:
        """Connect to every host first (so a refused host key creates nothing), then per node:
        Java check, jars, node directory, chains, config, ``StorageTool format``; start all."""
        if _state_file(self.prefix).exists():
            state = status(self.prefix)
            if state is not None and any(state["alive"].values()):
                raise ClusterError(f"an ssh cluster '{self.prefix}' is running: remove it with "
                                   "`kafka-chaos cluster down --backend ssh`")
            cleanup_leftovers(self.prefix)
        try:
            for h in self.hosts.values():
                self._remotes[h.node.node_id] = Remote(h, self.accept_unknown)
        except BaseException:  # a refused key or Ctrl-C: close what was opened, create nothing
            for r in self._remotes.values():
                r.close()
            self._remotes.clear()
            raise
        self._created = True
        self._save_state()
        self._cluster_id = kafka_uuid()
        quorum: dict[int, list[str]] = {}
        if self.dynamic_quorum:
            quorum = quorum_format_args(self.nodes, {n.node_id: kafka_uuid() for n in self.nodes})
        for node in self.nodes:
            h, r, d = self.hosts[node.node_id], self._remote(node), self._dir(node)
            version = r.run([h.java, "-version"])
            if version.exit != 0:
                raise DistributionError(f"{r.label}: `{h.java} -version` failed: "
                                        f"{version.err.strip()[:300]} (set java in the inventory)")
            check_java_version(version.err, r.label)
            self._check(r, r.script(f"rm -rf {q(d)} && mkdir -p {q(d + '/logs')} {q(d + '/data')}"),
                        "creating the node directory")
            self._install(h, r)
            if self.clock:
                self._find_faketime(node, r)
                self.set_clock(node, 0.0)
            self._check(r, r.script(chains_script(self.prefix, "reset"), sudo=h.sudo),
                        "creating iptables chains (is iptables installed? sudo needed?)")
            local = self.node_dir(node)
            (local / "logs").mkdir(parents=True, exist_ok=True)
            files = {"server.properties": server_properties(
                node, self.nodes, f"{d}/data", self.broker_config, dynamic=self.dynamic_quorum,
                metadata_dir=self.metadata_dir(node) if self.dynamic_quorum else None),
                     "log4j2.properties": LOG4J2, "log4j.properties": LOG4J1}
            for name, text in files.items():
                (local / name).write_text(text)
                r.put_text(text, f"{d}/{name}")
            self._format(node, quorum.get(node.node_id, []))
        for node in self.nodes:
            self.start(node)

    def _format(self, node: Node, quorum: list[str]) -> None:
        h, r = self.hosts[node.node_id], self._remote(node)
        self._check(r, r.run([h.java, *self._props(node), "-cp", f"{self._libs(h)}/*",
                              "kafka.tools.StorageTool", "format", "-t", self._cluster_id,
                              "-c", f"{self._dir(node)}/server.properties",
                              "--ignore-formatted", *quorum], timeout_s=120),
                    "formatting storage")

    def reformat(self, node: Node) -> str:
        self.check_wipeable(node)
        r, meta = self._remote(node), self.metadata_dir(node)
        self._check(r, r.run(["rm", "-rf", meta]), "wiping the metadata directory")
        self._format(node, ["--no-initial-controllers"])
        return directory_id_in(SftpFiles(r).read(f"{meta}/meta.properties").decode(),
                               f"{r.label}:{meta}")

    def _find_faketime(self, node: Node, r: Remote) -> None:
        found = r.script(" ".join(f"test -e {q(lib)} && echo {q(lib)};" for lib in
                                  faketime.LIBS) + " true").out.split()
        if not found:
            raise EnvironmentUnsupported(f"{r.label}: clock faults need libfaketime on the host "
                                         "(apt-get install libfaketime)")
        self._faketime[node.node_id] = found[0]

    def set_clock(self, node: Node, offset_s: float) -> None:
        if not self.clock:
            raise ClusterError("this cluster's brokers do not run under libfaketime: set it "
                               "up with clock (the clock fault)")
        path = f"{self._dir(node)}/faketime"
        r = self._remote(node)
        self._check(r, r.script(f"printf %s {q(faketime.offset_text(offset_s))} >{q(path)}.tmp "
                                f"&& mv {q(path)}.tmp {q(path)}"), "setting the clock offset")

    def clock_offset(self, node: Node) -> float:
        if not self.clock:
            return 0.0
        return faketime.parse_offset(
            self._remote(node).run(["cat", f"{self._dir(node)}/faketime"]).out)

    @staticmethod
    def _check(r: Remote, res: ExecResult, what: str) -> None:
        if res.exit != 0:
            raise CommandFailed(f"{r.label}: {what} failed: "
                                f"{(res.out + res.err).strip()[-1500:]}", res)

    def _install(self, h: SshHost, r: Remote) -> None:
        jar = f"kafka_2.13-{self.dist.version}.jar"
        if h.kafka_home == "upload":
            libs = self._libs(h)
            self._check(r, r.run(["mkdir", "-p", libs]), "creating the jar directory")
            r.put_files(sorted(self.dist.libs.glob("*.jar")), libs)
        elif r.run(["test", "-f", f"{h.kafka_home}/libs/{jar}"]).exit != 0:
            found = r.script(f"ls {q(h.kafka_home + '/libs')} | grep '^kafka_2.13-' | head -3").out
            raise DistributionError(
                f"{r.label}: {h.kafka_home}/libs has no {jar} (found: {found.split() or 'none'}); "
                f"the run asks for Kafka {self.dist.version}: set --kafka-version to the "
                "installed one, or kafka_home: upload")

    def _props(self, node: Node) -> list[str]:
        d = self._dir(node)
        return [f"-Dkafka.logs.dir={d}/logs", f"-Dlog4j2.configurationFile={d}/log4j2.properties",
                f"-Dlog4j.configuration=file:{d}/log4j.properties"]

    def teardown(self) -> None:
        if not self._created:
            return  # refused before creating anything (e.g. a host key): touch nothing
        try:
            for node in self.nodes:
                if node.node_id in self._remotes:
                    try:
                        # SIGKILL, as the local backend's teardown: a clean stop one node
                        # after another waited out its timeout on the quorum already gone
                        self.kill(node)
                        self.log_files(node)
                    except Exception:  # best effort: the cleanup below kills what it reaches
                        pass
        finally:
            cleanup_leftovers(self.prefix)
            for r in self._remotes.values():
                r.close()
            self._remotes.clear()

    def _pid(self, node: Node, action: str, timeout_s: float = 30.0) -> ExecResult:
        return self._remote(node).script(_pid_script(f"{self._dir(node)}/kafka.pid", action),
                                         timeout_s=timeout_s)

    def start(self, node: Node) -> None:
        if self.is_running(node):
            return
        h, d = self.hosts[node.node_id], self._dir(node)
        java = [h.java, f"-Xms{h.heap_mb // 2}m", f"-Xmx{h.heap_mb}m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                "-Djava.net.preferIPv4Stack=true", *self._props(node),
                "-cp", f"{self._libs(h)}/*", "kafka.Kafka", f"{d}/server.properties"]
        if self.clock:  # env execs java too
            java = ["env", *(f"{k}={v}" for k, v in faketime.env(
                f"{d}/faketime", self._faketime.get(node.node_id)).items()), *java]
        # a simple command in the background: $! is the JVM itself (nohup and setsid exec it)
        res = self._remote(node).script(
            f"nohup setsid {shlex.join(java)} >>{q(d + '/server.out')} 2>&1 </dev/null & "
            f"echo $! >{q(d + '/kafka.pid')}")
        self._check(self._remote(node), res, f"starting {node.name}")

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        # SIGCONT after SIGTERM: a paused JVM handles the TERM once thawed
        res = self._pid(node, "alive || exit 0; kill -TERM $p; kill -CONT $p; "
                        + _wait_dead(int(timeout_s * 10)) + _KILL, timeout_s=timeout_s + 20)
        self._check(self._remote(node), res, f"stopping {node.name}")

    def kill(self, node: Node) -> None:
        self._check(self._remote(node), self._pid(node, _KILL), f"killing {node.name}")

    def pause(self, node: Node) -> None:
        # returns once the process is frozen (a stop reaches all its threads a moment later)
        self._check(self._remote(node), self._pid(node, "alive || exit 0; " + freeze_script("$p")),
                    f"pausing {node.name} (SIGSTOP, then State: T within {FREEZE_WAIT_S:g} s)")

    def resume(self, node: Node) -> None:
        self._pid(node, "alive && kill -CONT $p; exit 0")

    def is_paused(self, node: Node) -> bool:
        return self._pid(node, 'alive && grep -q "^State:.T" /proc/$p/status').exit == 0

    def is_running(self, node: Node) -> bool:
        return self._pid(node, "alive").exit == 0

    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        """Run ``argv`` on the node's host: as root via ``sudo -n`` when the inventory sets
        ``sudo``, else as the SSH user."""
        return self._remote(node).run(argv, sudo=self.hosts[node.node_id].sudo,
                                      timeout_s=timeout_s)

    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False, loss: float | None = None) -> None:
        chains = _chains(self.prefix)
        cmds = [shlex.join(["iptables", "-A", chains[rule[0]], *rule[1:]])
                for peer in peers for rule in drop_rules(peer, port, inbound_only, loss)]
        r = self._remote(node)
        self._check(r, r.script(" && ".join(cmds), sudo=self.hosts[node.node_id].sudo),
                    "adding iptables rules")

    def heal_network(self) -> None:
        flush = " && ".join(f"iptables -F {q(c)}" for c in _chains(self.prefix).values())
        for node in self.nodes:
            r = self._remote(node)
            self._check(r, r.script(flush, sudo=self.hosts[node.node_id].sudo),
                        "flushing the tool's iptables chains")

    def client_host(self) -> str:
        # sshd names the address our connection came from: the clients run on this machine
        res = self._remote(self.nodes[0]).script('echo "$SSH_CONNECTION"')
        address = res.out.split()[0] if res.exit == 0 and res.out.split() else ""
        if not address:
            raise ClusterError(f"{self.nodes[0].name}: SSH_CONNECTION gave no client address")
        return address

    def rules_left(self) -> list[str]:
        show = " && ".join(f"iptables -S {q(c)}" for c in _chains(self.prefix).values())
        left = []
        for node in self.nodes:
            r = self._remote(node)
            res = r.script(show, sudo=self.hosts[node.node_id].sudo)
            left += [f"{node.name}: {line}" for line in res.out.splitlines()
                     if line.startswith("-A ")]
        return left

    def log_files(self, node: Node) -> list[Path]:
        """Fetch ``logs/server.log`` and ``server.out`` back into ``node_dir`` (once the
        remote directory is gone, the copies fetched at teardown)."""
        local, d = self.node_dir(node), self._dir(node)
        wanted = [(f"{d}/logs/server.log", local / "logs" / "server.log"),
                  (f"{d}/server.out", local / "server.out")]
        if node.node_id in self._remotes:
            for remote_path, path in wanted:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._remote(node).get(remote_path, path)
        return [path for _, path in wanted if path.exists()]


def _load_state(prefix: str) -> dict | None:
    try:
        return json.loads(_state_file(prefix).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def status(prefix: str = DEFAULT_PREFIX) -> dict | None:
    """The recorded cluster (``Backend.status`` shape), each node's liveness asked of its host
    over SSH (an unreachable host counts as down), or None if none is recorded."""
    state = _load_state(prefix)
    if state is None:
        return None
    hosts = [SshHost.from_record(r) for r in state["hosts"]]
    nodes, alive = [], {}
    for h in hosts:
        n = h.node
        nodes.append({"node_id": n.node_id, "name": n.name, "host": n.host,
                      "roles": list(n.roles)})
        try:
            r = Remote(h, known_key=state.get("host_keys", {}).get(str(n.node_id)))
        except SshError:
            alive[str(n.node_id)] = False
            continue
        pidfile = f"{_node_dir(h, prefix)}/kafka.pid"
        alive[str(n.node_id)] = r.script(_pid_script(pidfile, "alive")).exit == 0
        r.close()
    return {"nodes": nodes, "alive": alive, "bootstrap_servers": state.get("bootstrap_servers")}


def cleanup_leftovers(prefix: str = DEFAULT_PREFIX, hosts: list[SshHost] | None = None,
                      accept_unknown_host_keys: bool = False) -> list[str]:
    """Kill the Kafka processes (by remote pid file), delete the tool's chains and the node
    directories on every host of the recorded cluster ``prefix``, or of ``hosts`` (an
    inventory) when none is recorded. Never raises: an unreachable host is reported and the
    state file kept, so a later ``cluster down`` can finish."""
    state = _load_state(prefix)
    keys = (state or {}).get("host_keys", {})
    if state is not None:
        hosts = [SshHost.from_record(r) for r in state["hosts"]]
    removed, failed = [], False
    for h in hosts or []:
        d = _node_dir(h, prefix)
        try:
            r = Remote(h, accept_unknown_host_keys, keys.get(str(h.node.node_id)))
            try:
                killed = r.script(_pid_script(f"{d}/kafka.pid", f"alive && echo $p; {_KILL}"))
                removed += [f"broker process {p} on {h.host} (node {h.node.node_id})"
                            for p in killed.out.split()]
                gone = r.script(f"test -d {q(d)} && rm -rf {q(d)} && echo yes").out.strip()
                removed += [f"directory {h.host}:{d}"] if gone else []
                chains = r.script(chains_script(prefix, "delete"), sudo=h.sudo)
                removed += [f"{line} on {h.host}" for line in chains.out.splitlines()]
            finally:
                r.close()
        except ClusterError as exc:
            failed = True
            removed.append(f"NOT cleaned: {h.host} ({exc})")
    if not failed:
        _state_file(prefix).unlink(missing_ok=True)
    return removed

