"""The operation log: one `Op` record, an append-only JSON Lines writer and a validating reader.

Model (Jepsen, jepsen-io/history): every client operation is recorded as an ``invoke`` followed
by exactly one completion of the same process: ``ok`` (it happened), ``fail`` (it certainly did
not happen) or ``info`` (unknown: it may or may not have happened). The file format is described
in ``docs/history-format.md``; ``history.validate`` checks a whole file, streaming.
"""

from kafka_chaos.history.op import MONITOR, NEMESIS, SYSTEM_PROCESSES, Op, OpType
from kafka_chaos.history.store import (FORMAT, HistoryError, Pairer, iter_history, pair_ops,
                                       read_header, read_history)
from kafka_chaos.history.writer import HistoryWriter

__all__ = ["Op", "OpType", "NEMESIS", "MONITOR", "SYSTEM_PROCESSES", "FORMAT", "HistoryWriter", "HistoryError", "Pairer",
           "iter_history", "read_header", "read_history", "pair_ops"]
