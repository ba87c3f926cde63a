"""Broker/controller ``server.properties`` and logging configuration for one node."""

from __future__ import annotations

from kafka_chaos.clusters.base import Node

#: Test defaults on top of Kafka's own: small, fast-failing-over clusters. The run's
#: configuration overrides any of these.
TEST_DEFAULTS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "replica.lag.time.max.ms": "10000",
    # KRaft re-checks offline partitions for unclean election this often (default 5 min)
    "unclean.leader.election.interval.ms": "1000",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    # fence a SIGKILLed broker after 4 s instead of 9 s
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "controlled.shutdown.enable": "true",
    "log.segment.bytes": "16777216",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "log.cleaner.enable": "false",
}


def server_properties(node: Node, nodes: list[Node], data_dir: str,
                      overrides: dict[str, str], dynamic: bool = False,
                      metadata_dir: str | None = None) -> str:
    """Render ``server.properties`` for ``node`` in a KRaft cluster of ``nodes``.

    Controllers form a static quorum (``controller.quorum.voters``), which both 3.9 and 4.x
    accept, or with ``dynamic`` a dynamic one (KIP-853, Kafka 3.9+: the nodes find it through
    ``controller.quorum.bootstrap.servers`` and the voters are in the metadata log, written by
    ``StorageTool format --initial-controllers``: ``initial_controllers``), whose voters can be
    added and removed. ``overrides`` wins over ``TEST_DEFAULTS``; replication factors are
    capped at the broker count. ``metadata_dir``: the ``metadata.log.dir`` (default: the first
    of ``log.dirs``), so that a controller's metadata can be wiped alone.
    """
    brokers = [n for n in nodes if n.is_broker]
    controllers = [n for n in nodes if n.is_controller]
    quorum = (("controller.quorum.bootstrap.servers",
               ",".join(f"{n.host}:{n.controller_port}" for n in controllers)) if dynamic else
              ("controller.quorum.voters",
               ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in controllers)))
    props: dict[str, str] = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.node_id),
        quorum[0]: quorum[1],
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": data_dir,
    }
    if metadata_dir:
        props["metadata.log.dir"] = metadata_dir
    listeners = []
    if node.is_broker:
        listeners.append(f"PLAINTEXT://{node.host}:{node.broker_port}")
        props["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.broker_port}"
        props["inter.broker.listener.name"] = "PLAINTEXT"
    if node.is_controller:
        listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
    props["listeners"] = ",".join(listeners)
    merged = {**TEST_DEFAULTS, **overrides}
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor"):
        merged[key] = str(min(int(merged[key]), len(brokers)))
    for key in ("min.insync.replicas", "transaction.state.log.min.isr"):
        merged[key] = str(min(int(merged[key]), len(brokers)))
    props.update(merged)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def initial_controllers(nodes: list[Node], directory_ids: dict[int, str]) -> str:
    """``StorageTool format --initial-controllers``' value for a dynamic quorum (KIP-853):
    ``id@host:port:directory id`` of every controller of ``nodes``, comma-separated; the
    directory ids (``directory_ids``: node id -> base64 Kafka ``Uuid``) become each voter's
    ``directory.id`` in its ``meta.properties``."""
    return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}:{directory_ids[n.node_id]}"
                    for n in nodes if n.is_controller)


def quorum_format_args(nodes: list[Node], directory_ids: dict[int, str]) -> dict[int, list[str]]:
    """``StorageTool format``'s dynamic-quorum arguments per node id (KIP-853):
    ``--initial-controllers`` with every controller (``initial_controllers``) for a
    controller, ``--no-initial-controllers`` for a broker-only node."""
    voters = initial_controllers(nodes, directory_ids)
    return {n.node_id: ["--initial-controllers", voters] if n.is_controller
            else ["--no-initial-controllers"] for n in nodes}


LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d{yyyy-MM-dd HH:mm:ss,SSSXXX}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

LOG4J1 = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d{yyyy-MM-dd HH:mm:ss,SSSZ}] %p %m (%c)%n
"""
