"""The anomaly checkers, under the names used in results (Jepsen's error-type names).

Each checker is a function of the shared ``Inputs`` returning ``{anomaly: {"count": n,
"examples": [up to 5 dicts]}}`` for the anomalies it reports; see the modules for the rules and
their sources.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from pyspark.sql import DataFrame

from kafka_chaos.analysis.checkers import consumer, cycles, lost, offsets, polls, sends, txn
from kafka_chaos.analysis.checkers.versions import Versions, observations
from kafka_chaos.analysis.load import History
from kafka_chaos.analysis.names import ANOMALIES, CONSUMER_SIDE  # re-exported


@dataclasses.dataclass
class Inputs:
    """What the checkers share: the history, its ``Versions``, and lazily built, cached tables
    (the read stream of ``polls``)."""

    h: History
    v: Versions
    _cached: list = dataclasses.field(default_factory=list)

    @functools.cached_property
    def stream(self) -> DataFrame:
        """``polls.read_stream``, cached."""
        df = polls.read_stream(self.h, self.v).cache()
        self._cached.append(df)
        return df

    @functools.cached_property
    def obs(self) -> DataFrame:
        """``versions.observations``."""
        return observations(self.h, self.v.acked)

    def unpersist(self) -> None:
        """Drop the tables cached here (and the ``Versions``)."""
        for df in self._cached:
            df.unpersist()
        self.v.unpersist()


#: How ``analysis.check`` runs them: name -> function of ``Inputs`` returning the cases
#: (``common.cases``) of the anomalies its name lists, joined by "+", so a checker that fails
#: marks exactly those as unknown. All cases are summarised in one Spark job
#: (``common.summarize``); the cycle search (``cycles.cycles``) runs on its own.
CHECKERS: dict[str, Callable[[Inputs], DataFrame]] = {
    f"lost-write+unseen+{lost.UNJUDGED}":
        lambda c: lost.unread_writes(c.h, c.v, polls.covered_runs(c.stream)),
    "duplicate": lambda c: offsets.duplicates(c.obs),
    "inconsistent-offsets": lambda c: offsets.inconsistent_offsets(c.obs),
    "nonmonotonic-send+int-nonmonotonic-send+int-send-skip": lambda c: sends.send_order(c.h, c.v),
    "poll-skip+nonmonotonic-poll+int-poll-skip+int-nonmonotonic-poll":
        lambda c: polls.poll_order(c.stream),
    "G1a+precommitted-read": lambda c: txn.invisible_reads(c.h, c.v),
    "group-skip+group-redelivery": lambda c: consumer.delivery(c.h),
}

__all__ = ["ANOMALIES", "CONSUMER_SIDE", "CHECKERS", "Inputs", "Versions", "cycles"]
