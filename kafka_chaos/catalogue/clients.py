"""The client catalogue: one record per client library the workload's processes may run on
(``--client``), with what the settings model must know of it before any client exists. The
drivers themselves are chosen in one place, ``workloads/drivers.py``, whose registry holds
exactly these names (``tests/unit/test_catalogues.py``)."""

from __future__ import annotations

import dataclasses

#: ``request.timeout.ms`` of every producer and consumer of the workload (ms): short, so that
#: a request to a faulted broker ends within the op.
REQUEST_TIMEOUT_MS = 3000


@dataclasses.dataclass(frozen=True)
class ClientKind:
    """One client library.

    Attributes:
        library: what its users call it (the package or artifact).
        follows_kafka: without ``--client-version`` it runs the release of
            ``--kafka-version`` (kafka-clients, from Maven Central); else the installed one
            (confluent-kafka; another release comes from PyPI, ``workloads/pyclients.py``).
        idempotent_by_default: ``enable.idempotence`` is on when the run leaves it unset and
            no setting conflicts (``acks`` not all, ``retries`` 0, over 5 requests in
            flight): the Java client since 3.0 (KIP-679, ProducerConfig since 3.2); off in
            librdkafka (CONFIGURATION.md).
        checks_delivery_timeout: it refuses ``delivery.timeout.ms`` below ``linger.ms +
            request.timeout.ms`` (the Java producer's ProducerConfig).
        share_since: the first version of it with share consumers (KIP-932); None: every
            version it runs has them or it cannot tell.
    """

    library: str
    follows_kafka: bool
    idempotent_by_default: bool
    checks_delivery_timeout: bool
    share_since: tuple[int, int] | None = None


#: name -> client library, the default first.
CLIENTS: dict[str, ClientKind] = {
    "librdkafka": ClientKind("librdkafka (confluent-kafka)", follows_kafka=False,
                             idempotent_by_default=False, checks_delivery_timeout=False,
                             # the first wheel with ShareConsumer (2.14.0 has none)
                             share_since=(2, 15)),
    "java": ClientKind("kafka-clients", follows_kafka=True, idempotent_by_default=True,
                       checks_delivery_timeout=True, share_since=(4, 2)),
}
#: ``--client`` values, the default first.
NAMES: tuple[str, ...] = tuple(CLIENTS)


def default_idempotence(client: str, acks: str, retries: int, max_in_flight: int) -> bool:
    """What ``enable.idempotence`` is when a run leaves it unset (``ClientKind.
    idempotent_by_default``); a driver reports what its producer really resolved
    (``JavaDriver.default_idempotence``)."""
    return (CLIENTS[client].idempotent_by_default and acks == "all" and retries > 0
            and max_in_flight <= 5)
