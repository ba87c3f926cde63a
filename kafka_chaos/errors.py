"""Every error kafka-chaos raises on purpose, in one tree (drawn once, as httpx's
``_exceptions.py`` draws its own), and the exit code the CLI gives each (``verdict``):

    KafkaChaosError                  255: the tool failed while it ran
    ├── BadInput                     254: what the user must fix; nothing was started
    │   ├── HistoryError             a malformed history or op sequence (history/store.py)
    │   ├── YamlFileError            a plan, scenario or inventory file (clusters/yamlfile.py)
    │   ├── CompareError             a comparison that cannot be made or resumed (compare/core.py)
    │   ├── ReportError              a missing or malformed results.json (report/html.py)
    │   ├── DistributionError        a Kafka version or Java that cannot be used (also a ClusterError)
    │   ├── EnvironmentUnsupported   not root, no network namespaces, no iptables (also a ClusterError)
    │   ├── Refused, SecurityError   an attached cluster refused the secrets or a permission; a
    │   │                            client properties file that cannot be used (clusters/)
    │   └── ServerBusy               a Spark Connect server already runs, or its port is taken
    ├── ClusterError                 a cluster could not be provided or controlled (clusters/errors.py)
    │   ├── NotReady, CommandFailed, SshError
    │   └── WireError                a broker did not answer a request, or its reply was unreadable
    ├── OAuthError                   no OAUTHBEARER token could be had (clusters/oauth.py)
    ├── NemesisError                 a fault that cannot be injected (nemesis/base.py)
    ├── AnalysisError                Spark failed outside a checker (analysis/verdict.py)
    ├── RemoteError                  a URL that cannot be used (analysis/remote.py)
    ├── CdsError, ServerError        the class archive, the Spark Connect server (analysis/)
    └── PublishError                 a run directory that cannot be copied (publish.py)

Each keeps the built-in class it had (``ValueError`` for bad input, ``RuntimeError`` for a
failure), so code that caught those still does; a caller that only needs "any error of
ours" catches ``KafkaChaosError`` and exits with its ``exit_code``. This module imports
nothing: every package can raise from the tree.
"""

from __future__ import annotations


class KafkaChaosError(Exception):
    """Root of every error kafka-chaos raises on purpose; ``exit_code`` 255."""

    exit_code = 255


class BadInput(KafkaChaosError):
    """Input the user must fix (an option, a file, the machine); ``exit_code`` 254."""

    exit_code = 254
