"""The exception tree of ``clusters/`` (drawn once, as httpx does), a branch of the project's
(``kafka_chaos.errors``; the two marked * are bad input there too, exit 254).

    ClusterError                 any failure to provide or control a cluster
    ├── DistributionError *      a Kafka version cannot be resolved / Java missing or too old
    ├── EnvironmentUnsupported * not root, no network namespaces, no iptables
    ├── Refused *                an attached cluster refused the tool's secrets or permissions
    ├── NotReady                 the cluster did not become ready in time (message has log tails)
    └── CommandFailed            a command on a node exited non-zero (has .result)
"""

from __future__ import annotations

from kafka_chaos.errors import BadInput, KafkaChaosError


class ClusterError(KafkaChaosError, RuntimeError):
    """Root of every error raised by ``clusters/``."""


class DistributionError(ClusterError, BadInput):
    """The Kafka distribution (jars or ``--kafka-home``) or Java is unusable."""


class EnvironmentUnsupported(ClusterError, BadInput):
    """This machine cannot run the backend (privileges, kernel features, tools)."""


class Refused(ClusterError, BadInput):
    """A cluster the tool attached to refused what the run needs: the client properties'
    credentials, a permission (an ACL: create or delete topics, describe or alter configs),
    or the replication the run asked for. Raised before any fault."""


class NotReady(ClusterError):
    """Bounded wait for readiness expired; the message carries the reason and log tails."""


class CommandFailed(ClusterError):
    """A command exited non-zero. ``result`` is the ``ExecResult``."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result
