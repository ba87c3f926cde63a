"""The one place a cluster backend is chosen: runner, CLI and tests name a backend here and get
the ``Cluster`` interface back; nothing else imports a backend module.

A backend is a ``Backend`` record of four callables. Adding one means writing its module in
``clusters/`` and one entry in ``_BACKENDS``; ``tests/integration/test_conformance.py`` then runs
the shared conformance checks against it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from clusters.base import Cluster
from clusters.dist import KafkaDist
from clusters.errors import EnvironmentUnsupported


@dataclasses.dataclass(frozen=True)
class Backend:
    """What the rest of the tool may do with a backend.

    Attributes:
        name: the ``--backend`` value.
        check_environment: raises ``EnvironmentUnsupported`` (with the fix) when this machine
            cannot run the backend; cheap, called before any run directory exists.
        create: ``(dist, work_dir, brokers, controllers, broker_config, image) -> Cluster``,
            not set up; ``image`` (a container image, None: the backend's default) only where
            the backend runs images.
        status: the recorded cluster as ``{"nodes": [{node_id, name, host, roles}], "alive":
            {node_id: bool}, "bootstrap_servers": str}``, or None when none is recorded.
        cleanup: removes everything a cluster of this backend left (also after a SIGKILLed
            run); returns what was removed, for the user; never raises.
    """

    name: str
    check_environment: Callable[[], None]
    create: Callable[[KafkaDist, Path, int, int, dict[str, str], str | None], Cluster]
    status: Callable[[], dict | None]
    cleanup: Callable[[], list[str]]


def _local() -> Backend:
    from clusters import local, netns

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], image: str | None = None) -> Cluster:
        if image is not None:
            raise EnvironmentUnsupported("--image needs --backend docker: the local backend "
                                         "runs the Kafka jars of the Maven cache")
        return local.LocalCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                  broker_config=broker_config)

    return Backend("local", netns.check_environment, create, local.recorded_state,
                   local.cleanup_leftovers)


def _docker() -> Backend:
    from clusters import docker_backend as docker

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], image: str | None = None) -> Cluster:
        return docker.DockerCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                    broker_config=broker_config, image=image)

    return Backend("docker", docker.check_environment, create, docker.status,
                   docker.cleanup_leftovers)


_BACKENDS: dict[str, Callable[[], Backend]] = {"local": _local, "docker": _docker}

#: ``--backend`` values, the embedded default first.
NAMES: tuple[str, ...] = tuple(_BACKENDS)


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises ``EnvironmentUnsupported`` naming the known backends when ``name`` is not one.
    """
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise EnvironmentUnsupported(
            f"unknown cluster backend {name!r}: choose one of {', '.join(NAMES)}") from None
    return factory()
