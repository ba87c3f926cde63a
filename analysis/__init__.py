"""Offline analysis of a kafka-chaos history with Spark: Jepsen's Kafka anomaly checkers, Elle
cycles, and the verdict judged against what the run's configuration promises.

Entry point: ``check(path)`` (``verdict``). Layout: ``load`` (DataFrames of both history
formats), ``checkers`` (one module per family of anomalies), ``elle`` (bounded cycle
search, networkx), ``promises`` (configuration -> permitted anomalies), ``stats``,
``spark`` (the session), ``warm`` (a warm-up check while a short run goes).

The package's face loads nothing: ``check`` and the other names below come from
``verdict`` when first used (PEP 562), so importing ``kafka_chaos.analysis.names`` (a
table of constants) does not start to load pyspark (1-2 s; issue 50).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["check", "AnalysisError", "HistoryError", "ANOMALIES", "CHECKERS", "History", "load",
           "session"]


def __getattr__(name: str) -> Any:
    """``check`` and the rest of ``__all__`` from ``verdict``; a submodule by its name."""
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.verdict"), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
