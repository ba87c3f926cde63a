"""``kafka-chaos cluster``: start, inspect and remove clusters of any backend; build the docker
backend's image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from kafka_chaos import verdict
from kafka_chaos.cli.common import console, fail
from kafka_chaos.cli.flags import option
from kafka_chaos.clusters import dist

cluster_app = typer.Typer(no_args_is_help=True, help="Start, inspect and remove clusters of any "
                          "backend; build the docker backend's image.")


@cluster_app.command("image")
def cluster_image(
    kafka_version: str = typer.Option(None, help="Kafka version of the jars."),
) -> None:
    """Build a Kafka image for the docker backend without any registry (debootstrap + JRE +
    the jars from Maven Central; cached by content hash) and print its tag for --image."""
    from kafka_chaos.clusters import backends, docker_image

    backends.get("docker").check_environment(backends.BackendOptions(), 0, 0)
    kafka = dist.resolve(kafka_version) if kafka_version else dist.resolve()
    import docker

    tag = docker_image.ensure_image(docker.from_env(), kafka,
                                    log=Console(stderr=True).log)  # stdout: the tag only
    console.print(tag)


@cluster_app.command("up")
def cluster_up(
    backend: str = option("backend"),
    image: Optional[str] = option("image"),
    inventory: Optional[Path] = option("inventory"),
    accept_unknown_host_keys: bool = option("accept_unknown_host_keys"),
    brokers: int = option("brokers"), controllers: int = option("controllers"),
    kafka_version: str = option("kafka_version"),
    dir: Path = typer.Option(Path("runs/cluster"), help="Directory of the cluster's files."),
) -> None:
    """Start a cluster and leave it running (stop it with `cluster down`)."""
    from kafka_chaos.clusters import admin, backends

    cluster = None
    if backend in backends.ATTACHING:
        fail(f"--backend {backend} attaches to a running cluster: there is nothing to bring "
             f"up (choose one of {', '.join(backends.OWN)})")
    chosen = backends.get(backend)
    options = backends.BackendOptions(image, inventory, accept_unknown_host_keys)
    chosen.check_environment(options, brokers, controllers)
    kafka = dist.resolve(kafka_version) if kafka_version else dist.resolve()
    old = sorted(dir.glob("*/data/meta.properties"))
    if old:  # formatting would refuse it: another cluster id (and it is someone's data)
        fail(f"--dir {dir} holds the data of an earlier cluster ({old[0].parent}); "
             f"remove it (rm -r {dir}) or choose another --dir")
    try:
        cluster = chosen.create(kafka, dir, brokers, controllers, {}, options)
        cluster.setup()
        admin.wait_ready(cluster.bootstrap_servers, brokers, [], timeout_s=120)
    except BaseException:
        if cluster is not None:
            cluster.teardown()  # only what this call created
        raise
    _made(backend).write_text(json.dumps({"dir": str(dir.resolve())}))
    console.print(f"cluster up: bootstrap servers {cluster.bootstrap_servers}")


def _made(backend: str) -> Path:
    """Where ``cluster up`` records the directory of the cluster it made (``--dir``), so that
    ``cluster down`` removes that cluster's data: the tool's state directory
    (``$XDG_STATE_HOME/kafka-chaos``, beside the backends' own records)."""
    from kafka_chaos.clusters.local import state_dir

    state_dir().mkdir(parents=True, exist_ok=True)
    return state_dir() / f"cluster-up-{backend}.json"


def _remove_data(backend: str) -> list[str]:
    """The data directories (``<dir>/<node>/data``: the log dirs and ``meta.properties``) of
    the cluster ``cluster up`` made with ``backend``, removed once its processes are gone, so
    the next ``cluster up`` formats a new one; its logs and configurations stay. Only what
    ``cluster up`` recorded: a run's own node directories stay with the run."""
    record = _made(backend)
    try:
        made = Path(json.loads(record.read_text())["dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    removed = []
    for data in sorted(made.glob("*/data")):
        shutil.rmtree(data, ignore_errors=True)
        removed.append(f"data of node {data.parent.name} ({data}; its logs stay in "
                       f"{data.parent})")
    record.unlink(missing_ok=True)
    return removed


@cluster_app.command("status")
def cluster_status(backend: str = option("backend")) -> None:
    """Show the recorded cluster and which of its processes are alive."""
    from kafka_chaos.clusters import backends

    state = backends.get(backend).status(backends.BackendOptions())
    if state is None:
        console.print(f"no {backend} cluster recorded")
        raise typer.Exit(0)
    for node in state.get("nodes", []):
        alive = state["alive"].get(str(node["node_id"]), False)
        console.print(f"{node['name']:>4} id={node['node_id']} {node['host']} "
                      f"{','.join(node['roles'])}: {'[green]running' if alive else '[red]down'}[/]")
    console.print(f"bootstrap servers: {state.get('bootstrap_servers')}")


@cluster_app.command("down")
def cluster_down(
    backend: str = option("backend"),
    inventory: Optional[Path] = typer.Option(None, help="ssh backend: also clean these hosts "
                                             "when no cluster is recorded on this machine."),
    accept_unknown_host_keys: bool = option("accept_unknown_host_keys"),
    compose_project: Optional[str] = option("compose_project"),
    containers: Optional[str] = option("containers"),
) -> None:
    """Remove the cluster and anything a crashed run left (local: processes, namespaces,
    iptables rules; docker: labelled containers and network; ssh: remote processes, the
    tool's iptables chains, node directories; the data of a cluster `cluster up` made, its
    logs kept; and the analysis warm-up's history of a run killed while it warmed up). On
    attached containers (docker-attach), only the tool's own faults are undone: its iptables
    chains, a pause; nothing is removed. Exit 255 when something could not be removed (each
    named)."""
    from kafka_chaos.analysis.warm import remove_stale
    from kafka_chaos.clusters import backends

    removed = backends.get(backend).cleanup(
        backends.BackendOptions(
            inventory=inventory, accept_unknown_host_keys=accept_unknown_host_keys,
            compose_project=compose_project,
            containers=tuple(c for c in (containers or "").split(",") if c)))
    removed += remove_stale()
    if not any(item.startswith("NOT") for item in removed):
        removed += _remove_data(backend)
    for item in removed:
        console.print(f"[red]{item}[/]" if item.startswith("NOT") else f"removed {item}")
    if not removed:
        console.print("nothing to remove")
    if any(item.startswith("NOT") for item in removed):
        raise typer.Exit(verdict.EXIT_ERROR)


