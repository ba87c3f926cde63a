"""``kafka-chaos spark-server``: a Spark Connect server kept warm on this machine
(``analysis.server``), which ``analyze`` and ``run`` use with ``--spark-master sc://...``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kafka_chaos import verdict
from kafka_chaos.cli.common import console, fail

spark_app = typer.Typer(no_args_is_help=True, help="A Spark Connect server kept warm on this "
                        "machine: each analysis then skips the JVM launch and the cold first "
                        "check (--spark-master sc://127.0.0.1:15002).")
DIR = typer.Option(None, "--dir", help="Folder of the server's state and log (default "
                   "~/.cache/kafka-chaos/spark-server).")


@spark_app.command("start")
def start_cmd(
    port: int = typer.Option(15002, help="Port of the server (Spark Connect's default)."),
    host: str = typer.Option("127.0.0.1", help="Address it listens on; clients elsewhere "
                             "must read the histories at the same paths."),
    master: str = typer.Option("local[2]", help="The server's own Spark master."),
    spark_conf: Optional[List[str]] = typer.Option(
        None, "--spark-conf", help="key=value Spark setting of the server (repeatable)."),
    warm_up: int = typer.Option(2, min=0, help="Checks of a made-up history run on it before "
                                "this returns (0: none)."),
    dir: Optional[Path] = DIR,
) -> None:
    """Start the server, warm it up, and print its URL for --spark-master."""
    from kafka_chaos.analysis import server
    from kafka_chaos.analysis.spark import check_master, parse_conf

    try:
        check_master(master)
        conf = parse_conf(spark_conf)
    except ValueError as exc:
        fail(str(exc))
    folder = dir or server.DEFAULT_DIR
    try:
        started = server.start(folder, port, host, master, conf)
    except server.ServerBusy as exc:
        fail(str(exc))
    except (server.ServerError, OSError) as exc:
        fail(str(exc), verdict.EXIT_ERROR)
    except KeyboardInterrupt:  # start stopped what it launched
        fail("interrupted: no server started", verdict.EXIT_UNKNOWN)
    console.print(f"Spark Connect server started (pid {started.pid}, log {started.log})")
    if warm_up:
        try:
            walls = server.warm(started.url, warm_up)
        except BaseException as exc:
            server.stop(folder)
            fail("interrupted: server stopped" if isinstance(exc, KeyboardInterrupt) else
                 f"the warm-up check failed, server stopped: {str(exc)[:300]}",
                 verdict.EXIT_UNKNOWN if isinstance(exc, KeyboardInterrupt)
                 else verdict.EXIT_ERROR)
        console.print("warmed up: " + ", ".join(f"{w:.1f} s" for w in walls))
    console.print(f"--spark-master {started.url}")


@spark_app.command("stop")
def stop_cmd(dir: Optional[Path] = DIR) -> None:
    """Stop the server started for --dir."""
    from kafka_chaos.analysis import server

    stopped = server.stop(dir or server.DEFAULT_DIR)
    console.print(f"stopped {stopped.url} (pid {stopped.pid})" if stopped else "none running")


@spark_app.command("status")
def status_cmd(dir: Optional[Path] = DIR) -> None:
    """Print the running server's URL and pid, or "none running"; exit 0 either way."""
    from kafka_chaos.analysis import server

    running = server.status(dir or server.DEFAULT_DIR)
    # no server is an answer, not a failure: 1 is this tool's "anomalies", and cluster status
    # and spark-server stop exit 0 on nothing there too
    if running is None:
        console.print("none running")
        return
    console.print(f"{running.url} (pid {running.pid}, master {running.master}, "
                  f"log {running.log})")
