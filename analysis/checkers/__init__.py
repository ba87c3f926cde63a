"""The anomaly checkers, under the names used in results (Jepsen's error-type names).

Each checker is a function of the loaded ``History`` and its ``Versions`` returning the cases
(``common.cases``) of the anomalies its name lists; see the modules for the rules and their
sources.
"""

from __future__ import annotations

from typing import Any, Callable

from pyspark.sql import DataFrame

from kafka_chaos.analysis.checkers import (consumer, cycles, lost, offsets, owners, polls,
                                           rewind, sends, share, txn)
from kafka_chaos.analysis.checkers.versions import Versions, versions
from kafka_chaos.analysis.load import History
from kafka_chaos.catalogue.anomalies import (ANOMALIES, CONSUMER_SIDE,  # re-exported
                                             CORRUPT_READ, EOS_DUPLICATE, GARBAGE_READ,
                                             GROUP_OVERLAP,
                                             GROUP_REWIND, SHARE, SHARE_UNJUDGED)

#: How ``analysis.check`` runs them: name -> function of ``(History, Versions)`` returning the
#: cases (``common.cases``) of the anomalies its name lists, joined by "+", so a checker that
#: fails marks exactly those as unknown. All cases are summarised in one Spark job
#: (``common.summarize``); the cycle search (``cycles.cycles``) runs on its own.
CHECKERS: dict[str, Callable[[History, Versions], DataFrame]] = {
    f"lost-write+unseen+{lost.UNJUDGED}": lost.unread_writes,
    "duplicate": lambda h, v: offsets.duplicates(v),
    "inconsistent-offsets": lambda h, v: offsets.inconsistent_offsets(v),
    GARBAGE_READ: lambda h, v: offsets.garbage_reads(v),
    CORRUPT_READ: lambda h, v: offsets.corrupt_reads(h),
    "nonmonotonic-send+int-nonmonotonic-send+int-send-skip": lambda h, v: sends.send_order(v),
    "poll-skip+nonmonotonic-poll+int-poll-skip+int-nonmonotonic-poll": polls.poll_order,
    "G1a+precommitted-read": lambda h, v: txn.invisible_reads(v),
    f"group-skip+group-redelivery+{GROUP_REWIND}+{EOS_DUPLICATE}": consumer.delivery,
    GROUP_OVERLAP: lambda h, v: owners.overlaps(h),
    rewind.NAME: rewind.unrewound,
    "+".join([*SHARE, SHARE_UNJUDGED]): lambda h, v: share.check(h),
}

#: What completes the examples after the counts: name (anomalies joined by "+") -> function of
#: ``(Versions, {anomaly: examples})`` that adds fields to the examples in place, in one Spark
#: job over a few literals (``analysis.check`` calls it for the anomalies found).
EXAMPLES: dict[str, Callable[[Versions, dict[str, list[dict[str, Any]]]], None]] = {
    "duplicate+inconsistent-offsets": offsets.example_ops,
}

__all__ = ["ANOMALIES", "CONSUMER_SIDE", "CHECKERS", "EXAMPLES", "Versions", "versions", "cycles"]
