"""Per-node clock skew with libfaketime (Debian's ``libfaketime``), preloaded into the broker JVM.

What it skews: the wall clock the JVM reads (``CLOCK_REALTIME``: ``System.currentTimeMillis``,
hence record timestamps with ``LogAppendTime``, time-based retention and segment rolling,
log-append and request timestamps in logs). What it cannot: the monotonic clock
(``System.nanoTime``: timeouts, session expiry, ``replica.lag.time.max.ms`` run on it; faking
it hangs the JVM), the kernel's clock (TCP timers, iptables) and other processes, so clients
and the monitor keep true time. The offset is read from a file on every clock call
(``FAKETIME_NO_CACHE``: with libfaketime's one-second cache a change took up to several seconds
to show), so a bump shows at once without a restart. ``FAKETIME_FORCE_MONOTONIC_FIX=0``: with
the fix glibc builds turn on, the JVM's timed waits go wrong and KRaft elections never finish.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafka_chaos.clusters.errors import EnvironmentUnsupported

#: Where Debian's libfaketime package puts the library (multi-arch paths).
LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1")


def library() -> str | None:
    """The libfaketime shared object on this machine, or None."""
    return next((lib for lib in LIBS if os.path.exists(lib)), None)


def check_environment() -> None:
    """Raise ``EnvironmentUnsupported`` (with the fix) unless libfaketime is installed here."""
    if library() is None:
        raise EnvironmentUnsupported("clock skew needs libfaketime: apt-get install libfaketime")


def env(offset_file: str | Path, lib: str | None = None) -> dict[str, str]:
    """Environment variables that put a process under libfaketime, its offset read from
    ``offset_file`` (``write_offset``). ``lib``: the library's path on the node (default: this
    machine's)."""
    return {"LD_PRELOAD": lib or library() or LIBS[0],
            "FAKETIME_TIMESTAMP_FILE": str(offset_file),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0"}


def offset_text(offset_s: float) -> str:
    """libfaketime's relative offset syntax for ``offset_s`` seconds, e.g. ``"+3600.000000"``."""
    return f"{offset_s:+.6f}\n"


def write_offset(offset_file: Path, offset_s: float) -> None:
    """Set the offset (seconds, negative = behind) a process under ``env`` reads next;
    written atomically so a reader never sees a half-written file."""
    tmp = offset_file.with_suffix(".tmp")
    tmp.write_text(offset_text(offset_s))
    tmp.replace(offset_file)


def parse_offset(text: str) -> float:
    """The offset ``offset_text`` wrote, seconds (0.0 for an empty or unreadable text)."""
    try:
        return float(text.strip() or 0)
    except ValueError:
        return 0.0


def read_offset(offset_file: Path) -> float:
    """The offset in ``offset_file``, seconds (0.0 when there is none)."""
    try:
        return parse_offset(Path(offset_file).read_text())
    except OSError:
        return 0.0
