"""The errors of ``clusters/``: the ``ClusterError`` branch of the project's one tree
(``kafka_chaos.errors``, where each is defined and drawn), named here for the modules of this
package and their callers."""

from kafka_chaos.errors import (ClusterError, CommandFailed, DistributionError,
                                EnvironmentUnsupported, NotReady, Refused, SecurityError, SshError,
                                Unreachable, WireError)

__all__ = ["ClusterError", "CommandFailed", "DistributionError", "EnvironmentUnsupported",
           "NotReady", "Refused", "SecurityError", "SshError", "Unreachable", "WireError"]
