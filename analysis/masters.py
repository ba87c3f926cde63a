"""Spark master URLs (Spark's "Master URLs"): their syntax, and whether one answers. Apart
from ``spark`` because neither needs pyspark: a run's first checks and ``plan check`` read
them without loading it (about a second of import; docs/performance.md, "Start-up")."""

from __future__ import annotations

import re
import socket

LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
STANDALONE = re.compile(r"spark://([^:/,]+:[0-9]+)(,[^:/,]+:[0-9]+)*")
CONNECT = re.compile(r"sc://([^:/;]+)(?::([0-9]+))?/?(;.*)?")
#: Spark Connect's default port (``spark.connect.grpc.binding.port``).
CONNECT_PORT = 15002


def endpoints(master: str) -> list[str]:
    """The ``host:port`` addresses of which one must answer for ``master`` to work: none for
    ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``yarn`` and ``k8s://...`` (Spark
    reaches those itself); every ``host:port`` of ``spark://host:port[,host:port...]``; the
    server of ``sc://host[:port][/;params]`` (port ``CONNECT_PORT`` by default). Looks at
    the text only. Raises ``ValueError`` naming the accepted forms."""
    if LOCAL.fullmatch(master) or master == "yarn" or master.startswith("k8s://"):
        return []
    connect = CONNECT.fullmatch(master)
    if connect:
        return [f"{connect[1]}:{connect[2] or CONNECT_PORT}"]
    if STANDALONE.fullmatch(master):
        return master.removeprefix("spark://").split(",")
    raise ValueError(f"{master!r} is not a Spark master URL (local[N], local[*], "
                     "spark://host:port, sc://host[:port], yarn, k8s://...)")


def check_master(master: str, timeout_s: float = 3.0) -> None:
    """Refuse a Spark master URL that cannot work, before a run spends minutes on it: its
    syntax (``endpoints``), then one of its ``endpoints`` must accept a TCP connection within
    ``timeout_s`` seconds. Raises ``ValueError`` naming the problem."""
    hostports = endpoints(master)
    errors = []
    for hostport in hostports:
        host, port = hostport.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            errors.append(f"{hostport}: {exc}")
    if errors:
        raise ValueError(f"{master!r}: no master answers ({'; '.join(errors)})")
