"""Hand-made verdicts (``results.json`` contents) for tests of what renders them."""

from __future__ import annotations

from kafka_chaos.analysis import promises
from kafka_chaos.analysis.checkers import ANOMALIES


def verdict(config: dict, found: dict[str, tuple[int, list[dict]]], *,
            reasons: tuple[str, ...] = (), fail_on: str = "violation",
            facts: dict | None = None) -> dict:
    """A ``results.json`` as ``analysis.check`` and the CLI write it: ``found`` maps anomaly
    names to ``(count, examples)``; each is judged by the real promises table."""
    judged = promises.facts_of(config, set())
    anomalies = {}
    for name in ANOMALIES:
        count, examples = found.get(name, (0, []))
        anomalies[name] = {"count": count, "examples": examples, **promises.judge(name, judged),
                           "side": "log"}
    names = [n for n in ANOMALIES if anomalies[n]["count"]]
    violations = [n for n in names if not anomalies[n]["permitted"]]
    return {"valid": False if violations else ("unknown" if reasons else True),
            "anomalies": anomalies, "anomaly_types": names, "violations": violations,
            "permitted": [n for n in names if anomalies[n]["permitted"]],
            "unknown_reasons": list(reasons), "fail_on": fail_on, "analysis_time_s": 2.5,
            "run": facts if facts is not None else {"seed": 7, "kafka_version": "3.9.1",
                                                    "total_s": 40.0}}
