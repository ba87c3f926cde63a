"""The ``ssh-attach`` backend: brokers you already run on your hosts, faulted over SSH with
the commands you give per host (``clusters.attach_inventory``: a systemd unit's
``systemctl start/stop/kill``, or scripts of your own).

Kill, stop and start are your commands; pause and resume are SIGSTOP and SIGCONT to the pid
your ``pid`` command prints. Partitions are iptables rules in chains of the tool's own
(``kc-chaos-in``/``-out``, jumped to from INPUT/OUTPUT), made at the first partition and
deleted, with their jumps, by the heal: the host keeps no trace of the run. The broker logs
your inventory names are copied into the run directory. Nothing is installed, uploaded,
formatted or deleted; a fault that would leave no broker running is refused.

Only when the run opts in (``--damage-files``) are the brokers' own files changed:
``AttachedSshFilesCluster`` lets the file and rollback faults (``nemesis.files``) read and
change the ``data_dir`` the inventory names, over SFTP. That damage is not undone by the
heal; Kafka's recovery and its replicas are what repair it, as on a cluster of ours.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kafka_chaos.clusters import attach_inventory, external
from kafka_chaos.clusters.base import (FREEZE_WAIT_S, Cluster, ExecResult, FileAccess,
                                       freeze_script, Killable, Node, NodeFiles, Partitionable,
                                       Pausable)
from kafka_chaos.clusters.errors import ClusterError, CommandFailed, EnvironmentUnsupported
from kafka_chaos.clusters.netfaults import chains_script, drop_rules, own_chains
from kafka_chaos.clusters.remote import Remote, SftpFiles
from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.waiting import WaitTimeout, wait_until

q = shlex.quote
#: Seconds a kill or stop may take before the broker counts as still running.
GONE_S = 30.0


class AttachedSshCluster(Cluster, Killable, Pausable, Partitionable):
    """The brokers of the inventory's hosts, reached by the tool's clients at
    ``bootstrap`` (``security``: TLS, SASL). ``work_dir`` receives the fetched logs.
    ``accept_unknown_host_keys`` as for the ssh backend."""

    owned = False
    #: refuse a fault that would leave no broker serving (``external.spare_last_broker``)
    spare_last_broker = True

    def __init__(self, bootstrap: str, security: ClientSecurity | None, work_dir: Path,
                 hosts: list[attach_inventory.AttachHost],
                 accept_unknown_host_keys: bool = False) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.work_dir = Path(work_dir)
        self.hosts = {h.node_id: h for h in hosts}
        self.accept_unknown = accept_unknown_host_keys
        self.nodes: list[Node] = []
        self._remotes: dict[int, Remote] = {}

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def setup(self) -> None:
        """Check the way in, learn the brokers, match them to the inventory's node ids and
        connect to every host. Raises ``Refused``, ``ClusterError``, ``SshError``."""
        external.preflight(self.bootstrap, self.security)
        self.nodes = external.discover(self.bootstrap, self.security)
        missing = [n.node_id for n in self.nodes if n.node_id not in self.hosts]
        unknown = sorted(set(self.hosts) - {n.node_id for n in self.nodes})
        if missing or unknown:
            raise ClusterError(f"the inventory does not match the cluster at {self.bootstrap}:"
                               f" brokers {missing} have no host, node ids {unknown} are no "
                               "broker of it")
        try:
            for node in self.nodes:
                self._remotes[node.node_id] = Remote(self.hosts[node.node_id],
                                                     self.accept_unknown)
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        """Fetch the logs and close the connections; nothing on the hosts is removed."""
        for node in self.nodes:
            if node.node_id in self._remotes:
                try:
                    self.log_files(node)
                except Exception:  # best effort: a host may have gone away
                    pass
        for r in self._remotes.values():
            r.close()
        self._remotes.clear()

    # -- processes -----------------------------------------------------------------------
    def _run(self, node: Node, script: str, what: str, timeout_s: float = 60.0) -> ExecResult:
        r, h = self._remotes[node.node_id], self.hosts[node.node_id]
        res = r.script(script, sudo=h.sudo, timeout_s=timeout_s)
        if res.exit != 0:
            raise CommandFailed(f"{r.label}: {what} failed (exit {res.exit}): "
                                f"{(res.out + res.err).strip()[-800:]}", res)
        return res

    def _pid(self, node: Node) -> int | None:
        h = self.hosts[node.node_id]
        res = self._remotes[node.node_id].script(
            f'p=$({h.pid}); [ -n "$p" ] && [ "$p" != 0 ] && kill -0 "$p" && echo "$p"',
            sudo=h.sudo)
        out = res.out.split()
        return int(out[0]) if res.exit == 0 and out and out[0].isdigit() else None

    def is_paused(self, node: Node) -> bool:
        pid = self._pid(node)
        return pid is not None and self._remotes[node.node_id].script(
            f'grep -q "^State:.T" /proc/{pid}/status').exit == 0

    def is_running(self, node: Node) -> bool:
        """Whether the ``pid`` command names a live process (paused counts as running)."""
        return self._pid(node) is not None

    def _wait_gone(self, node: Node, what: str) -> None:
        try:
            wait_until(lambda: not self.is_running(node), GONE_S, 0.2, f"{node.name} gone")
        except WaitTimeout:
            raise ClusterError(f"{node.name} still runs {GONE_S:.0f} s after its {what}") \
                from None

    def start(self, node: Node) -> None:
        if not self.is_running(node):
            self._run(node, self.hosts[node.node_id].start, "the start command")

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        if not self.is_running(node):
            return
        external.spare_last_broker(self, node, "stop")
        self.resume(node)  # a frozen JVM cannot shut down
        self._run(node, self.hosts[node.node_id].stop, "the stop command", timeout_s + 30)
        self._wait_gone(node, "stop command")

    def kill(self, node: Node) -> None:
        pid = self._pid(node)
        if pid is None:
            return
        external.spare_last_broker(self, node, "kill")
        h = self.hosts[node.node_id]
        self._run(node, h.kill or f"kill -KILL {pid}", "the kill command")
        self._wait_gone(node, "kill")

    def pause(self, node: Node) -> None:
        pid = self._pid(node)
        if pid is None:
            return
        external.spare_last_broker(self, node, "pause")
        self._run(node, freeze_script(str(pid)),
                  f"SIGSTOP (then State: T within {FREEZE_WAIT_S:g} s)")

    def resume(self, node: Node) -> None:
        pid = self._pid(node)
        if pid is not None:
            self._run(node, f"kill -CONT {pid}", "SIGCONT")

    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        return self._remotes[node.node_id].run(argv, sudo=self.hosts[node.node_id].sudo,
                                               timeout_s=timeout_s)

    def log_files(self, node: Node) -> list[Path]:
        """The inventory's ``logs`` of the node, copied into ``work_dir/<name>/``."""
        out = []
        for remote_path in self.hosts[node.node_id].logs:
            path = self.work_dir / node.name / Path(remote_path).name
            path.parent.mkdir(parents=True, exist_ok=True)
            if self._remotes[node.node_id].get(remote_path, path):
                out.append(path)
        return out

    # -- partitions ----------------------------------------------------------------------
    def drop(self, node: Node, peers: list[Node], port: int | None = None,
             inbound_only: bool = False, loss: float | None = None) -> None:
        chains = own_chains()
        rules = [shlex.join(["iptables", "-A", chains[rule[0]], *rule[1:]])
                 for peer in peers for rule in drop_rules(peer, port, inbound_only, loss)]
        self._run(node, " && ".join([chains_script("kc", "ensure"), *rules]),
                  "adding iptables rules")

    def heal_network(self) -> None:
        for node in self.nodes:
            self._remotes[node.node_id].script(chains_script("kc", "delete"),
                                               sudo=self.hosts[node.node_id].sudo)

    def rules_left(self) -> list[str]:
        left = []
        for node in self.nodes:
            res = self._remotes[node.node_id].script(
                "iptables -S INPUT; iptables -S OUTPUT; "
                + "; ".join(f"iptables -S {q(c)} 2>/dev/null" for c in own_chains().values()),
                sudo=self.hosts[node.node_id].sudo)
            left += [f"{node.name}: {line}" for line in res.out.splitlines()
                     if "-chaos-" in line and line.startswith("-A ")]
        return left

    def client_host(self) -> str:
        # sshd names the address our connection came from: the clients run on this machine
        res = self._remotes[self.nodes[0].node_id].script('echo "$SSH_CONNECTION"')
        address = res.out.split()[0] if res.exit == 0 and res.out.split() else ""
        if not address:
            raise ClusterError(f"{self.nodes[0].name}: SSH_CONNECTION gave no client address")
        return address


