"""Hand-made verdicts (``results.json`` contents) for tests of what renders them."""

from __future__ import annotations

from kafka_chaos.analysis import promises
from kafka_chaos.analysis.checkers import ANOMALIES


def verdict(config: dict, found: dict[str, tuple[int, list[dict]]], *,
            reasons: tuple[str, ...] = (), fail_on: str = "violation",
            facts: dict | None = None) -> dict:
    """A ``results.json`` as ``analysis.check`` and the CLI write it: ``found`` maps anomaly
    names to ``(count, examples)``; each is judged by the real promises table, a rule judged
    finding by finding (``promises.judge``'s ``per_case``) as holding for every finding."""
    judged = promises.facts_of(config)
    anomalies = {}
    for name in ANOMALIES:
        count, examples = found.get(name, (0, []))
        verdict = promises.judge(name, judged)
        # a rule judged finding by finding is taken to hold for every finding made here
        permitted = bool(count) and (verdict["permitted"] or verdict["per_case"])
        outcome = "permitted" if permitted else "violation"
        anomalies[name] = {"count": count, "examples": [dict(ex, outcome=outcome)
                                                        for ex in examples],
                           "permitted": permitted, "rule": verdict["rule"],
                           "because": verdict["because"], "source": verdict["source"],
                           "outcomes": {"permitted": count if permitted else 0,
                                        "violation": 0 if permitted else count,
                                        "unexplained": 0},
                           "rules": {verdict["rule"]: count} if permitted else {},
                           "side": "log"}
    names = [n for n in ANOMALIES if anomalies[n]["count"]]
    violations = [n for n in names if not anomalies[n]["permitted"]]
    return {"valid": False if violations else ("unknown" if reasons else True),
            "anomalies": anomalies, "anomaly_types": names, "violations": violations,
            "permitted": [n for n in names if anomalies[n]["permitted"]], "unexplained": [],
            "unknown_reasons": list(reasons), "fail_on": fail_on, "analysis_time_s": 2.5,
            "run": facts if facts is not None else {"seed": 7, "kafka_version": "3.9.1",
                                                    "total_s": 40.0}}
