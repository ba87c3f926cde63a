"""The ``kafka-chaos`` Typer application and its sub-applications; the command modules of
this package register themselves on them (``kafka_chaos.cli`` imports every one)."""

from __future__ import annotations

from typing import Optional

import typer

from kafka_chaos import __version__
from kafka_chaos.cli.cluster import cluster_app
from kafka_chaos.cli.spark import spark_app

app = typer.Typer(no_args_is_help=True,
                  help="Jepsen-style chaos testing of real Kafka clusters.")


def _version(shown: bool) -> None:
    if shown:
        print(f"kafka-chaos {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True,
        help="Print the version and exit.")) -> None:
    """Jepsen-style chaos testing of real Kafka clusters."""
app.add_typer(cluster_app, name="cluster")
plan_app = typer.Typer(no_args_is_help=True, help="Plan files: their JSON schema, and checking "
                       "one without running it.")
app.add_typer(plan_app, name="plan")
app.add_typer(spark_app, name="spark-server")
