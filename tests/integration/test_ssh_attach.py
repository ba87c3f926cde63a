"""ssh-attach against brokers the test started itself, as an operator would: three KRaft
brokers on three of the session's sshd hosts (network namespaces), each with a start script,
a stop script and a pid file of the operator's. The tool runs those commands over SSH, and
iptables through its own chains; it must install, upload and delete nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from kafka_chaos.clusters import admin, dist
from kafka_chaos.clusters.base import Node
from kafka_chaos.clusters.kafka_config import LOG4J2, server_properties
from kafka_chaos.clusters.local import kafka_uuid
from kafka_chaos.history import read_history
from tests.integration.conftest import (down_removed, faults_observed, kafka_chaos,
                                        nothing_lost, results_of)
from tests.integration.sshd_hosts import PREFIX

# the longer tier's (docs/nightly.md): attach mode is docker-attach's in the full suite, the
# ssh transport conformance[ssh]'s
pytestmark = [pytest.mark.kafka, pytest.mark.long]


def _files(d: Path) -> set[str]:
    """The operator's files of a broker directory (not its data or logs, which Kafka writes)."""
    return {str(p.relative_to(d)) for p in d.rglob("*")
            if p.parts[len(d.parts)] not in ("data", "logs")}


@pytest.fixture
def operator_brokers(ssh_hosts, tmp_path):
    """Three brokers on hosts h1..h3, started with their start scripts outside the tool;
    stopped at the end whatever happened. Yields ``(dirs, bootstrap)``."""
    kafka, java = dist.resolve(), dist.check_java()
    nodes = [Node(i, f"n{i}", ssh_hosts.addresses[i - 1], ("broker", "controller"))
             for i in (1, 2, 3)]
    cluster_id, dirs = kafka_uuid(), []
    for node in nodes:
        d = tmp_path / "opt" / node.name
        (d / "logs").mkdir(parents=True)
        (d / "server.properties").write_text(server_properties(node, nodes, str(d / "data"), {}))
        (d / "log4j2.properties").write_text(LOG4J2)
        jvm = (f"{java} -Xmx384m -XX:+UseSerialGC -Dkafka.logs.dir={d}/logs "
               f"-Dlog4j2.configurationFile={d}/log4j2.properties -cp '{kafka.classpath}'")
        (d / "start.sh").write_text(
            f"cd {d} || exit 1\nnohup setsid {jvm} kafka.Kafka server.properties >server.out "
            f"2>&1 </dev/null &\necho $! > {d}/kafka.pid\n")
        (d / "stop.sh").write_text(
            f'p=$(cat {d}/kafka.pid); kill -TERM "$p" 2>/dev/null; kill -CONT "$p"; n=0; '
            'while kill -0 "$p" 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); '
            'done; kill -KILL "$p" 2>/dev/null; true\n')
        fmt = subprocess.run(f"{jvm} kafka.tools.StorageTool format -t {cluster_id} "
                             f"-c {d}/server.properties", shell=True, capture_output=True,
                             text=True, timeout=120)
        assert fmt.returncode == 0, fmt.stdout + fmt.stderr
        dirs.append(d)
    try:
        for i, d in enumerate(dirs, 1):
            subprocess.run(["ip", "netns", "exec", f"{PREFIX}-h{i}", "sh", str(d / "start.sh")],
                           check=True, timeout=30)
        bootstrap = ",".join(n.client_endpoint for n in nodes)
        admin.wait_ready(bootstrap, 3, [], timeout_s=120)
        yield dirs, bootstrap
    finally:
        for d in dirs:
            subprocess.run(["sh", str(d / "stop.sh")], timeout=60)
            # whatever the pid file says: no JVM of this test may outlive it
            subprocess.run(["pkill", "-KILL", "-f", "--", f"-Dkafka.logs.dir={d}/logs"])


