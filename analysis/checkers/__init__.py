"""The anomaly checkers, by the name used in results (Jepsen's error-type names).

Each checker is a pure function of the loaded DataFrames returning
``{"count": n, "examples": [up to 5 dicts]}``; see the modules for the rules and their sources.
"""

from __future__ import annotations

from typing import Any, Callable

from analysis.checkers.lost import lost_writes, unseen
from analysis.checkers.offsets import duplicates, inconsistent_offsets, nonmonotonic_sends
from analysis.load import History

#: name -> checker over a loaded history, in report order.
CHECKERS: dict[str, Callable[[History], dict[str, Any]]] = {
    "lost-write": lambda h: lost_writes(h.sends, h.reads),
    "unseen": lambda h: unseen(h.sends, h.reads, h.polls),
    "duplicate": lambda h: duplicates(h.sends, h.reads),
    "inconsistent-offsets": lambda h: inconsistent_offsets(h.sends, h.reads),
    "nonmonotonic-send": lambda h: nonmonotonic_sends(h.sends),
}

__all__ = ["CHECKERS", "lost_writes", "unseen", "duplicates", "inconsistent_offsets",
           "nonmonotonic_sends"]
