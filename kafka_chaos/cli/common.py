"""What the CLI's commands share: the console, the one way to fail (a message and an exit code),
SIGTERM handled as Ctrl-C, and the options several commands take."""

from __future__ import annotations

import signal
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from kafka_chaos import verdict
from kafka_chaos.errors import KafkaChaosError

console = Console()


def exit_of(exc: BaseException) -> int:
    """The exit code of an error: its own (``kafka_chaos.errors``: 254 bad input, 255 a
    failure), else 254 (a ``ValueError`` of an option or file)."""
    return exc.exit_code if isinstance(exc, KafkaChaosError) else verdict.EXIT_BAD_INPUT


def fail(message: str, code: int = verdict.EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` and exit ``code``: 254 (bad input) unless the tool failed
    while it ran (``verdict.EXIT_ERROR``) or the verdict is unknown (``EXIT_UNKNOWN``)."""
    # soft_wrap: a path or a name in the message stays whole on one line, for grep and logs;
    # escape: "[n1]" in a message is text, not Rich markup.
    console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def sigterm_as_interrupt() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt``, so that ``kill <runner>`` heals and tears
    down as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


FAIL_ON = typer.Option("violation", help="Exit 1 on a 'violation' (an anomaly the configuration "
                       "does not permit) or on 'any' anomaly.")
