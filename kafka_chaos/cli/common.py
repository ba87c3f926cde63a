"""What the CLI's commands share: the consoles, the one edge where an error becomes an exit
code (``Edge``, the root command group), SIGTERM handled as Ctrl-C, and the options several
commands take."""

from __future__ import annotations

import signal
import traceback
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup
from typer.exceptions import TyperException

from kafka_chaos import verdict
from kafka_chaos.errors import KafkaChaosError

#: What a command prints: its results (stdout, for pipes) ... (``log`` lines without the
#: source file each was logged from: 16 of a CI log's 80 columns, and nothing a user reads)
console = Console(log_path=False)
#: ... and its errors (stderr): ``fail`` and the edge print there.
err_console = Console(stderr=True)


def fail(message: str, code: int = verdict.EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` on stderr and exit ``code``: 254 (bad input) unless the tool
    failed while it ran (``verdict.EXIT_ERROR``) or the verdict is unknown (``EXIT_UNKNOWN``).
    Raises ``typer.Exit``."""
    # soft_wrap: a path or a name in the message stays whole on one line, for grep and logs;
    # escape: "[n1]" in a message is text, not Rich markup.
    err_console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


class Edge(TyperGroup):
    """The root command group, and the one place where an error a command did not handle
    becomes an exit code (``kafka_chaos.verdict``), for every command and subcommand:

    - an error of the tree (``kafka_chaos.errors``): its message, and its ``exit_code`` (254
      bad input, 255 a failure);
    - Ctrl-C (or SIGTERM, ``sigterm_as_interrupt``): 2, unknown;
    - ``OSError``: the file and the reason, 255;
    - anything else (a bug): its traceback, then 255: never 1, which is "violation".

    A command still catches what it can say more about (``run`` writes the unknown verdict of
    a run that crashed); typer's own exits (usage errors, ``typer.Exit``) pass through.
    """

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except KafkaChaosError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", verdict.EXIT_UNKNOWN)
        except OSError as exc:
            fail(f"{exc.filename or ''}{': ' if exc.filename else ''}"
                 f"{exc.strerror or exc}", verdict.EXIT_ERROR)
        except Exception as exc:
            err_console.print(escape(traceback.format_exc()), soft_wrap=True, end="")
            fail(f"{type(exc).__name__}: {exc} (a bug of kafka-chaos: the traceback is above)",
                 verdict.EXIT_ERROR)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def sigterm_as_interrupt() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt``, so that ``kill <runner>`` heals and tears
    down as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


FAIL_ON = typer.Option("violation", help="Exit 1 on a 'violation' (an anomaly the configuration "
                       "does not permit) or on 'any' anomaly.")
