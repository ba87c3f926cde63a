"""The ssh backend's host-key rules, against real sshd hosts: a changed key is refused before
anything is created, an unknown key is refused unless the user opts in, and then it is logged
and kept for ``cluster down``."""

from __future__ import annotations

import logging

import pytest

from kafka_chaos.clusters import backends, dist, inventory
from kafka_chaos.clusters.remote import Remote, SshError
from tests.integration.conftest import leftovers

pytestmark = pytest.mark.kafka


def test_host_keys_are_verified(ssh_hosts, tmp_path, caplog):
    inv = ssh_hosts.inventory(tmp_path / "inventory.yaml", [["broker", "controller"]] * 3)
    options = backends.BackendOptions(inventory=inv)
    good = ssh_hosts.known_hosts.read_text()

    # a changed key: h2's line now holds h1's key
    lines = good.splitlines()
    lines[1] = f"{ssh_hosts.addresses[1]} {' '.join(lines[0].split()[1:])}"
    ssh_hosts.known_hosts.write_text("\n".join(lines) + "\n")
    try:
        cluster = backends.get("ssh").create(dist.resolve(), tmp_path / "nodes", 3, 0, {},
                                             options)
        with pytest.raises(SshError, match=r"host key of 10\.79\.0\.12 CHANGED.*SHA256:"):
            cluster.setup()
        cluster.teardown()
        # refused before anything was created, on any host
        assert not (ssh_hosts.root / "remote" / "kc-n1").exists()
        assert backends.get("ssh").status(options) is None and leftovers() == []

        # an unknown key: refused, with the way out named
        ssh_hosts.known_hosts.write_text("")
        host = inventory.load(inv)[0]
        with pytest.raises(SshError, match="not in known_hosts.*--accept-unknown-host-keys"):
            Remote(host)
        # the opt-in accepts it, says so in the log, and keeps it for later connections
        with caplog.at_level(logging.WARNING, logger="kafka_chaos.ssh"):
            remote = Remote(host, accept_unknown=True)
        assert remote.run(["echo", "a b;$(x)"]).out == "a b;$(x)\n"  # argv stays argv
        assert "accepting unknown host key of 10.79.0.11" in caplog.text
        key = remote.accepted_key
        remote.close()
        assert key and key == " ".join(good.splitlines()[0].split()[1:])
        Remote(host, known_key=key).close()  # what cluster down does after a crash
        assert ssh_hosts.known_hosts.read_text() == ""  # the user's file is never written
    finally:
        ssh_hosts.known_hosts.write_text(good)
