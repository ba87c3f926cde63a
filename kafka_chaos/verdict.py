"""The verdict of a run, for every renderer: the analysis result judged with what the run
itself proved (``judge_run``), its exit code under ``--fail-on`` and its banner (one kind, one
headline, the reasons it is unknown). Pure: no I/O.

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


def _share_state(share: dict) -> list[str]:
    """Why a share group's state after its quiet drain leaves the verdict unknown: the
    coordinator did not describe it, or a share-partition's start offset (SPSO) stops short
    of its end (lag above 0: records the broker still counts as in flight or available,
    which the drain never got and the history cannot name)."""
    after = share.get("after")
    if share.get("drain") != "ok":
        return []  # the checker judges no unsettled record then (share-not-judged)
    if not isinstance(after, dict):
        return [f"the share group {share.get('group')} was not described after its drain: "
                f"{after}"]
    stuck = {k: s for k, s in sorted(after.items()) if s.get("lag") != 0}
    if not stuck:
        return []
    shown = ", ".join(f"key {k}: start offset {s.get('start_offset')}, lag {s.get('lag')}"
                      for k, s in list(stuck.items())[:5])
    return [f"after its quiet drain, share group {share.get('group')} still holds records "
            f"the history cannot name ({shown})"]


def judge_run(result: dict, facts: dict) -> dict:
    """Merge what the run itself proved into the analysis verdict (Jepsen's ``checker/compose``
    order, false > unknown > true): a scripted scenario whose precondition was not met
    (``facts["scenario"]["unmet"]``, e.g. the ISR never shrank) makes a valid result
    ``"unknown"`` with the unmet step among ``unknown_reasons``; violations found stay
    violations. So does a final heal that did not complete (``facts["heal_left"]``: a fault
    that could not be undone, a node not running), and a client driver that failed while
    the workload ran (``facts["client"]["failed"]``), or a consumer group that did not run
    the protocol asked for (``facts["group"]``), or a share group whose state after its final
    drain still holds records (``facts["share"]``). The faults asked for that never ran
    (``facts["faults_not_run"]``) are named in ``result["faults_not_run"]`` (the verdict
    stands: what ran was checked). Returns ``result``, changed in place."""
    reasons = []
    if unmet := (facts.get("scenario") or {}).get("unmet"):
        reasons.append(f"scenario precondition not met: {unmet}")
    if left := facts.get("heal_left"):
        reasons.append(f"the final heal did not complete: {'; '.join(left)}")
    group = facts.get("group") or {}
    if group.get("asked") == "consumer" and group.get("type") != "consumer":
        reasons.append(f"--group-protocol consumer asked, but the coordinator describes the "
                       f"group as {group.get('type')}: the run did not test KIP-848")
    if share := facts.get("share"):
        reasons.extend(_share_state(share))
    if failed := (facts.get("client") or {}).get("failed"):
        reasons.append(f"the client driver failed while the workload ran: {failed}")
    if facts.get("faults_not_run"):
        result["faults_not_run"] = list(facts["faults_not_run"])
    for reason in reasons:
        if reason not in result.setdefault("unknown_reasons", []):
            result["unknown_reasons"].append(reason)
        if result.get("valid") is True:
            result["valid"] = "unknown"
    return result
