"""What the operating system shows of the processes a test started: found by command line in
``/proc``, as a user would find them (``pgrep -P``), not through the code under test."""

from __future__ import annotations

import os
from pathlib import Path


def children(marker: str, parent: int | None = None) -> list[int]:
    """Pids of the children of ``parent`` (default: this process) whose command line holds
    ``marker``, oldest first; a child that has ended and was reaped is not among them."""
    parent = os.getpid() if parent is None else parent
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent and marker.encode() in cmdline:
            found.append(int(stat.parent.name))
    return sorted(found)


def state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``T``, ``Z``, ...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
