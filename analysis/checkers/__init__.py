"""The anomaly checkers, under the names used in results (Jepsen's error-type names).

Each checker is a pure function of the loaded DataFrames returning
``{"count": n, "examples": [up to 5 dicts]}``; see the modules for the rules and their sources.
"""

from __future__ import annotations

from typing import Any, Callable

from analysis.checkers.lost import lost_writes, unread_writes, unseen
from analysis.checkers.offsets import duplicates, inconsistent_offsets, nonmonotonic_sends
from analysis.load import History

#: Anomaly names, in report order.
ANOMALIES = ["lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-send"]

#: How ``analysis.check`` runs them: checker name -> function of a History returning
#: ``{anomaly name: {"count", "examples"}}`` (lost-write and unseen share one Spark job).
CHECKERS: dict[str, Callable[[History], dict[str, dict[str, Any]]]] = {
    "lost-write+unseen": lambda h: unread_writes(h.sends, h.reads, h.polls),
    "duplicate": lambda h: {"duplicate": duplicates(h.sends, h.reads)},
    "inconsistent-offsets": lambda h: {
        "inconsistent-offsets": inconsistent_offsets(h.sends, h.reads)},
    "nonmonotonic-send": lambda h: {"nonmonotonic-send": nonmonotonic_sends(h.sends)},
}

__all__ = ["ANOMALIES", "CHECKERS", "lost_writes", "unseen", "unread_writes", "duplicates",
           "inconsistent_offsets", "nonmonotonic_sends"]
