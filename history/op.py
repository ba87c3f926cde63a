"""The one operation record every other package reads and writes."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

#: Process name of fault-injection ops (Jepsen records the nemesis as a process too).
NEMESIS = "nemesis"
#: Process name of the cluster-state monitor's samples (``nemesis.monitor``).
MONITOR = "monitor"
#: The processes that are not clients: their ops are about the cluster, not the data.
SYSTEM_PROCESSES = (NEMESIS, MONITOR)


class OpType(str, Enum):
    """Jepsen op types: ``invoke`` starts an op; ``ok``/``fail``/``info`` complete it."""

    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclasses.dataclass(frozen=True)
class Op:
    """One line of the history.

    Fields:
        index: position in the history, 0, 1, 2, ... with no gaps.
        time: ns since the start of the run (monotonic clock).
        process: client process id (int >= 0), ``"nemesis"`` or ``"monitor"``.
        type: ``invoke | ok | fail | info``.
        f: what the op does: ``send``, ``poll`` for clients; ``kill``, ``start``, ``partition``,
            ``heal``, ... for the nemesis.
        value: JSON-able payload; shapes per ``f`` are in ``docs/history-format.md``.
        error: short error name when the op did not end ``ok`` (e.g. ``"_MSG_TIMED_OUT"``), else None.
    """

    index: int
    time: int
    process: int | str
    type: OpType
    f: str
    value: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The op as a plain dict, as written to one JSON Lines line."""
        return {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type.value,
            "f": self.f,
            "value": self.value,
            "error": self.error,
        }

    @property
    def is_client(self) -> bool:
        """True for ops of client processes, False for the nemesis and the monitor."""
        return self.process not in SYSTEM_PROCESSES