class AttachedSshFilesCluster(AttachedSshCluster, NodeFiles):
    """An ``AttachedSshCluster`` whose brokers' log directories the file faults may damage
    (the run's ``--damage-files``): each host's ``data_dir`` (and ``metadata_dir``) of the
    inventory, read and changed over SFTP as the login user. Raises
    ``EnvironmentUnsupported`` naming the node ids whose inventory entry has no ``data_dir``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if missing := sorted(i for i, h in self.hosts.items() if h.data_dir is None):
            raise EnvironmentUnsupported(f"--damage-files: the inventory names no data_dir "
                                         f"(the broker's log.dirs) for node ids {missing}")

    def data_dir(self, node: Node) -> str:
        return self.hosts[node.node_id].data_dir or ""

    def metadata_dir(self, node: Node) -> str:
        h = self.hosts[node.node_id]
        return h.metadata_dir or h.data_dir or ""

    def files(self, node: Node) -> FileAccess:
        return SftpFiles(self._remotes[node.node_id])


def undo(hosts: list[attach_inventory.AttachHost], accept_unknown_host_keys: bool = False
         ) -> list[str]:
    """What ``cluster down`` does on attached hosts after a run that could not heal (killed
    by SIGKILL): deletes the tool's chains and sends SIGCONT to each broker (a pause of
    ours); nothing else. Returns what it did; never raises."""
    done = []
    for h in hosts:
        try:
            r = Remote(h, accept_unknown_host_keys)
        except ClusterError as exc:
            done.append(f"NOT cleaned: {h.host} ({exc})")
            continue
        try:
            res = r.script(chains_script("kc", "delete"), sudo=h.sudo)
            done += [f"{line} on {h.host}" for line in res.out.splitlines()]
            thawed = r.script(f'p=$({h.pid}); [ -n "$p" ] && [ "$p" != 0 ] && '
                              'grep -q "^State:.*stopped" /proc/$p/status && kill -CONT "$p" '
                              '&& echo "$p"', sudo=h.sudo).out.split()
            done += [f"the pause of broker {p} on {h.host}" for p in thawed]
        finally:
            r.close()
    return done
