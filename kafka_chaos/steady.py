"""The steady-state check of a run: the limits a user sets on its availability
(``--max-unavailable``, ``--max-recovery``, a plan's ``checkers:``) judged against the figures
the verdict carries (``verdict.RunVerdict.availability_figures``).

Chaos tools call this the steady-state hypothesis (chaostoolkit: a probe's tolerance, checked
after the experiment); OpenChaos reports a recovery time per fault. It is judged apart from
the history's anomalies: a run whose every acknowledged write survived is still ``valid``
when its steady state broke, and its exit code is 1 with the limit named
(``RunVerdict.banner``). A limit that cannot be judged (no send attempted, the history not
readable for figures) makes the verdict unknown: a limit asked for is never passed unseen.
"""

from __future__ import annotations

import re
from typing import Any

#: How the verdict's unknown reason starts when a limit could not be judged.
UNJUDGED = "the steady state could not be judged"
_UNAVAILABLE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|s)?\s*$")


def parse_unavailable(text: str) -> tuple[str, float]:
    """``--max-unavailable`` text -> ``(unit, amount)``: ``"10%"`` -> ``("%", 10.0)``, the share
    of the workload's time with no acknowledged send; ``"30s"`` or ``"30"`` -> ``("s", 30.0)``,
    that time in seconds. Raises ``ValueError`` naming the flag for any other text, or a share
    above 100 %."""
    m = _UNAVAILABLE_RE.match(str(text))
    if not m:
        raise ValueError(f"--max-unavailable {text!r}: give a share of the run's time (10%) "
                         "or seconds (30s)")
    amount, unit = float(m.group(1)), m.group(2) or "s"
    if unit == "%" and amount > 100:
        raise ValueError(f"--max-unavailable {text}: a share is at most 100%")
    return unit, amount


def canonical(text: str) -> str:
    """``--max-unavailable`` text as results.json and the tables write it (``"10%"``,
    ``"30s"``). Raises ``ValueError`` as ``parse_unavailable``."""
    unit, amount = parse_unavailable(text)
    return f"{amount:.6f}".rstrip("0").rstrip(".") + unit  # never 1e-05: it must parse again


def judge(figures: dict[str, Any], max_unavailable: str | None,
          max_recovery_s: float | None) -> dict[str, Any]:
    """The steady-state check: ``{}`` when no limit is set, else ``{"max_unavailable",
    "max_recovery_s"`` (the limits, None where not set), ``"held"`` (True, False, or None when
    it could not be judged), ``"broken"`` (one sentence per limit broken) and
    ``"unjudged"`` (why it could not be judged, or None)}.

    ``figures`` is ``RunVerdict.availability_figures()`` (empty without figures): the time
    with no acknowledged send (``no_ack_pct`` of the workload's time, ``no_ack_s`` in s)
    against ``max_unavailable``; every fault healed against ``max_recovery_s`` (s from the
    heal to the first acknowledged send invoked after it, ``slowest_recovery_s``; a heal that
    no acknowledgement followed, ``unrecovered``, breaks it too)."""
    if max_unavailable is None and max_recovery_s is None:
        return {}
    out: dict[str, Any] = {"max_unavailable": max_unavailable,
                           "max_recovery_s": max_recovery_s, "broken": [], "unjudged": None}
    if not figures:
        out["held"] = None
        out["unjudged"] = ("no availability figures (no send attempted, or the history could "
                           "not be read for them)")
        return out
    if max_unavailable is not None:
        unit, limit = parse_unavailable(max_unavailable)
        seen = figures["no_ack_pct"] if unit == "%" else figures["no_ack_s"]
        if seen > limit:
            out["broken"].append(
                f"no acknowledged send for {figures['no_ack_s']} s of {figures['workload_s']} s "
                f"({figures['no_ack_pct']} %), above --max-unavailable {max_unavailable}")
    if max_recovery_s is not None:
        slowest = figures.get("slowest_recovery_s")
        if slowest is not None and slowest > max_recovery_s:
            out["broken"].append(f"slowest recovery after a heal {slowest} s, above "
                                 f"--max-recovery {max_recovery_s:g}")
        if figures.get("unrecovered"):
            out["broken"].append(f"{figures['unrecovered']} healed fault(s) never followed by "
                                 f"an acknowledged send (--max-recovery {max_recovery_s:g})")
    out["held"] = not out["broken"]
    return out


def line(state: dict[str, Any]) -> str | None:
    """``judge``'s result in one line for the terminal and ``summary.md`` (None without
    limits): ``held (--max-unavailable 10%, --max-recovery 15)``, ``BROKEN: <each limit
    broken>`` or ``not judged: <why>``."""
    if not state:
        return None
    limits = ", ".join(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
                       for flag, value in (("--max-unavailable", state.get("max_unavailable")),
                                           ("--max-recovery", state.get("max_recovery_s")))
                       if value is not None)
    if state.get("broken"):
        return f"BROKEN: {'; '.join(state['broken'])}"
    if state.get("held") is None:
        return f"not judged ({limits}): {state.get('unjudged')}"
    return f"held ({limits})"
