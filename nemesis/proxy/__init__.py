"""A Kafka protocol proxy between the workload's clients and the brokers (``server``), and
the part of the protocol it speaks (``codec``)."""

from kafka_chaos.nemesis.proxy.server import KafkaProxy, ProxyError

__all__ = ["KafkaProxy", "ProxyError"]
