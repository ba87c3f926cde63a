"""The operation log: one `Op` record, an append-only JSON Lines writer and a validating reader.

Model (Jepsen, jepsen-io/history): every client operation is recorded as an ``invoke`` followed
by exactly one completion of the same process: ``ok`` (it happened), ``fail`` (it certainly did
not happen) or ``info`` (unknown: it may or may not have happened). The file format is described
in ``docs/history-format.md``.
"""

from history.op import Op, OpType, NEMESIS
from history.store import HistoryWriter, HistoryError, read_history, pair_ops

__all__ = ["Op", "OpType", "NEMESIS", "HistoryWriter", "HistoryError", "read_history", "pair_ops"]
