"""The names of the cluster backends and the Kafka version a cluster of the tool's own runs by
default: what the settings model checks ``--backend`` and ``--kafka-version`` against. The
backends themselves are chosen in one place, ``clusters/backends.py``, whose registry holds
exactly these names (``tests/unit/test_catalogues.py``)."""

from __future__ import annotations

#: Backends that make a cluster of their own and remove it, the embedded default first
#: (each passes ``tests/integration/test_conformance.py``).
OWN: tuple[str, ...] = ("local", "docker", "ssh")
#: Backends that attach to a running cluster the tool did not create (``Cluster.owned``
#: false): they remove nothing of it.
ATTACHING: tuple[str, ...] = ("external", "docker-attach", "ssh-attach")
#: ``--backend`` values, the embedded default first.
NAMES: tuple[str, ...] = OWN + ATTACHING
#: The default Kafka version: the newest 4.x release on Maven Central when this was pinned.
DEFAULT_KAFKA_VERSION = "4.4.0"
