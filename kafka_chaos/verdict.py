"""The verdict of an analysis result, for every renderer: the exit code under ``--fail-on``
and the banner (one kind, one headline, the reasons it is unknown). Pure: no I/O.

Exit codes of every command (``docs/report.md``): 0 valid; 1 anomalies counted under
``--fail-on``; 2 the verdict is unknown (the record cannot decide, a precondition was not met,
an interrupt); 254 bad input (a flag, a plan, a history, a file or an environment the run
cannot use: fix it and run again; Jepsen's code for bad arguments); 255 the tool failed while
it ran (a cluster that did not come up, a crash of the run or of the analysis, a report that
could not be written; Jepsen's code for a crash). Never 0 when the analysis failed.
"""

from __future__ import annotations

from typing import Any

#: Exit codes (the module's docstring).
EXIT_VALID, EXIT_ANOMALIES, EXIT_UNKNOWN, EXIT_BAD_INPUT, EXIT_ERROR = 0, 1, 2, 254, 255
#: ``--fail-on`` choices: exit 1 on a violation only, or on any anomaly found.
FAIL_ON = ("violation", "any")


def exit_code(result: dict, fail_on: str = "violation") -> int:
    """The exit code of a verdict.

    ``fail_on="violation"``: 1 when ``valid`` is False (an anomaly the configuration does not
    permit), 0 when True, 2 when ``"unknown"``. ``fail_on="any"``: 1 when any anomaly was found,
    permitted or not (false ranks above unknown, as in Jepsen's ``checker/compose``), else as
    for ``violation``.
    """
    if fail_on == "any" and result.get("anomaly_types"):
        return EXIT_ANOMALIES
    valid = result.get("valid")
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_ANOMALIES
    return EXIT_UNKNOWN


def word(results: dict[str, Any]) -> str:
    """The one word of a verdict: ``valid`` (every anomaly found is permitted, if any),
    ``violation`` or ``unknown``."""
    valid = results.get("valid")
    return "valid" if valid is True else "violation" if valid is False else "unknown"


def banner(results: dict[str, Any]) -> dict[str, Any]:
    """The verdict as every renderer shows it (terminal, report, comparison, trends):
    ``kind`` (``valid``, ``permitted``, ``violation`` or ``unknown``), a
    ``headline`` and the ``reasons`` a verdict is unknown."""
    anomalies = results.get("anomalies") or {}

    def listed(names: list[str]) -> str:
        return ", ".join(f"{n} ({(anomalies.get(n) or {}).get('count')})" for n in names)

    valid = results.get("valid")
    permitted = results.get("permitted") or []
    if valid is False:
        kind, headline = "violation", f"VIOLATIONS: {listed(results.get('violations') or [])}"
    elif valid is True and permitted:
        kind, headline = "permitted", f"VALID, with permitted anomalies: {listed(permitted)}"
    elif valid is True:
        kind, headline = "valid", "VALID: no anomaly found"
    else:
        kind, headline = "unknown", "UNKNOWN: no verdict"
    if valid is not True and permitted:
        headline += f"; permitted: {listed(permitted)}"
    if results.get("faults_not_run"):
        headline += f"; never ran: {', '.join(results['faults_not_run'])}"
    return {"kind": kind, "headline": headline,
            "reasons": results.get("unknown_reasons") or []}
