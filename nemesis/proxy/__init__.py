"""A Kafka protocol proxy between the workload's clients and the brokers (``server``), and
the part of the protocol it speaks (``codec``).

``KafkaProxy`` and ``ProxyError`` come from ``server`` when first used (PEP 562): the
schedule and the scenario scripts import ``faults`` (the request faults' model) on every
command, and ``server`` loads kio's protocol types (about 1 s; issue 50)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["KafkaProxy", "ProxyError"]


def __getattr__(name: str) -> Any:
    """``KafkaProxy`` and ``ProxyError`` from ``server``; a submodule by its name."""
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.server"), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
