"""The one place a cluster backend is chosen: runner, CLI and tests name a backend here and get
the ``Cluster`` interface back; nothing else imports a backend module.

A backend is a ``Backend`` record of four callables, each given the user's ``BackendOptions``.
Adding one means writing its module in ``clusters/`` and one entry in ``_BACKENDS``;
``tests/integration/test_conformance.py`` then runs the shared conformance checks against it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from kafka_chaos.clusters.base import Cluster
from kafka_chaos.clusters.dist import KafkaDist
from kafka_chaos.clusters.errors import EnvironmentUnsupported


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    """What the user says about where the cluster runs, beyond its shape.

    Attributes:
        image: docker: the Kafka image (None: ``apache/kafka:<version>``).
        inventory: ssh: the inventory YAML (``clusters/inventory.py``); required to create a
            cluster, optional for ``cleanup`` (reaches hosts no state file records).
        accept_unknown_host_keys: ssh: accept (and log) host keys ``known_hosts`` lacks.
        lossy_fs: give each node's data directory a filesystem that can lose what was not
            fsynced (``clusters.lossyfs``), for the ``LosesUnsynced`` ability; local only.
        clock: run each broker under libfaketime (``clusters.faketime``), for the
            ``Skewable`` ability.
    """

    image: str | None = None
    inventory: Path | None = None
    accept_unknown_host_keys: bool = False
    lossy_fs: bool = False
    clock: bool = False


@dataclasses.dataclass(frozen=True)
class Backend:
    """What the rest of the tool may do with a backend.

    Attributes:
        name: the ``--backend`` value.
        check_environment: ``(options, brokers, controllers)``; raises
            ``EnvironmentUnsupported`` (with the fix) when this machine or these options cannot
            host such a cluster; cheap, called before any run directory exists.
        create: ``(dist, work_dir, brokers, controllers, broker_config, options) -> Cluster``,
            not set up (``brokers``, ``controllers``: counts of broker and controller-only nodes).
        status: ``(options)`` -> the recorded cluster as ``{"nodes": [{node_id, name, host,
            roles}], "alive": {node_id: bool}, "bootstrap_servers": str}``, or None.
        cleanup: ``(options)`` -> removes everything a cluster of this backend left (also after
            a SIGKILLed run); returns what was removed, for the user; never raises.
    """

    name: str
    check_environment: Callable[[BackendOptions, int, int], None]
    create: Callable[[KafkaDist, Path, int, int, dict[str, str], BackendOptions], Cluster]
    status: Callable[[BackendOptions], dict | None]
    cleanup: Callable[[BackendOptions], list[str]]


def _no_options(backend: str, options: BackendOptions) -> None:
    if options.lossy_fs and backend != "local":
        raise EnvironmentUnsupported(
            f"losing un-fsynced writes needs --backend local, not {backend}: it mounts a FUSE "
            "filesystem of ours (clusters/lossyfs.py) under each broker's data directory, which "
            "the Kafka image and the ssh hosts do not run")
    if options.clock and backend not in ("local", "ssh"):
        raise EnvironmentUnsupported(
            f"clock faults need --backend local or ssh, not {backend}: they preload libfaketime "
            "into each broker JVM, and the Kafka image has no libfaketime")
    if options.image is not None:
        raise EnvironmentUnsupported(f"--image needs --backend docker, not {backend}")
    if options.inventory is not None:
        raise EnvironmentUnsupported(f"--inventory needs --backend ssh, not {backend}")


def _local() -> Backend:
    from kafka_chaos.clusters import local, netns

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _no_options("local", options)
        netns.check_environment()

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        _no_options("local", options)
        return local.LocalCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                  broker_config=broker_config, lossy_fs=options.lossy_fs,
                                  clock=options.clock)

    return Backend("local", check, create, lambda options: local.recorded_state(),
                   lambda options: local.cleanup_leftovers())


def _docker() -> Backend:
    from kafka_chaos.clusters import docker_backend as docker

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _no_options("docker", dataclasses.replace(options, image=None))
        docker.check_environment()
        if options.image is not None:  # the default image is checked (and named) at setup
            docker.check_image(options.image)

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        return docker.DockerCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                    broker_config=broker_config, image=options.image)

    return Backend("docker", check, create, lambda options: docker.status(),
                   lambda options: docker.cleanup_leftovers())


def _ssh() -> Backend:
    from kafka_chaos.clusters import inventory, ssh_backend as ssh

    def hosts(options: BackendOptions, brokers: int | None = None, controllers: int = 0):
        if options.image is not None:
            raise EnvironmentUnsupported("--image needs --backend docker, not ssh")
        if options.inventory is None:
            raise EnvironmentUnsupported("--backend ssh needs --inventory FILE (the hosts; "
                                         "see clusters/inventory.py or the README)")
        found = inventory.load(options.inventory)
        if brokers is not None:
            inventory.check_shape(found, brokers, controllers, options.inventory)
        return found

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _no_options("ssh", dataclasses.replace(options, inventory=None))
        hosts(options, brokers, controllers)

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        return ssh.SshCluster(dist, work_dir, hosts(options, brokers, controllers),
                              broker_config, options.accept_unknown_host_keys,
                              clock=options.clock)

    def cleanup(options: BackendOptions) -> list[str]:
        try:
            found = hosts(options) if options.inventory is not None else None
        except EnvironmentUnsupported as exc:
            return [f"NOT cleaned: {exc}"]
        return ssh.cleanup_leftovers(hosts=found,
                                     accept_unknown_host_keys=options.accept_unknown_host_keys)

    return Backend("ssh", check, create,
                   lambda options: ssh.status(), cleanup)


_BACKENDS: dict[str, Callable[[], Backend]] = {"local": _local, "docker": _docker, "ssh": _ssh}

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
