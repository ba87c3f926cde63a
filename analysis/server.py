"""A Spark Connect server kept running on this machine, so that each analysis is a client of
a warm driver instead of launching and warming a JVM of its own (``kafka-chaos spark-server``).

A fresh ``kafka-chaos analyze`` of a small history spends most of its time before checking
anything: about 6 s to launch the driver JVM, then a cold first check (planner and operator
classes loaded, code compiled) twice as slow as the next ones (``docs/performance.md``). The
server pays both once; ``--spark-master sc://127.0.0.1:PORT`` then sends each check's plans
to it over gRPC (Spark Connect, SPARK-39375). It is Spark's own server class
(``SparkConnectServer``) from the pyspark installation, started through its ``spark-submit``
as ``sbin/start-connect-server.sh`` would, bound to 127.0.0.1 unless told otherwise.

The server's state (pid, URL, log) is a JSON file in a folder of its own; ``start`` refuses a
second server for the same folder, ``stop`` ends the process group it started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from kafka_chaos.analysis.spark import (CONF_DIR, CONNECT_PORT, JVM_ENV, driver_settings,
                                        heap_settings, local_threads)
from kafka_chaos.errors import ServerBusy, ServerError
from kafka_chaos.waiting import WaitTimeout, wait_until

#: Spark's class of the Connect server (matched by name in ``SparkSubmit``).
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: How long ``start`` waits for the server to accept connections, seconds.
START_TIMEOUT_S = 120.0
#: How long ``stop`` waits after SIGTERM before SIGKILL, seconds.
STOP_TIMEOUT_S = 20.0
#: Default folder of the server's state and log.
DEFAULT_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kafka-chaos" \
    / "spark-server"


@dataclass(frozen=True)
class Server:
    """A started server: ``pid`` of its ``spark-submit`` process (a process group leader),
    ``url`` (``sc://host:port``) for ``--spark-master``, ``log`` its output, ``master`` its
    own Spark master."""
    pid: int
    url: str
    log: str
    master: str


def _state(folder: Path) -> Path:
    return folder / "server.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (ended, its parent has not collected it yet) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def status(folder: Path = DEFAULT_DIR) -> Server | None:
    """The server started for ``folder`` if its process still runs, else None (a state file
    left by a server that died is removed)."""
    path = _state(folder)
    if not path.is_file():
        return None
    server = Server(**json.loads(path.read_text()))
    if _alive(server.pid):
        return server
    path.unlink(missing_ok=True)
    return None


def start(folder: Path = DEFAULT_DIR, port: int = CONNECT_PORT, host: str = "127.0.0.1",
          master: str = "local[2]", conf: dict[str, str] | None = None,
          timeout_s: float = START_TIMEOUT_S) -> Server:
    """Start a Spark Connect server listening on ``host``:``port`` whose driver runs Spark
    master ``master``, set up like the analysis's own driver (``spark.driver_settings``);
    ``conf`` overrides those settings. Returns once the port accepts connections.

    Raises ``ServerBusy`` when a server already runs for ``folder`` or the port is taken,
    ``ServerError`` when the server exits or does not listen within ``timeout_s`` seconds
    (the error holds its log's tail). A server that did not come up, also on Ctrl-C, is
    stopped again.
    """
    import pyspark

    running = status(folder)
    if running is not None:
        raise ServerBusy(f"a server already runs for {folder}: {running.url} (pid "
                          f"{running.pid}); stop it first")
    if _answers(host, port):
        raise ServerBusy(f"{host}:{port} is taken by another process: choose another --port")
    folder.mkdir(parents=True, exist_ok=True)
    home = Path(pyspark.__file__).parent
    settings = {**driver_settings(master),
                "spark.connect.grpc.binding.address": host,
                "spark.connect.grpc.binding.port": str(port)}
    threads = local_threads(master)
    if threads is not None:  # what clients read as its parallelism (``spark.cores``)
        settings["spark.default.parallelism"] = str(threads)
    settings = heap_settings({**settings, **(conf or {})})
    argv = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", master,
            "--name", "kafka-chaos Spark Connect server"]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**JVM_ENV, **os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(CONF_DIR)}
    if master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log = folder / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(argv + ["spark-internal"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    server = Server(proc.pid, f"sc://{host}:{port}", str(log), master)
    _state(folder).write_text(json.dumps(asdict(server)))
    try:
        try:  # until it listens, or it exited
            wait_until(lambda: _answers(host, port) or proc.poll() is not None, timeout_s,
                       0.25, f"the Spark Connect server on {host}:{port}")
        except WaitTimeout:
            pass
        if not _answers(host, port):
            why = (f"exited with {proc.returncode}" if proc.poll() is not None
                   else f"did not listen on {host}:{port} within {timeout_s:g} s")
            raise ServerError(f"the Spark Connect server {why}; end of {log}:\n" + _tail(log))
    except BaseException:  # also Ctrl-C while it launches: nothing left running
        stop(folder)
        raise
    return server


def stop(folder: Path = DEFAULT_DIR, timeout_s: float = STOP_TIMEOUT_S) -> Server | None:
    """Stop the server started for ``folder`` (SIGTERM to its process group, SIGKILL after
    ``timeout_s`` seconds) and remove its state file. Returns it, or None if none ran."""
    server = status(folder)
    if server is None:
        return None
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            wait_until(lambda: not _alive(server.pid), wait_s, 0.1,
                       f"the server (pid {server.pid}) to exit")
        except WaitTimeout:
            pass
        if not _alive(server.pid):
            break
    _state(folder).unlink(missing_ok=True)
    return server


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(unreadable: {exc})"


def warm(url: str, checks: int = 1) -> list[float]:
    """Check ``analysis.warm``'s made-up history ``checks`` times on the server at ``url``, so
    that a user's first check finds the planner and operators loaded and compiled; then end
    this process's client session. Returns each check's wall seconds. Raises whatever
    ``analysis.check`` raises."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from kafka_chaos.analysis.warm import warm_up

    try:
        return [warm_up(url)["analysis_time_s"] for _ in range(checks)]
    finally:
        active = ConnectSession.getActiveSession()
        if active is not None:
            active.stop()
