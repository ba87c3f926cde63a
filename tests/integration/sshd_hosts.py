"""Hosts for the ssh backend's tests: network namespaces of this machine, each running a real
``sshd`` (Debian's openssh-server) with a generated host key; one generated client key and a
generated ``known_hosts``. The backend under test sees nothing but SSH hosts.

They sit on their own bridge and subnet (``ksh-``, 10.79.0.0/24), apart from the local
backend's, so both can exist at once.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import yaml

from kafka_chaos.clusters import netns

PREFIX = "ksh"
SUBNET = "10.79.0"
SSHD = "/usr/sbin/sshd"


def _keygen(path: Path) -> list[str]:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().split()[0:2]


class SshHosts:
    """``count`` SSH hosts ``h1..hN`` at ``10.79.0.11…``; ``stop`` removes all of them."""

    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.count = count
        self.addresses = [f"{SUBNET}.{10 + i}" for i in range(1, count + 1)]
        self.client_key = root / "id_ed25519"
        self.known_hosts = root / "known_hosts"
        self._sshd: list[subprocess.Popen] = []
        self._rules: list[list[str]] = []

    def start(self) -> "SshHosts":
        if shutil.which("sshd") is None and not Path(SSHD).exists():
            raise RuntimeError("sshd missing: setup.sh installs openssh-server")
        self.stop()
        self.root.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        _keygen(self.client_key)
        (self.root / "authorized_keys").write_text(
            self.client_key.with_suffix(".pub").read_text())
        self._rules = netns.create_bridge(PREFIX, SUBNET)
        known = []
        for i, address in enumerate(self.addresses, start=1):
            netns.add_host(PREFIX, f"h{i}", i, SUBNET)
            host_key = self.root / f"h{i}_host_key"
            kind, b64 = _keygen(host_key)
            known.append(f"{address} {kind} {b64}\n")
            config = self.root / f"h{i}_sshd_config"
            config.write_text(
                f"ListenAddress {address}\nHostKey {host_key}\n"
                f"PidFile {self.root}/h{i}_sshd.pid\n"
                f"AuthorizedKeysFile {self.root}/authorized_keys\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "MaxSessions 100\nMaxStartups 100\nSubsystem sftp internal-sftp\n")
            self._sshd.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{PREFIX}-h{i}", SSHD, "-D", "-e", "-f", str(config)],
                stdout=subprocess.DEVNULL, stderr=open(self.root / f"h{i}_sshd.log", "wb")))
        self.known_hosts.write_text("".join(known))
        for address in self.addresses:
            self._wait_port(address, 22)
        return self

    @staticmethod
    def _wait_port(address: str, port: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection((address, port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def inventory(self, path: Path, roles: list[list[str]], **defaults) -> Path:
        """Write an inventory with one node per role list (node ids 1.., host i for node i)."""
        nodes = [{"host": self.addresses[i], "node_id": i + 1, "roles": r}
                 for i, r in enumerate(roles)]
        base = {"user": "root", "key_file": str(self.client_key),
                "known_hosts": str(self.known_hosts), "work_dir": str(self.root / "remote"),
                **defaults}
        path.write_text(yaml.safe_dump({"defaults": base, "nodes": nodes}, sort_keys=False))
        return path

    def chain_rules(self) -> list[str]:
        """The iptables rules of every host mentioning the tool's chains (``-chaos-``)."""
        found = []
        for i in range(1, self.count + 1):
            out = subprocess.run(["ip", "netns", "exec", f"{PREFIX}-h{i}", "iptables", "-S"],
                                 capture_output=True, text=True).stdout
            found += [f"h{i}: {line}" for line in out.splitlines() if "-chaos-" in line]
        return found

    def stop(self) -> None:
        for proc in self._sshd:
            proc.kill()
            proc.wait()
        self._sshd.clear()
        netns.remove_all(PREFIX, self._rules)
