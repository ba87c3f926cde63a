"""Real-cluster tests: root, network namespaces, real Kafka JVMs, real iptables.

After the session, nothing may be left: no broker JVM, namespace, bridge, iptables rule, or
labelled container or network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusters import backends

ROOT = Path(__file__).resolve().parents[2]


def leftovers() -> list[str]:
    """Everything a run may have left on the host, as readable strings."""
    found = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"namespace {line.split()[0]}" for line in ns.splitlines() if line.startswith("kc-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
              if line.split(":")[1].strip().startswith("kc-")]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    found += [f"rule {r}" for r in rules.splitlines() if "kc-" in r]
    pids = subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True).stdout
    found += [f"broker pid {p}" for p in pids.split()]
    docker = [] if shutil.which("docker") is None else [
        ("container", ["ps", "-a", "--format", "{{.Names}}"]),
        ("network", ["network", "ls", "--format", "{{.Name}}"])]
    for what, argv in docker:
        out = subprocess.run(["docker", *argv, "--filter", "label=kafka-chaos.prefix"],
                             capture_output=True, text=True).stdout
        found += [f"docker {what} {name}" for name in out.split()]
    return found


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    if os.geteuid() != 0:
        pytest.skip("real-cluster tests need root (network namespaces, iptables)")
    for name in backends.NAMES:
        backends.get(name).cleanup()
    yield
    left = leftovers()
    for name in backends.NAMES:
        backends.get(name).cleanup()
    assert not left, f"tests left these behind: {left}"


def kafka_chaos(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, from the repository root."""
    return subprocess.run([sys.executable, "-m", "kafka_chaos", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
