"""What a real-cluster run must have given its checks a chance at, apart from what it checks.

A scenario proves its own preconditions: faults that landed, transactions both committed and
aborted, a group that committed. When a run on a slow machine did not meet one (in a CI run of
2026-12-01, brokers killed every 5 s left 5 transactions committed in 25 s where other runs
committed 21-198), the test learnt nothing: its outcome is unknown, like a run's verdict, not
a failure of what it checks. ``require`` raises ``PreconditionUnmet`` then, and
pytest-rerunfailures runs the test once more (``reruns`` and ``only_rerun`` in
``pyproject.toml``); a second unmet run fails, and the report lists the first as ``RERUN``.
Any other failure, a wrong verdict above all, fails at once: it is never run again.
"""

from __future__ import annotations


class PreconditionUnmet(AssertionError):
    """The run did not give the test's checks their chance (an ``AssertionError``, so a
    test that would fail anyway reads as it always did)."""


def require(met: object, what: object) -> None:
    """Raise ``PreconditionUnmet(what)`` unless ``met`` is true. ``what``: what the run fell
    short of, with the figures it had (a tuple or dict is shown as is)."""
    if not met:
        raise PreconditionUnmet(what)
