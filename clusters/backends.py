"""The one place a cluster backend is chosen: runner, CLI and tests name a backend here and get
the ``Cluster`` interface back; nothing else imports a backend module.

A backend is a ``Backend`` record of four callables, each given the user's ``BackendOptions``.
Adding one means writing its module in ``clusters/``, one entry in ``_BACKENDS`` and its
name in ``OWN`` or ``ATTACHING`` (``kafka_chaos.catalogue.backends``, named here too);
``tests/integration/test_conformance.py`` then runs the shared conformance checks against
each of ``OWN``. An attaching backend makes and removes
nothing of the cluster (``Cluster.owned`` false; ``docs/attach.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from kafka_chaos.catalogue.backends import ATTACHING, NAMES, OWN  # noqa: F401
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
        bootstrap_servers: external: ``host:port,...`` of the running cluster's listener.
        client_properties: how the tool's clients reach that listener (TLS, SASL): a client
            properties file (``clusters.security``); None: plaintext.
        compose_project: docker-attach: the Compose project whose containers run the brokers.
        containers: docker-attach: or the containers, by name.
        fault_last_broker: docker-attach, ssh-attach: let a fault take the last running
            broker (refused by default: ``external.spare_last_broker``).
    """

    image: str | None = None
    inventory: Path | None = None
    accept_unknown_host_keys: bool = False
    lossy_fs: bool = False
    clock: bool = False
    bootstrap_servers: str | None = None
    client_properties: Path | None = None
    compose_project: str | None = None
    containers: tuple[str, ...] = ()
    fault_last_broker: bool = False


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
    if options.bootstrap_servers is not None or options.client_properties is not None:
        raise EnvironmentUnsupported(f"--bootstrap-servers and --client-properties attach to "
                                     f"a running cluster (--backend {' or '.join(ATTACHING)}), "
                                     f"not {backend}, which makes its own")
    if options.fault_last_broker:
        raise EnvironmentUnsupported(f"--fault-last-broker: --backend {backend} makes its own "
                                     "cluster, whose brokers every fault may take")
    if options.compose_project is not None or options.containers:
        raise EnvironmentUnsupported(f"--compose-project and --containers need --backend "
                                     f"docker-attach, not {backend}")


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


def _attached(name: str, options: BackendOptions):
    """Check the options of attaching backend ``name``; returns the client security (None:
    plaintext). Raises ``EnvironmentUnsupported``, ``SecurityError``."""
    from kafka_chaos.clusters import security

    _no_options(name, dataclasses.replace(
        options, bootstrap_servers=None, client_properties=None, fault_last_broker=False,
        **({"compose_project": None, "containers": ()} if name == "docker-attach" else {})))
    if not options.bootstrap_servers:
        raise EnvironmentUnsupported(f"--backend {name} needs --bootstrap-servers "
                                     "HOST:PORT,... (the running cluster's listener)")
    if options.client_properties is None:
        return None
    return security.load(options.client_properties)  # SecurityError names file:line: key


def _external() -> Backend:
    from kafka_chaos.clusters import external

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        return external.ExternalCluster(options.bootstrap_servers or "",
                                        _attached("external", options), work_dir)

    # nothing of an external cluster is the tool's to record or remove
    return Backend("external", lambda options, b, c: _attached("external", options), create,
                   lambda options: None, lambda options: [])


def _docker_attach() -> Backend:
    from kafka_chaos.clusters import docker_attach, docker_backend

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _attached("docker-attach", options)
        if (options.compose_project is None) == (not options.containers):
            raise EnvironmentUnsupported("--backend docker-attach needs --compose-project NAME "
                                         "or --containers NAME,... (one of the two)")
        docker_backend.check_environment()

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        check(options, brokers, controllers)
        cluster = docker_attach.AttachedDockerCluster(
            options.bootstrap_servers or "", _attached("docker-attach", options), work_dir,
            options.compose_project, list(options.containers))
        cluster.spare_last_broker = not options.fault_last_broker
        return cluster

    def cleanup(options: BackendOptions) -> list[str]:
        if options.compose_project is None and not options.containers:
            return ["NOT cleaned: name the cluster with --compose-project or --containers"]
        return docker_attach.undo(options.compose_project, list(options.containers))

    return Backend("docker-attach", check, create, lambda options: None, cleanup)


def _ssh_attach() -> Backend:
    from kafka_chaos.clusters import attach_inventory, ssh_attach

    def hosts(options: BackendOptions) -> list:
        if options.inventory is None:
            raise EnvironmentUnsupported("--backend ssh-attach needs --inventory FILE (the "
                                         "hosts and their start/stop commands; docs/attach.md)")
        return attach_inventory.load(options.inventory)

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _attached("ssh-attach", dataclasses.replace(options, inventory=None))
        hosts(options)

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        sec = _attached("ssh-attach", dataclasses.replace(options, inventory=None))
        cluster = ssh_attach.AttachedSshCluster(options.bootstrap_servers or "", sec, work_dir,
                                                hosts(options),
                                                options.accept_unknown_host_keys)
        cluster.spare_last_broker = not options.fault_last_broker
        return cluster

    def cleanup(options: BackendOptions) -> list[str]:
        try:
            found = hosts(options)
        except EnvironmentUnsupported as exc:
            return [f"NOT cleaned: {exc}"]
        return ssh_attach.undo(found, options.accept_unknown_host_keys)

    return Backend("ssh-attach", check, create, lambda options: None, cleanup)


_BACKENDS: dict[str, Callable[[], Backend]] = {"local": _local, "docker": _docker, "ssh": _ssh,
                                               "external": _external,
                                               "docker-attach": _docker_attach,
                                               "ssh-attach": _ssh_attach}


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