def test_ssh_attach_faults_brokers_it_did_not_start_with_their_own_commands(
        ssh_hosts, operator_brokers, tmp_path):
    """Kill and partition faults through the operator's commands: each ran, the monitor saw a
    broker stop answering and an ISR shrink, the verdict is valid (acks=all,
    min.insync.replicas=2); the run's topic is deleted. Then, opted in with
    ``--damage-files``, scenario ``truncated-leader-segment`` on the same brokers: the
    leader's active segment in the inventory's data_dir cut over SFTP (acknowledged records
    among those cut), nothing lost. Afterwards every broker runs, no chain of the tool is
    left on any host, the operator's files are as they were and nothing came into the hosts'
    directory where the ssh backend would upload (nothing uploaded)."""
    dirs, bootstrap = operator_brokers
    before = {d: _files(d) for d in dirs}
    remote = ssh_hosts.root / "remote"
    uploads = sorted(remote.rglob("*")) if remote.exists() else []
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({
        "defaults": {"user": "root", "key_file": str(ssh_hosts.client_key),
                     "known_hosts": str(ssh_hosts.known_hosts)},
        "nodes": [{"host": ssh_hosts.addresses[i], "node_id": i + 1,
                   "start": f"sh {d}/start.sh", "stop": f"sh {d}/stop.sh",
                   "pid": f"cat {d}/kafka.pid", "logs": [f"{d}/logs/server.log"]}
                  for i, d in enumerate(dirs)]}))
    proc = kafka_chaos("run", "--backend", "ssh-attach", "--inventory", str(inventory),
                       "--bootstrap-servers", bootstrap, "--nemesis", "kill,partition",
                       "--nemesis-interval", "6", "--time-limit", "60",
                       "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    facts = faults_observed(run_dir, proc, {"kill", "partition"})
    # the run's topic is gone, and no group of the run was kept
    assert facts["topics"]["deleted"] == facts["topics"]["created"], facts["topics"]
    assert facts["groups"]["kept"] == {} and facts["groups"]["error"] is None, facts["groups"]
    assert (run_dir / "nodes" / "n1" / "server.log").stat().st_size > 0
    _damage_files_opted_in(inventory, dirs, bootstrap, tmp_path / "files")
    for i, d in enumerate(dirs, 1):
        pid = (d / "kafka.pid").read_text().strip()
        assert subprocess.run(["kill", "-0", pid]).returncode == 0, f"n{i} is not running"
        assert _files(d) == before[d], d
    assert ssh_hosts.chain_rules() == []
    assert (sorted(remote.rglob("*")) if remote.exists() else []) == uploads
    down = kafka_chaos("cluster", "down", "--backend", "ssh-attach", "--inventory",
                       str(inventory))
    assert down_removed(down) == [], down.stdout


def _damage_files_opted_in(inventory: Path, dirs: list[Path], bootstrap: str,
                           out: Path) -> None:
    """File faults on the operator's brokers: refused without ``data_dir`` in the inventory,
    then done over SFTP in the one it names (the leader's segment cut, nothing lost)."""
    flags = ("run", "--backend", "ssh-attach", "--bootstrap-servers", bootstrap,
             "--scenario", "truncated-leader-segment", "--time-limit", "60", "--seed", "2",
             "--damage-files", "--out", str(out))
    refused = kafka_chaos(*flags, "--inventory", str(inventory))
    assert refused.returncode != 0 and "names no data_dir" in refused.stdout + refused.stderr
    hosts = yaml.safe_load(inventory.read_text())
    for node, d in zip(hosts["nodes"], dirs):
        node["data_dir"] = str(d / "data")
    opted = inventory.with_name("hosts-files.yaml")
    opted.write_text(yaml.safe_dump(hosts))
    proc = kafka_chaos(*flags, "--inventory", str(opted))
    run = out / "latest"
    res = results_of(run, proc)
    assert res["run"]["scenario"]["steps_done"] == 6, res["run"]["scenario"]
    ops = read_history(run / "history.jsonl")
    [cut_op] = [op.value for op in ops if op.process == "nemesis" and op.f == "truncate"
                and op.type.value == "ok"]
    [(name, d)] = cut_op["damaged"].items()
    assert d["kind"] == "segment" and d["size"][1] == d["region"][0] < d["size"][0], d
    acked = {m[2][0] for op in ops if op.f == "send" and op.type.value == "ok"
             for m in op.value if m[1] == 0}
    assert {o for lo, hi in d["offsets"] for o in range(lo, hi + 1)} & acked, d
    nothing_lost(res)
    assert proc.returncode == 0 and res["verdict"] == "valid", res.get("unknown_reasons")
