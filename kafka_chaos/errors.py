"""Every error kafka-chaos raises on purpose, defined here in one tree (drawn once, as httpx's
``_exceptions.py`` draws its own), and the exit code the CLI gives each (``cli.edge``):

    KafkaChaosError                  255: the tool failed while it ran
    ├── BadInput                     254: what the user must fix; nothing was started
    │   ├── HistoryError             a malformed history or op sequence (history/store.py)
    │   ├── YamlFileError            a plan, scenario or inventory file (clusters/yamlfile.py)
    │   ├── CompareError             a comparison that cannot be made or resumed (compare/core.py)
    │   ├── ShrinkError              a run whose schedule cannot be replayed (shrink.py)
    │   ├── ReportError              a missing or malformed results.json (report/html.py)
    │   ├── PublishError             no history to publish, or its destination is taken
    │   ├── DistributionError *      a Kafka version or Java that cannot be used
    │   ├── EnvironmentUnsupported * not root, no network namespaces, no iptables
    │   ├── Refused *                an attached cluster refused the secrets or a permission
    │   ├── SecurityError *          a client properties file that cannot be used
    │   ├── Unreachable *            no bootstrap server of a cluster to attach to answers
    │   └── ServerBusy †             a Spark Connect server already runs, or its port is taken
    ├── ClusterError                 a cluster could not be provided or controlled (clusters/)
    │   ├── (the five marked *)
    │   ├── NotReady                 the cluster did not become ready in time
    │   ├── CommandFailed            a command on a node exited non-zero (has ``.result``)
    │   ├── SshError                 a host that cannot be reached or whose key is unknown
    │   └── WireError                a broker did not answer a request, or its reply was unreadable
    ├── OAuthError                   no OAUTHBEARER token could be had (clusters/oauth.py)
    ├── NemesisError                 a fault that cannot be injected (nemesis/)
    ├── ProxyError                   the Kafka-protocol proxy could not listen (nemesis/proxy/)
    ├── ClientError                  a client driver could not start or died (workloads/)
    │   ├── JavaClientError          the Java driver: no javac, a compile error, its JVM died
    │   └── ChildClientError         a child process did not start its clients, or another
    │                                confluent-kafka release could not be installed
    ├── WaitTimeout                  a bounded wait expired (also a TimeoutError; waiting.py)
    ├── AnalysisError                Spark failed outside a checker (analysis/verdict.py)
    ├── RemoteError                  a URL that cannot be used (analysis/remote.py)
    ├── CdsError                     the class archive could not be built (analysis/cds.py)
    └── ServerError                  the Spark Connect server could not start (analysis/server.py)
        └── ServerBusy †

Each keeps the built-in class it had (``ValueError`` for bad input, ``RuntimeError`` for a
failure), so code that caught those still does; the CLI catches ``KafkaChaosError`` once for
every command and exits with its ``exit_code``. The modules named above import their classes
from here (and re-export them). This module imports nothing: every package can raise from it.
"""

from __future__ import annotations


class KafkaChaosError(Exception):
    """Root of every error kafka-chaos raises on purpose; ``exit_code`` 255."""

    exit_code = 255


class BadInput(KafkaChaosError):
    """Input the user must fix (an option, a file, the machine); ``exit_code`` 254."""

    exit_code = 254


# --- bad input of the tool's own files and commands

class HistoryError(BadInput, ValueError):
    """A history file or op sequence is malformed; the message names the line or op index."""


class YamlFileError(BadInput, ValueError):
    """A YAML file is unreadable, not YAML, or does not match its model; the message names
    the file, the line and the key path of the first problem."""


class CompareError(BadInput, ValueError):
    """A comparison that cannot start or resume; the message names the option, file or cell."""


class ShrinkError(BadInput, ValueError):
    """A run that cannot be shrunk (no client op, a fault a replay cannot express, a bad
    ``--need``); the message says which and why."""


class ReportError(BadInput, ValueError):
    """A run directory the report cannot be built from; the message names the file."""


class PublishError(BadInput, ValueError):
    """The run directory cannot be published: no history, or the destination holds one of
    that name already (nothing is overwritten); or a URL holds no run directory to fetch."""


# --- clusters/

class ClusterError(KafkaChaosError, RuntimeError):
    """A cluster could not be provided or controlled: root of ``clusters/``'s errors."""


class DistributionError(ClusterError, BadInput):
    """The Kafka distribution (jars or ``--kafka-home``) or Java is unusable."""


class EnvironmentUnsupported(ClusterError, BadInput):
    """This machine cannot run the backend (privileges, kernel features, tools)."""


class Refused(ClusterError, BadInput):
    """A cluster the tool attached to refused what the run needs: the client properties'
    credentials, a permission (an ACL: create or delete topics, describe or alter configs),
    or the replication the run asked for. Raised before any fault."""


class SecurityError(ClusterError, BadInput):
    """A client properties file that cannot be used: the message names the file, the line
    and the key (never a secret's value)."""


class Unreachable(ClusterError, BadInput):
    """No bootstrap server of a cluster the tool attaches to answers (a wrong address, a
    cluster that is down, a firewall): the user's to fix, and nothing was started."""


class NotReady(ClusterError):
    """Bounded wait for readiness expired; the message carries the reason and log tails."""


class CommandFailed(ClusterError):
    """A command exited non-zero. ``result`` is the ``ExecResult``."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class SshError(ClusterError):
    """A host cannot be reached, refuses our key, or its host key is unknown or changed."""


class WireError(ClusterError):
    """The node did not answer a Kafka-protocol request, or the reply could not be read."""


class OAuthError(KafkaChaosError, RuntimeError):
    """No token: the token endpoint refused or did not answer, or the configuration names
    no principal."""


# --- nemesis/ and workloads/

class NemesisError(KafkaChaosError, RuntimeError):
    """The nemesis cannot do what it was asked (e.g. no such ability, unknown ``f``)."""


class ProxyError(KafkaChaosError, RuntimeError):
    """The proxy could not listen, or its loop did not answer."""


class ClientError(KafkaChaosError, RuntimeError):
    """A client driver of the workload could not start, or died while it ran."""


class JavaClientError(ClientError):
    """The Java client driver could not be built or started, or its JVM died."""


class ChildClientError(ClientError):
    """A child process did not start its clients, or another confluent-kafka release could
    not be installed (``workloads/pyclients.py``)."""


class WaitTimeout(KafkaChaosError, TimeoutError):
    """``wait_until``'s condition did not hold within its time; the message says what was
    awaited and for how many seconds."""


# --- analysis/

class AnalysisError(KafkaChaosError, RuntimeError):
    """Spark failed outside a checker: it could not start, or could not load or count the ops.

    Not raised for bad input (that is ``HistoryError``), nor when a single checker fails (that
    makes the result ``"unknown"``).
    """


class RemoteError(KafkaChaosError, RuntimeError):
    """A URL that cannot be used: no file system for its scheme, nothing there, or a Hadoop
    I/O error (the message names the URL and the Java exception)."""


class CdsError(KafkaChaosError, RuntimeError):
    """``build`` could not make the archive (the message holds the end of its child's output),
    or archives are turned off (``ENV``)."""


class ServerError(KafkaChaosError, RuntimeError):
    """The server could not start (the message holds its log's tail), a server already runs
    for the folder, or the port is taken (``ServerBusy``)."""


class ServerBusy(ServerError, BadInput):
    """A server already runs for the folder, or the port is taken: nothing was started, and
    another folder or port would do."""
