"""The ``kafka-chaos`` Typer application and its sub-applications; the command modules of
this package register themselves on them (``kafka_chaos.cli`` imports every one)."""

from __future__ import annotations

import faulthandler
import signal
import sys
from typing import Optional

import typer

from kafka_chaos import __version__, verdict
from kafka_chaos.cli.cluster import cluster_app
from kafka_chaos.cli.common import Edge
from kafka_chaos.cli.spark import spark_app

# click (which typer vendors) exits 2 on a usage error (an unknown option, a bad value): the
# unknown verdict's code here, and a typo must not read as "the run could not decide". Its
# class is reached through typer's public BadParameter, one of its subclasses.
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_USAGE_ERROR.exit_code = verdict.EXIT_BAD_INPUT

# cls: every command's unhandled error becomes its exit code in one place
app = typer.Typer(cls=Edge, no_args_is_help=True,
                  help="Jepsen-style chaos testing of real Kafka clusters.")


def _version(shown: bool) -> None:
    if shown:
        print(f"kafka-chaos {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True,
        metavar="", help="Print the version and exit.")) -> None:
    """Jepsen-style chaos testing of real Kafka clusters."""
    # a run that seems stuck shows where each of its threads is: kill -USR1 <pid> (on the
    # process's own stderr, which a test's captured stream is not)
    if sys.__stderr__ is not None:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
        # a crash in a native library (librdkafka, the JVM bridge) names the Python line
        # that called it, instead of a process gone without a word
        faulthandler.enable(file=sys.__stderr__, all_threads=True)


app.add_typer(cluster_app, name="cluster")
plan_app = typer.Typer(no_args_is_help=True, help="Plan files: their JSON schema, and checking "
                       "one without running it.")
app.add_typer(plan_app, name="plan")
app.add_typer(spark_app, name="spark-server")
