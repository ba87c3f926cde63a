"""The ``run`` options, made from the settings table (``kafka_chaos.settings``): one typer
option per ``RunConfig`` field that has a flag, with the field's default and help, so the
command line cannot drift from the configuration (``tests/unit/test_architecture.py``).

Typer reads a command's options from its signature; ``with_settings`` gives a command the
settings' parameters as a generated ``__signature__``.
"""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from kafka_chaos.config import PATHS, SETTINGS, RunConfig


def default_of(field: str) -> Any:
    """The flag's default: the field's, written as the flag takes it (``--nemesis none``,
    ``--ops-per-txn 1..4``)."""
    value = RunConfig.model_fields[field].get_default(call_default_factory=True)
    if field == "nemesis":
        return ",".join(value) or "none"
    if field == "ops_per_txn":
        return f"{value[0]}..{value[1]}"
    return value


def _kind(field: str) -> Any:
    """The type typer parses the flag as: text for choices, ranges and lists (``RunConfig``
    checks them and names the flag), paths for paths, else the field's own."""
    annotation = RunConfig.model_fields[field].annotation
    if field in PATHS:
        return Optional[Path]
    if annotation == bool | None:  # a switch that may be left unset (``--idempotence``)
        return Optional[bool]
    if annotation in (bool, int, float, str):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # ``str | None``
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return Optional[kinds[0]] if kinds in ([int], [float]) else Optional[str]
    return str


def option(field: str) -> Any:
    """The typer option of a ``RunConfig`` field (``typer.Option``). Raises ``KeyError`` for
    a field without a flag (``options.NO_FLAG``)."""
    s = SETTINGS[field]
    if not s.flag:
        raise KeyError(f"{field} has no flag")
    if RunConfig.model_fields[field].annotation in (bool, bool | None):
        # no metavar: ``--txn`` takes no value (typer would print <bool>)
        return typer.Option(default_of(field), f"{s.flag}/--no-{s.flag[2:]}", metavar="",
                            help=s.help)
    return typer.Option(default_of(field), s.flag, help=s.help)


def parameter(field: str) -> inspect.Parameter:
    """The keyword parameter a command takes for ``field``, typed and defaulted as typer
    needs."""
    return inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=option(field),
                             annotation=_kind(field))


def with_settings(command: Callable[..., Any], *, before: list[str],
                  fields: list[str] | None = None) -> Callable[..., Any]:
    """``command`` with a signature of its own parameters named in ``before``, then one
    parameter per setting in ``fields`` (default: every field with a flag), then its other
    parameters: typer reads the options from it and calls ``command`` with keyword
    arguments. Returns ``command``."""
    own = inspect.signature(command).parameters
    fields = fields if fields is not None else [f for f, s in SETTINGS.items() if s.flag]
    first = [own[n] for n in before]
    rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for n, p in own.items()
            if n not in before and p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        first + [parameter(f) for f in fields] + rest)
    return command
