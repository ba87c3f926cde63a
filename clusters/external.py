"""The ``external`` backend: a running cluster the tool reaches by its bootstrap servers and
nothing else. Observe mode: no fault of ours; the faults are whatever happens to the cluster
while the workload runs (a rolling upgrade, a broker that dies), and the verdict's evidence is
what the monitor records.

The tool starts, stops, formats and removes nothing here: ``setup`` checks that the client
properties get in (one clear error for a wrong secret, where librdkafka's clients would only
retry) and learns the brokers from a Metadata answer; ``teardown`` does nothing (the run's
topics are the runner's to delete).
"""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.clusters import admin, wire
from kafka_chaos.clusters.base import Cluster, ExecResult, Node
from kafka_chaos.clusters.errors import ClusterError, Refused, Unreachable
from kafka_chaos.clusters.security import ClientSecurity

#: Words of a ``WireError`` that mean the listener refused how we came (TLS or SASL), not
#: that nothing answers.
_REFUSALS = ("SASL", "SSL", "TLS", "certificate")


def preflight(bootstrap: str, security: ClientSecurity | None, timeout_s: float = 10.0) -> str:
    """Connect to the bootstrap servers in turn, with TLS and SASL as ``security`` says, until
    one answers ``ApiVersions``; returns its ``host:port``.

    Raises ``Refused`` when every server refused the TLS handshake or the credentials (the
    message says which and names the client properties file, never a secret), and
    ``Unreachable`` (bad input, exit 254) when none answers at all."""
    errors = []
    for endpoint in [e.strip() for e in bootstrap.split(",") if e.strip()]:
        try:
            wire.api_versions(endpoint, timeout_s, security)
            return endpoint
        except wire.WireError as exc:
            errors.append(str(exc))
    source = (security.source if security and security.source
              else "plaintext (no --client-properties)")
    if any(word in e for e in errors for word in _REFUSALS):
        raise Refused(f"the cluster at {bootstrap} refused the client properties {source}: "
                      + "; ".join(errors))
    raise Unreachable(f"no bootstrap server of {bootstrap} answers: " + "; ".join(errors))


def discover(bootstrap: str, security: ClientSecurity | None) -> list[Node]:
    """The brokers of a Metadata answer, in ``node.id`` order: ``n<id>`` at the host and port
    of the listener asked (role ``broker``: what else a node does, Metadata does not say).
    Raises ``ClusterError`` when no answer comes within 15 s."""
    try:
        brokers = admin.client(bootstrap, 10.0, security).list_topics(timeout=15).brokers
    except Exception as exc:  # KafkaException: the first answer must come
        raise ClusterError(f"no metadata from {bootstrap}: {exc}") from None
    return [Node(b.id, f"n{b.id}", b.host, ("broker",), broker_port=b.port)
            for b in sorted(brokers.values(), key=lambda b: b.id)]


def spare_last_broker(cluster, node: Node, what: str) -> None:
    """Refuse (``ClusterError``) to ``what`` (kill, stop, pause) ``node`` of an attached
    ``cluster`` when no other broker would still serve (running and not paused), unless the
    run allows it (``cluster.spare_last_broker`` false: ``--fault-last-broker``)."""
    if not getattr(cluster, "spare_last_broker", True) or not node.is_broker:
        return
    serving = [n for n in cluster.brokers if n != node and cluster.is_running(n)
               and not cluster.is_paused(n)]
    if not serving:
        raise ClusterError(f"refused to {what} {node.name}: it is the last running broker of "
                           "a cluster the tool did not create (--fault-last-broker allows it)")


class ExternalCluster(Cluster):
    """A cluster the tool neither made nor controls.

    Args:
        bootstrap: ``host:port,...`` of the listener the tool's clients use.
        security: how that listener is reached (None: plaintext).
        work_dir: the run's node directory (kept empty: no broker logs are reachable).

    ``nodes`` are the brokers of the Metadata answer (``n<id>``, role ``broker``; a KRaft
    controller is asked through the brokers, which forward ``DescribeQuorum``) once ``setup``
    ran. ``start``, ``stop`` and ``exec`` raise ``ClusterError``: nothing here may touch the
    cluster's processes.
    """

    owned = False

    def __init__(self, bootstrap: str, security: ClientSecurity | None, work_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.work_dir = Path(work_dir)
        self.nodes: list[Node] = []

    @property
    def bootstrap_servers(self) -> str:
        """The user's bootstrap servers as given (their listener, not one of ours)."""
        return self.bootstrap

    def setup(self) -> None:
        """Check the way in (``preflight``) and learn the brokers. Raises ``Refused``,
        ``ClusterError``."""
        preflight(self.bootstrap, self.security)
        self.nodes = discover(self.bootstrap, self.security)

    def teardown(self) -> None:
        """Nothing: the cluster is the user's."""

    def _no(self, what: str) -> ClusterError:
        return ClusterError(f"{what}: the external backend observes a cluster and controls "
                            "none of its processes (attach with docker or ssh for faults)")

    def start(self, node: Node) -> None:
        raise self._no(f"starting {node.name}")

    def stop(self, node: Node, timeout_s: float = 30.0) -> None:
        raise self._no(f"stopping {node.name}")

    def is_running(self, node: Node) -> bool:
        """Whether the broker answers ``ApiVersions`` on its listener within a second."""
        return wire.answers(node.client_endpoint, 1.0, self.security)

    def exec(self, node: Node, argv: list[str], timeout_s: float = 30.0) -> ExecResult:
        raise self._no(f"running {argv[0]} on {node.name}")

    def log_files(self, node: Node) -> list[Path]:
        return []
