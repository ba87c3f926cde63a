"""A secured Kafka cluster brought up the way users bring theirs up, not by the tool: a
compose file run by ``docker-compose`` (Debian's 1.29 here), three KRaft nodes of the image
built locally (``clusters.docker_image``), each with its own ``server.properties``:

- ``SASL_SSL`` on port 9092: SCRAM-SHA-512 users ``chaos`` (a super user) and ``limited``
  (no ACL at all), formatted into the metadata (KIP-900);
- ``SSL`` on port 9094: mutual TLS, the client certificate's subject ``CN=chaos`` a super
  user;
- ``INTERNAL`` (plaintext, 9091) between brokers and ``CONTROLLER`` (9093), reachable by
  nothing but the compose network in a real deployment, here also by this host;
- ``StandardAuthorizer``: whoever has no ACL may do nothing (``limited``).

Compose labels the containers ``com.docker.compose.project=<project>``, as any compose
cluster a user runs.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import yaml

from kafka_chaos.clusters.local import kafka_uuid
from tests.certs import authority

SUBNET = "10.81.0"
SECRET = "Compose-SCRAM-4-chaos"
LIMITED_SECRET = "Compose-SCRAM-4-limited"
NODES = (1, 2, 3)


def host(node_id: int) -> str:
    """The fixed address of node ``node_id`` on the compose network."""
    return f"{SUBNET}.{10 + node_id}"


def _server_properties(node_id: int) -> str:
    voters = ",".join(f"{n}@{host(n)}:9093" for n in NODES)
    me = host(node_id)
    return "\n".join([
        "process.roles=broker,controller", f"node.id={node_id}",
        f"controller.quorum.voters={voters}", "controller.listener.names=CONTROLLER",
        f"listeners=INTERNAL://{me}:9091,SASL_SSL://{me}:9092,SSL://{me}:9094,"
        f"CONTROLLER://{me}:9093",
        f"advertised.listeners=INTERNAL://{me}:9091,SASL_SSL://{me}:9092,SSL://{me}:9094",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,"
        "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL", "log.dirs=/var/lib/kafka/data",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type=PEM", "ssl.keystore.location=/etc/kafka/secrets/broker-keystore.pem",
        "ssl.truststore.type=PEM", "ssl.truststore.location=/etc/kafka/secrets/ca.pem",
        "listener.name.ssl.ssl.client.auth=required",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS;User:chaos;User:CN=chaos",
        "default.replication.factor=3", "min.insync.replicas=2",
        "offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3",
        "transaction.state.log.min.isr=2", "auto.create.topics.enable=false",
        "group.initial.rebalance.delay.ms=0", "unclean.leader.election.enable=false",
        "broker.heartbeat.interval.ms=500", "broker.session.timeout.ms=4000",
        "replica.lag.time.max.ms=10000", "num.network.threads=2", "num.io.threads=2",
        "log.cleaner.enable=false", ""])


LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = /var/log/kafka/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


def write(folder: Path, image: str) -> dict:
    """Write the compose project into ``folder``: ``docker-compose.yml``, ``n<id>/`` (its
    ``server.properties``, ``log4j2.properties``, ``logs/``) and ``secrets/`` (CA, broker
    and client certificates). Returns ``{"compose": path, "files": certificate paths}``."""
    secrets = folder / "secrets"
    secrets.mkdir(parents=True)
    # the client certificate's subject is CN=chaos, the mTLS super user
    files = authority(secrets, {"broker": [host(n) for n in NODES], "chaos": []})
    (secrets / "broker-keystore.pem").write_bytes(files["broker.key"].read_bytes()
                                                  + files["broker"].read_bytes())
    cluster_id = kafka_uuid()
    java = "java -Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 " \
        "-Dlog4j2.configurationFile=/etc/kafka/log4j2.properties -cp '/opt/kafka/libs/*'"
    fmt = (f"java -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format -t {cluster_id} "
           "-c /etc/kafka/server.properties --ignore-formatted "
           f"--add-scram 'SCRAM-SHA-512=[name=chaos,password={SECRET}]' "
           f"--add-scram 'SCRAM-SHA-512=[name=limited,password={LIMITED_SECRET}]'")
    services = {}
    for n in NODES:
        d = folder / f"n{n}"
        (d / "logs").mkdir(parents=True)
        (d / "server.properties").write_text(_server_properties(n))
        (d / "log4j2.properties").write_text(LOG4J2)
        services[f"kafka{n}"] = {
            "image": image, "hostname": f"kafka{n}", "user": "0", "entrypoint": [],
            "command": ["sh", "-c", f"{fmt} && exec {java} kafka.Kafka "
                        "/etc/kafka/server.properties"],
            "volumes": [f"{d}/server.properties:/etc/kafka/server.properties:ro",
                        f"{d}/log4j2.properties:/etc/kafka/log4j2.properties:ro",
                        f"{d}/logs:/var/log/kafka", f"{secrets}:/etc/kafka/secrets:ro"],
            "networks": {"kafka": {"ipv4_address": host(n)}}}
    compose = {"version": "2.4", "services": services, "networks": {"kafka": {
        "ipam": {"config": [{"subnet": f"{SUBNET}.0/24", "gateway": f"{SUBNET}.1"}]}}}}
    path = folder / "docker-compose.yml"
    path.write_text(yaml.safe_dump(compose, sort_keys=False))
    return {"compose": path, "files": files}


def compose(project: str, path: Path, *args: str, timeout_s: float = 300
            ) -> subprocess.CompletedProcess:
    """``docker-compose -p project -f path args...``; raises ``AssertionError`` with its
    output when it fails."""
    proc = subprocess.run(["docker-compose", "-p", project, "-f", str(path), *args],
                          capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def checksum(records: list[tuple[int, bytes | None, bytes | None]]) -> str:
    """SHA-256 over ``(offset, key, value)`` triples, in offset order."""
    h = hashlib.sha256()
    for offset, key, value in sorted(records, key=lambda r: r[0]):
        h.update(f"{offset}:{(key or b'').hex()}:{(value or b'').hex()}\n".encode())
    return h.hexdigest()
