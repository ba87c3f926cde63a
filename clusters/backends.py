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
        dynamic_quorum: format a dynamic KRaft quorum (KIP-853), for the ``DynamicQuorum``
            ability (the membership faults); local only.
        bootstrap_servers: external: ``host:port,...`` of the running cluster's listener.
        client_properties: how the tool's clients reach that listener (TLS, SASL): a client
            properties file (``clusters.security``); None: plaintext.
        compose_project: docker-attach: the Compose project whose containers run the brokers.
        containers: docker-attach: or the containers, by name.
        fault_last_broker: docker-attach, ssh-attach: let a fault take the last running
            broker (refused by default: ``external.spare_last_broker``).
        damage_files: ssh-attach: the run's opt-in to file faults on brokers the tool did
            not create, in the ``data_dir`` its inventory names per node (``NodeFiles``).
    """

    image: str | None = None
    inventory: Path | None = None
    accept_unknown_host_keys: bool = False
    lossy_fs: bool = False
    clock: bool = False
    dynamic_quorum: bool = False
    bootstrap_servers: str | None = None
    client_properties: Path | None = None
    compose_project: str | None = None
    containers: tuple[str, ...] = ()
    fault_last_broker: bool = False
    damage_files: bool = False


@dataclasses.dataclass(frozen=True)
class Backend:
    """What the rest of the tool may do with a backend.

    Attributes:
        name: the ``--backend`` value.
        check_options: ``(options, brokers, controllers)``; raises ``EnvironmentUnsupported``
            (with the fix) when these options cannot go together or do not fit the shape, and
            the file's own error (``YamlFileError``, ``SecurityError``) when a file they name
            cannot be used (an inventory, a client properties file). Reads those files and
            nothing else: no network, no root, no daemon (``plan check`` without
            ``--online``).
        check_machine: ``(options)``; raises ``EnvironmentUnsupported`` when this machine
            cannot host or reach such a cluster (root, network namespaces, FUSE or libfaketime
            for the faults that need them, a Docker daemon or image). Cheap, called before
            any run directory exists; ``check_environment`` does both.
        create: ``(dist, work_dir, brokers, controllers, broker_config, options) -> Cluster``,
            not set up (``brokers``, ``controllers``: counts of broker and controller-only nodes).
        status: ``(options)`` -> the recorded cluster as ``{"nodes": [{node_id, name, host,
            roles}], "alive": {node_id: bool}, "bootstrap_servers": str}``, or None.
        cleanup: ``(options)`` -> removes everything a cluster of this backend left (also after
            a SIGKILLed run); returns what was removed, for the user; never raises.
    """

    name: str
    check_options: Callable[[BackendOptions, int, int], None]
    check_machine: Callable[[BackendOptions], None]
    create: Callable[[KafkaDist, Path, int, int, dict[str, str], BackendOptions], Cluster]
    status: Callable[[BackendOptions], dict | None]
    cleanup: Callable[[BackendOptions], list[str]]

    def check_environment(self, options: BackendOptions, brokers: int, controllers: int) -> None:
        """Everything a run checks of its backend before it starts: ``check_options``, then
        ``check_machine``. Raises as they do."""
        self.check_options(options, brokers, controllers)
        self.check_machine(options)


def _nothing(options: BackendOptions) -> None:
    """The machine check of a backend that needs nothing of this machine (its hosts or its
    cluster are reached when the run starts)."""


def _no_options(backend: str, options: BackendOptions) -> None:
    if options.lossy_fs and backend != "local":
        raise EnvironmentUnsupported(
            f"losing un-fsynced writes needs --backend local, not {backend}: it mounts a FUSE "
            "filesystem of ours (clusters/lossyfs.py) under each broker's data directory, which "
            "the Kafka image and the ssh hosts do not run")
    if options.dynamic_quorum and backend not in ("local", "docker", "ssh"):
        raise EnvironmentUnsupported(
            f"membership faults need --backend local, docker or ssh, not {backend}: they wipe "
            "and format a controller's metadata directory, which needs a cluster of our own")
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
    if options.damage_files:
        raise EnvironmentUnsupported(f"--damage-files needs --backend ssh-attach, not "
                                     f"{backend}: "
                                     + ("the file faults take a cluster of the tool's own "
                                        "without it" if backend in ("local", "docker", "ssh")
                                        else "only its inventory names the brokers' data "
                                        "directories"))


def _local() -> Backend:
    from kafka_chaos.clusters import faketime, local, lossymount, netns

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        _no_options("local", options)
        return local.LocalCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                  broker_config=broker_config, lossy_fs=options.lossy_fs,
                                  clock=options.clock, dynamic_quorum=options.dynamic_quorum)

    def machine(options: BackendOptions) -> None:
        netns.check_environment()
        if options.lossy_fs:
            lossymount.check_environment()
        if options.clock:
            faketime.check_environment()

    return Backend("local", lambda options, b, c: _no_options("local", options), machine, create,
                   lambda options: local.recorded_state(),
                   lambda options: local.cleanup_leftovers())


def _docker() -> Backend:
    from kafka_chaos.clusters import docker_backend as docker

    def options_check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _no_options("docker", dataclasses.replace(options, image=None))

    def machine(options: BackendOptions) -> None:
        docker.check_environment()
        if options.image is not None:  # the default image is checked (and named) at setup
            docker.check_image(options.image)

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        return docker.DockerCluster(dist, work_dir, brokers=brokers, controllers=controllers,
                                    broker_config=broker_config, image=options.image,
                                    dynamic_quorum=options.dynamic_quorum)

    return Backend("docker", options_check, machine, create, lambda options: docker.status(),
                   lambda options: docker.cleanup_leftovers())


def _ssh() -> Backend:
    # the SSH modules (paramiko) load when a cluster is made or cleaned, not to check options
    from kafka_chaos.clusters import inventory

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
        from kafka_chaos.clusters import ssh_backend as ssh

        return ssh.SshCluster(dist, work_dir, hosts(options, brokers, controllers),
                              broker_config, options.accept_unknown_host_keys,
                              clock=options.clock, dynamic_quorum=options.dynamic_quorum)

    def status(options: BackendOptions) -> dict | None:
        from kafka_chaos.clusters import ssh_backend as ssh

        return ssh.status()

    def cleanup(options: BackendOptions) -> list[str]:
        from kafka_chaos.clusters import ssh_backend as ssh

        try:
            found = hosts(options) if options.inventory is not None else None
        except EnvironmentUnsupported as exc:
            return [f"NOT cleaned: {exc}"]
        return ssh.cleanup_leftovers(hosts=found,
                                     accept_unknown_host_keys=options.accept_unknown_host_keys)

    return Backend("ssh", check, _nothing, create, status, cleanup)


def _security(options: BackendOptions):
    """The client security of ``options.client_properties`` (None: plaintext). Raises
    ``SecurityError`` naming the file, line and key."""
    from kafka_chaos.clusters import security

    if options.client_properties is None:
        return None
    return security.load(options.client_properties)


def _attached(name: str, options: BackendOptions):
    """Check the options of attaching backend ``name``; returns the client security (None:
    plaintext). Raises ``EnvironmentUnsupported``, ``SecurityError``."""
    _no_options(name, dataclasses.replace(
        options, bootstrap_servers=None, client_properties=None, fault_last_broker=False,
        **({"compose_project": None, "containers": ()} if name == "docker-attach" else {})))
    if not options.bootstrap_servers:
        raise EnvironmentUnsupported(f"--backend {name} needs --bootstrap-servers "
                                     "HOST:PORT,... (the running cluster's listener)")
    return _security(options)


def _external() -> Backend:
    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        from kafka_chaos.clusters import external

        return external.ExternalCluster(options.bootstrap_servers or "",
                                        _attached("external", options), work_dir)

    # nothing of an external cluster is the tool's to record or remove
    return Backend("external", lambda options, b, c: _attached("external", options), _nothing,
                   create, lambda options: None, lambda options: [])


def _docker_attach() -> Backend:
    from kafka_chaos.clusters import docker_backend

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _attached("docker-attach", options)
        if (options.compose_project is None) == (not options.containers):
            raise EnvironmentUnsupported("--backend docker-attach needs --compose-project NAME "
                                         "or --containers NAME,... (one of the two)")

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        from kafka_chaos.clusters import docker_attach

        check(options, brokers, controllers)
        docker_backend.check_environment()
        cluster = docker_attach.AttachedDockerCluster(
            options.bootstrap_servers or "", _attached("docker-attach", options), work_dir,
            options.compose_project, list(options.containers))
        cluster.spare_last_broker = not options.fault_last_broker
        return cluster

    def cleanup(options: BackendOptions) -> list[str]:
        from kafka_chaos.clusters import docker_attach

        if options.compose_project is None and not options.containers:
            return ["NOT cleaned: name the cluster with --compose-project or --containers"]
        return docker_attach.undo(options.compose_project, list(options.containers))

    return Backend("docker-attach", check, lambda options: docker_backend.check_environment(),
                   create, lambda options: None, cleanup)


def _ssh_attach() -> Backend:
    from kafka_chaos.clusters import attach_inventory

    def hosts(options: BackendOptions) -> list:
        if options.inventory is None:
            raise EnvironmentUnsupported("--backend ssh-attach needs --inventory FILE (the "
                                         "hosts and their start/stop commands; docs/attach.md)")
        return attach_inventory.load(options.inventory)

    def check(options: BackendOptions, brokers: int, controllers: int) -> None:
        _attached("ssh-attach", dataclasses.replace(options, inventory=None,
                                                    damage_files=False))
        found = hosts(options)
        if options.damage_files and (missing := [h.node_id for h in found
                                                 if h.data_dir is None]):
            raise EnvironmentUnsupported(f"--damage-files: the inventory {options.inventory} "
                                         f"names no data_dir (the broker's log.dirs) for "
                                         f"node ids {missing}")

    def create(dist: KafkaDist, work_dir: Path, brokers: int, controllers: int,
               broker_config: dict[str, str], options: BackendOptions) -> Cluster:
        from kafka_chaos.clusters import ssh_attach

        sec = _attached("ssh-attach", dataclasses.replace(options, inventory=None,
                                                          damage_files=False))
        kind = (ssh_attach.AttachedSshFilesCluster if options.damage_files
                else ssh_attach.AttachedSshCluster)
        cluster = kind(options.bootstrap_servers or "", sec, work_dir, hosts(options),
                       options.accept_unknown_host_keys)
        cluster.spare_last_broker = not options.fault_last_broker
        return cluster

    def cleanup(options: BackendOptions) -> list[str]:
        from kafka_chaos.clusters import ssh_attach

        try:
            found = hosts(options)
        except EnvironmentUnsupported as exc:
            return [f"NOT cleaned: {exc}"]
        return ssh_attach.undo(found, options.accept_unknown_host_keys)

    return Backend("ssh-attach", check, _nothing, create, lambda options: None, cleanup)


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


def reach(name: str, options: BackendOptions, timeout_s: float = 10.0) -> list[str] | None:
    """What a run's setup asks first of the cluster attaching backend ``name`` attaches to
    (``options`` checked already: ``Backend.check_options``): a bootstrap server that answers
    ``ApiVersions`` within ``timeout_s`` seconds, with the client properties' TLS and SASL
    (``external.preflight``), then its brokers (a Metadata answer, ``external.discover``).
    Returns the brokers' ``host:port``, or None for a backend that makes its own cluster
    (there is none to reach before a run). Raises ``Unreachable`` when no bootstrap server
    answers, ``Refused`` when each refused the TLS handshake or the credentials,
    ``ClusterError`` when no Metadata answer came."""
    if name not in ATTACHING:
        return None
    from kafka_chaos.clusters import external

    security = _security(options)
    external.preflight(options.bootstrap_servers or "", security, timeout_s)
    return [n.client_endpoint for n in external.discover(options.bootstrap_servers or "",
                                                          security)]
