"""A Kafka protocol proxy between the workload's clients and the brokers (``server``), and
the part of the protocol it speaks (``codec``).

``KafkaProxy`` and ``ProxyError`` come from ``server`` when first used (PEP 562): the
schedule and the scenario scripts import ``faults`` (the request faults' model) on every
command, and ``server`` loads kio's protocol types (0.7 s here; issue 50)."""

from kafka_chaos.lazy import face

__all__ = ["KafkaProxy", "ProxyError"]
__getattr__ = face(__name__, "server", __all__)
