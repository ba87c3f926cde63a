"""Linux network namespaces on one bridge: the local backend's "hosts".

Each node gets namespace ``<prefix>-<name>`` with ``eth0`` (a veth whose peer is on the bridge)
and address ``<subnet>.<10 + index>``; the host keeps ``<subnet>.1`` on the bridge, so clients
running on the host reach every node. Everything created is named from ``prefix`` so that a
crashed run's leftovers can be found and removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from kafka_chaos.clusters.errors import CommandFailed, EnvironmentUnsupported

SUBNET = "10.77.0"


def run(argv: list[str], check: bool = True, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    """Run a host command; raise ``CommandFailed`` with its stderr when ``check`` and exit != 0."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise CommandFailed(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()}",
                            proc)
    return proc


def require_root(backend: str, why: str, tools: dict[str, str]) -> None:
    """Raise ``EnvironmentUnsupported`` unless we are root and every tool is on ``PATH``.

    ``why``: what root is for, shown to the user; ``tools``: executable -> Debian package.
    """
    if os.geteuid() != 0:
        raise EnvironmentUnsupported(f"the {backend} backend needs root ({why}): run with sudo")
    for tool, pkg in tools.items():
        if shutil.which(tool) is None:
            raise EnvironmentUnsupported(f"`{tool}` not found: apt-get install {pkg}")


def check_environment() -> None:
    """Raise ``EnvironmentUnsupported`` unless we are root with ``ip``, ``iptables`` and
    network namespaces."""
    require_root("local", "network namespaces, iptables",
                 {"ip": "iproute2", "iptables": "iptables"})
    probe = f"kc-probe-{os.getpid()}"
    proc = run(["ip", "netns", "add", probe], check=False)
    if proc.returncode != 0:
        raise EnvironmentUnsupported(f"network namespaces are unavailable here: {proc.stderr.strip()}")
    run(["ip", "netns", "del", probe], check=False)


def bridge_name(prefix: str) -> str:
    """The bridge's interface name (at most 15 characters, the kernel's IFNAMSIZ - 1)."""
    return f"{prefix}-br0"[:15]


def ns_name(prefix: str, name: str) -> str:
    """The namespace of node ``name``, e.g. ``kc-n1``."""
    return f"{prefix}-{name}"


def create_bridge(prefix: str, subnet: str = SUBNET) -> list[list[str]]:
    """Create the bridge with the host address ``<subnet>.1/24`` (``subnet``: three octets).

    Returns the host iptables rules added (as ``iptables`` argv tails after ``-D``) so they can
    be deleted later: when the FORWARD policy is DROP (e.g. dockerd is running), bridged frames
    between nodes would be dropped by br_netfilter, so an ACCEPT rule for the bridge is inserted.
    """
    br = bridge_name(prefix)
    run(["ip", "link", "add", br, "type", "bridge"])
    run(["ip", "addr", "add", f"{subnet}.1/24", "dev", br])
    run(["ip", "link", "set", br, "up"])
    rules: list[list[str]] = []
    policy = run(["iptables", "-S", "FORWARD"], check=False).stdout
    if "-P FORWARD ACCEPT" not in policy:
        rule = ["FORWARD", "-i", br, "-o", br, "-j", "ACCEPT"]
        run(["iptables", "-I", *rule])
        rules.append(rule)
    return rules


def add_host(prefix: str, name: str, index: int, subnet: str = SUBNET) -> str:
    """Create namespace + veth for node ``name`` and return its IP, ``<subnet>.<10 + index>``."""
    ns = ns_name(prefix, name)
    veth = f"{prefix}-v{index}"[:15]
    ip = f"{subnet}.{10 + index}"
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge_name(prefix), "up"])
    run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    return ip


def remove_all(prefix: str, host_rules: list[list[str]]) -> list[str]:
    """Delete every namespace and the bridge named from ``prefix``, the given host rules and
    any copy of the bridge's FORWARD ACCEPT rule (``create_bridge``) still in the host's tables.

    Never raises; returns a description of what was removed.
    """
    removed = []
    listing = run(["ip", "netns", "list"], check=False).stdout.split("\n")
    for line in listing:
        ns = line.split(" ")[0]
        if ns.startswith(f"{prefix}-"):
            if run(["ip", "netns", "del", ns], check=False).returncode == 0:
                removed.append(f"namespace {ns}")
    # Delete the host ends of the veths too: a deleted namespace lives on, unseen, while
    # orphaned TCP sockets of killed brokers still retransmit FINs to vanished peers (minutes),
    # and its veths would stay on the host until then.
    links = run(["ip", "-o", "link", "show"], check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(f"{prefix}-v"):
            if run(["ip", "link", "del", name], check=False).returncode == 0:
                removed.append(f"veth {name}")
    br = bridge_name(prefix)
    if run(["ip", "link", "del", br], check=False).returncode == 0:
        removed.append(f"bridge {br}")
    # also the bridge's ACCEPT rule left by an earlier run that died before its teardown
    # (``create_bridge`` inserts one copy per run); a bounded sweep, as ``-D`` deletes one copy
    own = ["FORWARD", "-i", br, "-o", br, "-j", "ACCEPT"]
    for rule in [*host_rules, *[own] * 8]:
        if run(["iptables", "-D", *rule], check=False).returncode == 0:
            removed.append(f"iptables rule {' '.join(rule)}")
        elif rule is own:
            break
    return removed
