"""Package faces that load nothing until a name is used (PEP 562).

A package whose ``__init__`` imports its heavy modules makes every importer of any of its
submodules pay for them: the anomaly names (a table of constants, then in ``analysis``)
loaded pyspark, and the request faults' model loaded kio's protocol types, on every command
(issue 50; ``docs/performance.md``, "Start-up")."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any


def face(package: str, module: str, names: Iterable[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each of ``names`` from its submodule
    ``module``, imported on first use; any other name as the submodule of that name. An
    unknown name raises ``AttributeError``, as a plain module would."""
    handed_on = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in handed_on:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
