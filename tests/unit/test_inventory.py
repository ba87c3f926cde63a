"""The ssh inventory: what a user may write, and one clear error (file, line, key) otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_chaos.clusters import backends, inventory
from kafka_chaos.clusters.errors import EnvironmentUnsupported


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


GOOD = """\
defaults:
  user: kafka
  sudo: true
  kafka_home: /opt/kafka
nodes:
  - {host: 10.0.0.11, node_id: 1, roles: [broker, controller]}
  - {host: 10.0.0.12, node_id: 2, roles: [broker, controller], user: admin, port: 2222}
  - host: db3.example
    address: 192.168.5.13
    node_id: 3
    name: k3
    roles: [broker]
    broker_port: 19092
"""


def test_defaults_apply_and_nodes_override(tmp_path):
    hosts = inventory.load(_write(tmp_path, GOOD))
    assert [h.node.name for h in hosts] == ["n1", "n2", "k3"]
    assert [(h.user, h.port, h.sudo) for h in hosts] == [("kafka", 22, True), ("admin", 2222, True),
                                                         ("kafka", 22, True)]
    assert hosts[0].kafka_home == "/opt/kafka" and hosts[0].work_dir == "/var/tmp/kafka-chaos"
    assert hosts[0].known_hosts == str(Path("~/.ssh/known_hosts").expanduser())
    k3 = hosts[2].node
    assert (k3.host, k3.roles, k3.client_endpoint) == ("192.168.5.13", ("broker",),
                                                       "192.168.5.13:19092")
    assert hosts[2].host == "db3.example"  # SSH goes to the host, Kafka listens on the address
    # the state-file round trip keeps every field
    assert [inventory.SshHost.from_record(h.as_record()) for h in hosts] == hosts


@pytest.mark.parametrize("text,words", [
    ("nodes:\n  - host: a\n    node_id: 1\n    roles: [broker, controller]\n    prot: 22\n",
     ["line 5", "nodes.0.prot", "Extra inputs"]),
    ("defaults:\n  user: k\n  password: hunter2\nnodes: []\n",
     ["line 2", "defaults", "passwords are not accepted"]),
    ("nodes:\n  - {host: a, node_id: 1, roles: [broker, controller]}\n"
     "  - {host: b, node_id: 1, roles: [broker]}\n", ["node_id 1 appears more than once"]),
    ("nodes:\n  - {host: a, node_id: 1, roles: [broker, controller]}\n"
     "  - {host: a, node_id: 2, roles: [broker]}\n", ["host a appears more than once"]),
    ("nodes:\n  - {host: a, node_id: 1, roles: [broker]}\n", ["at least one broker and one"]),
    ("nodes:\n  - {host: a, node_id: 1, roles: [leader]}\n", ["line 2", "nodes.0.roles.0"]),
    ("defaults: {work_dir: tmp/kc}\nnodes:\n  - {host: a, node_id: 1, roles: [broker]}\n",
     ["line 1", "defaults.work_dir", "absolute"]),
    ("nodes:\n  - {host: a, node_id: 1, roles: [broker, controller], port: 70000}\n",
     ["line 2", "nodes.0.port"]),
    ("nodes: [\n", ["not valid YAML"]),
    ("", ["nodes", "Field required"]),
])
def test_bad_inventories_get_one_clear_error(tmp_path, text, words):
    with pytest.raises(EnvironmentUnsupported) as err:
        inventory.load(_write(tmp_path, text))
    message = str(err.value)
    assert message.startswith(f"--inventory {tmp_path / 'inventory.yaml'}")
    assert all(w in message for w in words), message


def test_a_missing_key_file_and_a_wrong_shape_are_named(tmp_path):
    path = _write(tmp_path, "defaults: {key_file: /nonexistent/id}\n"
                  "nodes:\n  - {host: a, node_id: 1, roles: [broker, controller]}\n")
    with pytest.raises(EnvironmentUnsupported, match="nodes.0.key_file: /nonexistent/id does not"):
        inventory.load(path)
    ssh = backends.get("ssh")
    options = backends.BackendOptions(inventory=_write(tmp_path, GOOD))
    ssh.check_environment(options, 3, 0)
    with pytest.raises(EnvironmentUnsupported, match="lists 3 broker and 0 controller-only nodes"):
        ssh.check_environment(options, 5, 0)
    with pytest.raises(EnvironmentUnsupported, match="needs --inventory"):
        ssh.check_environment(backends.BackendOptions(), 3, 0)
    with pytest.raises(EnvironmentUnsupported, match="--inventory needs --backend ssh"):
        backends.get("local").check_environment(options, 3, 0)


def test_an_attach_inventory_takes_commands_per_host_and_names_what_is_missing(tmp_path):
    """ssh-attach: defaults and per-node commands merge; a node without a start or stop
    command, a repeated node id, a kafka_home (nothing is installed) or a password is one
    error naming the file and the key."""
    from kafka_chaos.clusters import attach_inventory

    path = _write(tmp_path, "defaults: {start: systemctl start kafka, stop: systemctl stop "
                  "kafka, sudo: true, logs: [/var/log/kafka/server.log]}\nnodes:\n"
                  "  - {host: a, node_id: 1}\n  - {host: b, node_id: 2, stop: ./stop.sh, "
                  "pid: cat /run/kafka.pid}\n")
    a, b = attach_inventory.load(path)
    assert (a.start, a.stop, a.sudo, a.kill, a.logs) == \
        ("systemctl start kafka", "systemctl stop kafka", True, None,
         ("/var/log/kafka/server.log",))
    assert (b.stop, b.pid, a.pid) == ("./stop.sh", "cat /run/kafka.pid",
                                      attach_inventory.DEFAULTS["pid"])
    for text, words in (("nodes: [{host: a, node_id: 1, stop: x}]\n", "nodes.0: no start"),
                        ("defaults: {start: x, stop: y}\nnodes: [{host: a, node_id: 1}, "
                         "{host: b, node_id: 1}]\n", "node_id 1 appears more than once"),
                        ("nodes: [{host: a, node_id: 1, start: x, stop: y, kafka_home: /k}]\n",
                         "kafka_home"),
                        ("nodes: [{host: a, node_id: 1, start: x, stop: y, password: p}]\n",
                         "passwords are not accepted"),
                        ("nodes: [{host: a, node_id: 1, start: x, stop: y, data_dir: d}]\n",
                         "nodes.0.data_dir: d is not an absolute path")):
        with pytest.raises(EnvironmentUnsupported, match=words):
            attach_inventory.load(_write(tmp_path, text))


def test_damage_files_needs_every_node_s_data_dir_and_ssh_attach(tmp_path):
    """``--damage-files``: the data_dir (and metadata_dir) merge from defaults like the
    commands; the backend check names the node ids without one, and other backends refuse
    the option."""
    from kafka_chaos.clusters import attach_inventory

    path = _write(tmp_path, "defaults: {start: x, stop: y, data_dir: /var/lib/kafka}\nnodes:\n"
                  "  - {host: a, node_id: 1}\n  - {host: b, node_id: 2, metadata_dir: /m}\n")
    a, b = attach_inventory.load(path)
    assert (a.data_dir, a.metadata_dir, b.data_dir, b.metadata_dir) == \
        ("/var/lib/kafka", None, "/var/lib/kafka", "/m")
    options = backends.BackendOptions(inventory=path, bootstrap_servers="k:9092",
                                      damage_files=True)
    backends.get("ssh-attach").check_options(options, 3, 0)
    without = _write(tmp_path, "defaults: {start: x, stop: y}\nnodes:\n"
                     "  - {host: a, node_id: 1, data_dir: /d}\n  - {host: b, node_id: 2}\n")
    with pytest.raises(EnvironmentUnsupported, match=r"names no data_dir .* node ids \[2\]"):
        backends.get("ssh-attach").check_options(
            backends.BackendOptions(inventory=without, bootstrap_servers="k:9092",
                                    damage_files=True), 3, 0)
    for name in ("local", "docker"):
        with pytest.raises(EnvironmentUnsupported, match="--damage-files needs --backend "
                           "ssh-attach"):
            backends.get(name).check_options(backends.BackendOptions(damage_files=True), 3, 0)


def test_a_fault_that_would_leave_no_broker_serving_is_refused_unless_allowed():
    """``external.spare_last_broker``: a paused broker does not serve; a stopped one neither;
    with another serving broker, or ``spare_last_broker`` false, the fault may go on."""
    from kafka_chaos.clusters import external
    from kafka_chaos.clusters.base import Node
    from kafka_chaos.clusters.errors import ClusterError

    class Fake:
        spare_last_broker = True
        nodes = [Node(i, f"n{i}", "h", ("broker",)) for i in (1, 2, 3)]
        brokers = nodes
        running, paused = {1, 2, 3}, set()

        def is_running(self, n):
            return n.node_id in self.running

        def is_paused(self, n):
            return n.node_id in self.paused

    c = Fake()
    c.running, c.paused = {1, 2, 3}, {2}
    external.spare_last_broker(c, c.nodes[0], "kill")  # n3 still serves
    c.running = {1, 2}
    with pytest.raises(ClusterError, match="refused to kill n1: it is the last running"):
        external.spare_last_broker(c, c.nodes[0], "kill")
    c.spare_last_broker = False
    external.spare_last_broker(c, c.nodes[0], "kill")
