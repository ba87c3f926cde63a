"""One way to wait for something with a deadline: ``wait_until``.

Bounded waits are everywhere a chaos tool touches a cluster (a mount appears, a daemon exits,
a leader moves, a server listens), and each hand-written loop had its own off-by-one about the
last check. Here the condition is always checked once more at the deadline, and a timeout is
an error that says what was awaited and for how long. Imports nothing of the project.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from kafka_chaos.errors import WaitTimeout

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float, every_s: float, what: str,
               sleep: Callable[[float], object] | None = None) -> T:
    """Call ``condition`` every ``every_s`` seconds until it returns a truthy value, and
    return that value; it is called at least once, and once more at the deadline.

    Args:
        condition: checked with no argument; an exception it raises propagates at once (a
            process that died is no reason to wait on).
        timeout_s: seconds from now to the last check.
        every_s: seconds between checks (the last sleep is cut to the deadline).
        what: the awaited thing, for the error: ``"the mount at /x"``.
        sleep: how to pass ``every_s`` (an ``Event.wait`` stops early when it is set);
            ``time.sleep`` as found when called (so a test's fake clock reaches it).

    Raises ``WaitTimeout`` ("``what`` within ``timeout_s`` s") when it never held.
    """
    sleep = sleep or time.sleep
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"{what} within {timeout_s:g} s")
        sleep(min(every_s, left))
