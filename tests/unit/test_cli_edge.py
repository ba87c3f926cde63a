"""One edge for exit codes (``cli.common.Edge``): an error a command did not handle leaves
every command and subcommand with the code of its kind (``kafka_chaos.verdict``), its message
on stderr; never Python's 1, which is this tool's "violation"."""

from __future__ import annotations

import errno
from typing import Any

import pytest
import typer
import typer.testing
from typer.testing import CliRunner

from kafka_chaos.cli import app
from kafka_chaos.errors import (BadInput, ClusterError, DistributionError, HistoryError,
                                JavaClientError, KafkaChaosError, WireError)


def _leaves(group: Any, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _leaves(command, path + (name,))
        else:
            yield path + (name,), command


def _forced(error: BaseException, monkeypatch) -> list[tuple[str, ...]]:
    """The paths of the CLI's commands, the CLI (a fresh command tree of it, which
    ``CliRunner.invoke`` is made to use) with every command's body replaced by one that
    raises ``error``."""
    root = typer.main.get_command(app)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _: root)
    paths = []
    for path, command in _leaves(root):
        def body(**_: object) -> None:
            raise error
        command.callback, command.params = body, []
        paths.append(path)
    return paths


@pytest.mark.parametrize("error, code", [
    (RuntimeError("forced: a bug"), 255),
    (KeyError("forced: a bug"), 255),
    (ValueError("forced: a bug no command expected"), 255),
    (OSError(errno.ENOSPC, "No space left on device (forced)", "runs/x"), 255),
    (KafkaChaosError("forced: a failure"), 255),
    (ClusterError("forced: no cluster"), 255),
    (WireError("forced: no answer"), 255),
    (JavaClientError("forced: the JVM died"), 255),
    (BadInput("forced: fix it"), 254),
    (HistoryError("forced: line 3"), 254),
    (DistributionError("forced: no such Kafka"), 254),
    (KeyboardInterrupt(), 2),
])
def test_every_command_exits_with_the_code_of_an_error_it_did_not_handle(error, code,
                                                                       monkeypatch):
    paths = _forced(error, monkeypatch)
    assert len(paths) >= 17, paths  # run, analyze, ..., cluster up, spark-server start, ...
    assert ("cluster", "up") in paths and ("plan", "check") in paths
    for path in paths:
        got = CliRunner().invoke(app, list(path))
        assert got.exit_code == code, (path, got.output)
        assert got.stdout == "", (path, got.stdout)  # every error message goes to stderr
        assert ("interrupted" if code == 2 else "forced") in got.stderr, (path, got.stderr)
        if code == 255 and not isinstance(error, (KafkaChaosError, OSError)):
            assert "Traceback" in got.stderr and "a bug of kafka-chaos" in got.stderr


def test_the_wire_and_ssh_errors_are_cluster_errors_and_the_tree_is_the_drawn_one():
    """The drawing in ``kafka_chaos/errors.py`` is the code: every class it names exists
    there, and every error class of the project is in the drawing."""
    import inspect

    from kafka_chaos import errors

    drawn = {word for line in errors.__doc__.splitlines() for word in line.split()
             if word.isidentifier() and word[0].isupper() and hasattr(errors, word)}
    defined = {name for name, obj in vars(errors).items()
               if inspect.isclass(obj) and issubclass(obj, errors.KafkaChaosError)}
    assert drawn == defined and len(defined) >= 27
    assert issubclass(errors.WireError, errors.ClusterError)
    assert issubclass(errors.SshError, errors.ClusterError)
    assert errors.PublishError("x").exit_code == 254  # as documented: bad input
